"""One module per stage. Each takes the previous stage's record and returns its own.

Records are frozen dataclasses (``Traced``, ``Lowered``, ``Census``, ``Exported``,
``Compiled``, ``Executed``, ``Compared``, ``CrossExecuted``) sharing the fields of
``Record``; live JAX objects a later stage needs travel in ``handle`` (excluded from
equality and never stored).
"""
from farm.stages.record import failure
from farm.results import Record, STATUSES

__all__ = ["STATUSES", "Record", "failure"]
