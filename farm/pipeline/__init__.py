"""The pipeline: runs the stages for one harness and judges its records by the harness's
limitations. This module is its public face; the code lives in the modules beside it:

- ``harness``: ``run_harness``, trace and then one loop over the checks (``registry``; the
  interface: ``check``), one module per check: ``lowering``, ``native`` (compile, execute,
  crossexec, xhost, the artifact's round trip), ``symbolic``, ``effects``, ``features``,
  ``pallas``, ``gradients``;
- ``artifact``: a stored export as a job (``ArtifactJob``, what a replay schedules),
  run by ``run_harness`` through the same stages, verdicts and limitations;
- ``compile_cache``: ``CompileCache``, one compile per distinct module in a worker;
- ``memory``: ``clear_caches`` and ``rss_bytes`` for long-lived workers;
- ``isolation``: the timeout / retry-alone / crashed policy every runner of worker processes applies;
- ``references``, ``irctx``, ``meshes``.

The result cache's keys are ``farm.cache``; planted faults are ``farm.faults``; the
environment a worker measures in is ``farm.host``.

jax is imported inside the functions that use it, here and in ``farm.stages``, and this
package's exports are imported on first use: ``farm.pipeline.isolation`` is imported by
the Ray scheduler and by the standalone worker before it installs ``farm.cache.recorder``'s
import hook (jax must not be imported before it), and ``run_harness``'s module imports jax.
"""
import importlib
from typing import Any

#: What this package exports, and the module each comes from: imported on first use, so
#: that importing ``farm.pipeline.isolation`` does not import jax with the package.
_EXPORTS = {"ArtifactJob": "artifact", "CompileCache": "compile_cache", "jax_version": "harness",
            "run_harness": "harness", "clear_caches": "memory", "rss_bytes": "memory"}
_CONTRACT = ("Artifact", "Options", "Outcome", "Record", "Reuse")


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"farm.pipeline.{_EXPORTS[name]}"), name)
    elif name in _CONTRACT:
        value = getattr(importlib.import_module("farm.results"), name)
    else:
        raise AttributeError(f"module 'farm.pipeline' has no attribute {name!r}")
    globals()[name] = value
    return value


__all__ = ["ArtifactJob", "Artifact", "CompileCache", "Options", "Outcome", "Record", "Reuse", "clear_caches", "jax_version",
           "rss_bytes", "run_harness"]
