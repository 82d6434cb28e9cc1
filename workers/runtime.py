"""What every worker process does, with or without Ray: set up jax once, resolve jobs
to harnesses, run them through the pipeline, and keep memory bounded."""
from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from farm.results import Outcome

#: Forced host devices so multi-device harnesses (shard_map, NamedSharding) can run on CPU.
HOST_DEVICES = 8


def configure_process() -> None:
    """Environment a worker needs before jax is imported."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={HOST_DEVICES}".strip()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _identity(x: Any, *rest: Any) -> Any:
    return x


def _watch_setup() -> None:
    """Load jax instrumented from now on (``farm.cache.recorder``): which of its code each
    harness runs is recorded. Before jax is imported, or not at all (``RECORDER.why_not``).
    Its directory is found by path, not through ``sys.meta_path``: a finder there (a
    ``sitecustomize`` hook) may act once, on the import itself."""
    import importlib.machinery

    from farm.cache import key as cachekey
    from farm.cache.recorder import RECORDER

    spec = importlib.machinery.PathFinder.find_spec("jax")
    locations = list(getattr(spec, "submodule_search_locations", None) or [])
    if len(locations) != 1:
        RECORDER.why_not = f"jax has {len(locations)} package directories on sys.path"
        return
    RECORDER.install(locations[0], code_cache=cachekey.code_cache())


class JobRunner:
    """Imports jax and the catalog once; runs harnesses by fingerprint."""

    def __init__(self, catalog: str, modules: list[str], options: dict[str, Any],
                 clear_every: int = 200) -> None:
        configure_process()
        # which of jax's code each harness runs (farm.cache.recorder): jax is loaded instrumented
        _watch_setup()
        from farm import catalog as cat
        from farm.pipeline import irctx
        from farm.cache.recorder import RECORDER

        irctx.install()  # one MLIR context per 64 lowerings: 1.85x faster, identical modules
        from farm.results import Options

        from farm.faults import plant_from_env

        self.planted = plant_from_env()
        self.harnesses = cat.by_fingerprint(cat.load(catalog, modules))
        options = dict(options)
        #: the driver's digest of options and environment, the part of the cache key it looks up by
        self.options_digest: str | None = options.pop("options_digest", None)
        #: the device kind this worker is pinned to (a Ray actor of that kind); None: standalone
        self.device_kind: str | None = options.pop("device_kind", None)
        self.options = Options.from_dict(options)
        #: why this worker cannot run its kind natively (no such device behind its pinned backend)
        self.missing_device = self._check_device()
        #: why this worker cannot lower for a plugin platform it was asked for (its plugin is absent)
        self.missing_plugin = self._check_plugins()
        self.described = False  # the first outcome carries the environment
        self.clear_every = clear_every
        self.count = 0
        self.peak_rss = 0
        #: Where outcomes say they ran; a Ray actor sets "ray:<node id>:<pid>".
        self.label = f"standalone:{socket.gethostname()}:{os.getpid()}"
        #: What a Ray actor holds (resources, GPU ids, visible devices); recorded with its environment.
        self.placement: dict[str, Any] = {}
        if RECORDER.watching and not (self.missing_plugin or self.missing_device):
            self._warm_up()  # only to be recorded: a process that records nothing needs none
        from farm.cache.key import jax_tree

        keyed = jax_tree()
        RECORDER.end_setup(keyed.root if keyed else "")  # what set-up and the warm-up ran is every harness's

    def _warm_up(self) -> None:
        """Run one harness with its function replaced by the identity while the set-up is
        watched: the machinery every harness uses (backends, each platform's lowering,
        export, compile, the catalog's argument makers) is set up, and recorded, here."""
        import dataclasses

        from farm.pipeline import run_harness

        for h in self.harnesses.values():
            if not h.mesh and h.devices == 1:
                try:
                    run_harness(dataclasses.replace(h, fun=_identity), self.options)
                except Exception:  # a warm-up that fails leaves set-up to the first harness: still sound
                    pass
                return

    def _check_device(self) -> str | None:
        """A worker pinned to a device kind its host lacks says so on every harness, rather
        than compiling on whatever backend jax falls back to."""
        if self.device_kind is None:
            return None
        from farm.platforms import local_device_kinds

        if self.device_kind in local_device_kinds():
            return None
        return (f"this {self.device_kind} worker finds no {self.device_kind} device "
                f"(JAX_PLATFORMS={os.environ.get('JAX_PLATFORMS', '')!r} on {socket.gethostname()})")

    def _check_plugins(self) -> str | None:
        """This worker lowers for every ``--platforms`` name: a PJRT plugin platform needs its
        plugin here too, else jax would lower for the unknown name with the default rules."""
        from farm.platforms import PluginMissing, check_targets

        try:
            check_targets(tuple(self.options.platforms), ())
        except PluginMissing as e:
            return f"{e} (on {socket.gethostname()})"
        return None

    def info(self) -> dict[str, Any]:
        from farm.platforms import PIN_VARS, local_device_kinds, native_platform
        from farm.host import describe

        return {"pid": os.getpid(), "device_kinds": list(local_device_kinds()), "environment": describe(),
                "harnesses": len(self.harnesses), "device_kind": self.device_kind,
                "platform": native_platform(self.device_kind or "cpu"), "missing_plugin": self.missing_plugin,
                "missing_device": self.missing_device, "pinned": {v: os.environ.get(v) for v in PIN_VARS}}

    def _not_runnable(self, fp: str, name: str) -> Outcome:
        from farm.platforms import native_platform
        from farm.results import Outcome, Record

        platform = native_platform(self.device_kind or "cpu")
        return Outcome(fp, name, tuple(Record(stage, platform, "not_runnable_here", error_type="NoDevice",
                                              error=self.missing_device or "")
                                       for stage in ("compile", "execute")))

    def run_one(self, fp: str, prior: dict[str, Any] | None = None, reuse: dict[str, Any] | None = None) -> Outcome:
        """One harness; ``prior``: another host's artifact for it (``xhost.Prior`` as JSON);
        ``reuse``: an earlier run's downstream records (``pipeline.Reuse`` as a dict)."""
        from farm.pipeline import run_harness
        from farm.results import Reuse

        h = self.harnesses.get(fp)
        if h is None:
            from farm.results import Outcome

            return Outcome.failed(fp, fp, "error", f"worker has no harness {fp}", stage="trace",
                                  error_type="UnknownHarness")
        if self.missing_plugin:
            from farm.results import Outcome

            return self._stamp(Outcome.failed(fp, h.name, "error", self.missing_plugin, stage="lower",
                                              error_type="PluginMissing"), 0)
        if self.missing_device:
            return self._stamp(self._not_runnable(fp, h.name), 0)
        from farm.stages.xhost import Prior

        return self._finish(lambda: run_harness(h, self.options, Prior.from_json(prior) if prior else None,
                                                Reuse.from_dict(reuse) if reuse else None,
                                                self.options_digest), fp, h.name)

    def _finish(self, run: Any, fp: str, name: str) -> Outcome:
        """Run one job; the farm's own bug is one error outcome, not a dead worker. Caches
        are cleared every ``clear_every`` jobs and memory is measured."""
        from farm.pipeline import clear_caches, rss_bytes

        try:
            out = run()
        except Exception as e:
            from farm.results import Outcome

            out = Outcome.failed(fp, name, "error", f"farm error: {type(e).__name__}: {e}"[:500],
                                 stage="trace", error_type=type(e).__name__)
        self.count += 1
        if self.count % self.clear_every == 0:
            clear_caches()
        rss = rss_bytes()
        self.peak_rss = max(self.peak_rss, rss)
        return self._stamp(out, rss)

    def _stamp(self, out: Outcome, rss: int) -> Outcome:
        """Where the outcome ran (``Stamp``); the first one also carries this worker's own
        environment (the driver keeps it under the worker's label, which every outcome row names)."""
        from farm.results import Stamp

        environment = None
        if not self.described:
            from farm.host import describe
            from farm.platforms import native_platform

            self.described = True
            environment = {**describe(), "device_kind": self.device_kind,
                           "platform": native_platform(self.device_kind or "cpu"),
                           **({"ray": self.placement} if self.placement else {})}
        return out.replace(worker=self.label, stamp=Stamp(os.getpid(), rss, environment))

    def run_batch(self, fps: list[str], reuse: dict[str, dict[str, Any]] | None = None,
                  jobs: list[Any] | None = None) -> Iterator[Outcome]:
        """One outcome per fingerprint, in order; ``jobs[i]``, where given, is a stored
        artifact to run instead (``farm.pipeline.ArtifactJob``, what a replay schedules)."""
        for i, fp in enumerate(fps):
            job = jobs[i] if jobs else None
            yield self.run_artifact(job) if job is not None else self.run_one(fp, reuse=(reuse or {}).get(fp))

    def run_artifact(self, job: Any) -> Outcome:
        """A stored artifact through ``run_harness``, judged by its catalog harness where this
        worker's catalog still has it."""
        from farm.pipeline import run_harness

        h = self.harnesses.get(job.harness_fingerprint) if job.catalog else None
        return self._finish(lambda: run_harness(job, self.options, catalog_harness=h),
                            job.fingerprint, job.name)
