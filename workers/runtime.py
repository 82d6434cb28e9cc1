"""What every worker process does, with or without Ray: set up jax once, resolve jobs
to harnesses, run them through the pipeline, and keep memory bounded."""
from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import Any

#: Forced host devices so multi-device harnesses (shard_map, NamedSharding) can run on CPU.
HOST_DEVICES = 8


def configure_process() -> None:
    """Environment a worker needs before jax is imported."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={HOST_DEVICES}".strip()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


class JobRunner:
    """Imports jax and the catalog once; runs harnesses by fingerprint."""

    def __init__(self, catalog: str, modules: list[str], options: dict[str, Any],
                 clear_every: int = 200) -> None:
        configure_process()
        from farm import catalog as cat
        from farm.pipeline import irctx

        irctx.install()  # one MLIR context per 64 lowerings: 1.85x faster, identical modules
        from farm.results import Options

        from farm.pipeline.faults import plant_from_env

        self.planted = plant_from_env()
        self.harnesses = cat.by_fingerprint(cat.load(catalog, modules))
        options = dict(options)
        #: the driver's digest of options and environment, the part of the cache key it looks up by
        self.options_digest: str | None = options.pop("options_digest", None)
        self.options = Options.from_dict(options)
        self.clear_every = clear_every
        self.count = 0
        self.peak_rss = 0
        #: Where outcomes say they ran; a Ray actor sets "ray:<node id>:<pid>".
        self.label = f"standalone:{socket.gethostname()}:{os.getpid()}"

    def info(self) -> dict[str, Any]:
        from farm.platforms import local_device_kinds
        from farm.pipeline.host import describe

        return {"pid": os.getpid(), "device_kinds": list(local_device_kinds()), "environment": describe(),
                "harnesses": len(self.harnesses)}

    def run_one(self, fp: str, prior: dict[str, Any] | None = None, reuse: dict[str, Any] | None = None) -> dict[str, Any]:
        """One harness; ``prior``: another host's artifact for it (``xhost.Prior`` as JSON);
        ``reuse``: an earlier run's downstream records (``pipeline.Reuse`` as a dict)."""
        from farm.pipeline import clear_caches, rss_bytes, run_harness
        from farm.results import Reuse

        h = self.harnesses.get(fp)
        if h is None:
            from farm.results import Outcome

            return Outcome.failed(fp, fp, "error", f"worker has no harness {fp}", stage="trace",
                                  error_type="UnknownHarness").to_dict()
        from farm.stages.xhost import Prior

        try:
            out = run_harness(h, self.options, Prior.from_json(prior) if prior else None,
                              Reuse.from_dict(reuse) if reuse else None, self.options_digest).to_dict()
        except Exception as e:  # the farm's own bug: one error outcome, not a dead worker
            from farm.results import Outcome

            out = Outcome.failed(fp, h.name, "error", f"farm error: {type(e).__name__}: {e}"[:500],
                                 stage="trace", error_type=type(e).__name__).to_dict()
        self.count += 1
        if self.count % self.clear_every == 0:
            clear_caches()
        rss = rss_bytes()
        self.peak_rss = max(self.peak_rss, rss)
        out["rss"] = rss
        out["pid"] = os.getpid()
        out["worker"] = self.label
        return out

    def run_batch(self, fps: list[str], reuse: dict[str, dict[str, Any]] | None = None) -> Iterator[dict[str, Any]]:
        for fp in fps:
            yield self.run_one(fp, reuse=(reuse or {}).get(fp))
