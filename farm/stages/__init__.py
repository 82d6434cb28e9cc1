"""One module per stage. Each takes the previous stage's record and returns its own.

Records are frozen dataclasses (``Traced``, ``Lowered``, ``Census``, ``Exported``,
``Serialized``, ``Compiled``, ``Executed``, ``Compared``, ``CrossHost``) sharing the
fields of ``Record``. Live JAX objects a later stage needs travel in ``handle`` (excluded
from equality and never stored), as a small frozen dataclass with named fields defined
next to the record that carries it: ``TraceHandle``, ``LoweredModule``,
``ExportedArtifact``, ``SerializedArtifact``, ``Executable``, ``Outputs``.

jax is imported inside the functions that use it, not at module top: importing jax
costs ~0.9 s (measured: ``python -c "import jax"`` after numpy, 0.6-1.1 s) that the
store, the CLI and the dashboards never need.
"""
from farm.stages.record import failure
from farm.results import Record, STATUSES

__all__ = ["STATUSES", "Record", "failure"]
