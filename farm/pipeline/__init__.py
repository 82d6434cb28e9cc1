"""The pipeline: runs the stages for one harness and judges its records by the harness's
limitations. This module is its public face; the code lives in the modules beside it:

- ``harness``: ``run_harness``, the stages in order for one harness (native runs,
  crossexec, xhost, the artifact's round trip, invariants);
- ``artifact``: a stored export as a job (``ArtifactJob``, what a replay schedules),
  run by ``run_harness`` through the same stages, verdicts and limitations;
- ``judge``: limitations applied as data (``judge_crash`` for a dead worker's outcome);
- ``compile_cache``: ``CompileCache``, one compile per distinct module in a worker;
- ``memory``: ``clear_caches`` and ``rss_bytes`` for long-lived workers;
- ``verdicts``: how outputs are judged (reference, jaxpr reference, invariant, stored);
- ``isolation``: the timeout / retry-alone / crashed policy every runner of worker processes applies;
- ``cachekey`` (with ``hermetic``: what a process loaded and its jax/XLA environment;
  ``filedigests``: memoized file hashes), ``references``, ``irctx``, ``faults``.

jax is imported inside the functions that use it, here and in ``farm.stages``: the
store imports this package (``farm.pipeline.cachekey``) and must not pay jax's ~0.9 s.
"""
from farm.pipeline.artifact import ArtifactJob
from farm.pipeline.compile_cache import CompileCache
from farm.pipeline.harness import jax_version, run_harness
from farm.pipeline.judge import judge_crash
from farm.pipeline.memory import clear_caches, rss_bytes
from farm.results import Artifact, Options, Outcome, Record, Reuse

__all__ = ["ArtifactJob", "Artifact", "CompileCache", "Options", "Outcome", "Record", "Reuse", "clear_caches", "jax_version",
           "judge_crash", "rss_bytes", "run_harness"]
