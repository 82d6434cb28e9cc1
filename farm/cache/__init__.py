"""The result cache's keys: what a stored outcome is keyed by, so that a changed input
never gets a stale result (Bazel's action cache: the digest of every input, never a
version label).

- ``key``: the installation, the farm's own code, a harness's definition, the options,
  and the three keys built from them (``result_key``, ``downstream_key``, ``deps_key``);
- ``hermetic``: what else a process runs with (every module it loaded, every jax, XLA
  or plugin environment variable);
- ``filedigests``: file hashes memoized by path, size and mtime;
- ``units``: the jax tree cut into units (one per function, plus skeletons), the
  per-harness key on the jax code it ran, and content addresses (``address``);
- ``recorder``: the import hook a worker installs before jax is imported, recording
  which units each harness runs.

Nothing here imports jax, a database, Ray or the pipeline at import time: the store,
the sweep driver and the workers (before jax) import it.
"""
