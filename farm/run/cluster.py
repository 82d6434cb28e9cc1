"""Ray glue for the sweep: start or join a cluster, ask what it offers, and talk to the
worker actors (start one, hand it a batch, read what it streams, kill it).

This is the only module of the sweep that touches Ray, and it imports ``ray`` inside
each function: ``import ray`` costs 0.7-1.1 s on top of everything ``farm.run.sweep``
imports (measured with ``time.perf_counter`` and ``python -X importtime``), and a warm
re-sweep whose results are all cached starts no cluster and must not pay for it.
"""
from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from farm.catalog import Harness
from farm.errors import ClusterError, Infeasible
from farm.platforms import DEVICE_KINDS, GPU_FRACTION, SLOT_RESOURCE, pinned_env, ray_request, slot_resource

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Cluster(NamedTuple):
    """What ``ray_init`` found: whether it started (or joined) Ray here, and the worker slots."""

    started: bool
    slots: int


class WorkerDied(Exception):
    """A worker process died (or its node went away) while running a batch."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause  # the Ray exception's type name


def ray_init(address: str | None, workers: int | None, kinds: tuple[str, ...] = ()) -> Cluster:
    """Start a local cluster or join one. A local cluster offers one ``<platform>_slot`` per
    PJRT plugin kind in ``kinds`` (the sweep has checked the plugin is registered here; the
    worker checks for its devices): a plugin device may belong to one process only."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    if ray.is_initialized():
        slots = int(ray.cluster_resources().get("cpu_slot", 0)) or (workers or 1)
        return Cluster(False, workers or slots)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p)
    if address:
        _check_reachable(address)
        try:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
        except Exception as e:
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ClusterError(f"cannot join Ray cluster at {address!r}: {msg}") from None
        slots = int(ray.cluster_resources().get("cpu_slot", 0))
        if not slots:
            slots = int(ray.cluster_resources().get("CPU", 1))
        return Cluster(True, workers or slots)
    n = workers or os.cpu_count() or 1
    # address="local": always a new cluster of our own. Without it Ray reads RAY_ADDRESS and
    # $RAY_TMPDIR/ray/ray_current_cluster, which a killed `ray start --head` leaves behind, and
    # fails ("When connecting to an existing cluster, num_cpus ... must not be provided").
    try:
        # No prestarted idle workers: every worker the farm starts is an actor with an environment
        # of its own (``Worker.start``), which a prestarted process (the job's environment) never
        # serves. The two Ray prestarts on a 2-core host cost 1.8 CPU-s of each cluster's start and
        # 0.6 CPU-s a minute while idle, beside the actors' own start (docs/testing.md).
        ray.init(address="local", num_cpus=max(n, os.cpu_count() or 1), include_dashboard=False, log_to_driver=False,
                 configure_logging=False, _system_config={"enable_worker_prestart": False,
                                                          "prestart_worker_first_driver": False},
                 resources={"cpu_slot": n, **{slot_resource(k): 1 for k in kinds if k not in DEVICE_KINDS}},
                 runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}})
    except Exception as e:  # e.g. its raylet did not start in time on an overloaded host
        ray.shutdown()
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ClusterError(f"could not start a local Ray cluster: {msg} (nothing was run; "
                           "try again, or on a busy host with fewer --workers)") from None
    return Cluster(True, n)


def _check_reachable(address: str, timeout: float = 3.0) -> None:
    """Ray retries an unreachable head for minutes; say so in seconds instead."""
    if address in ("auto", "local") or "://" in address and not address.startswith("ray://"):
        return
    hostport = address.removeprefix("ray://")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(f"bad Ray address {address!r} (expected HOST:PORT, e.g. 127.0.0.1:6379)")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise ClusterError(f"cannot join Ray cluster at {address!r}: nothing answers there ({e.strerror or e})") from None


def _slots(have: dict[str, float], kind: str, gpu_fraction: float = GPU_FRACTION) -> int:
    """How many workers of ``kind`` resources ``have`` (Ray's totals or what is free) can hold."""
    if kind == "cpu":
        return int(min(have.get(SLOT_RESOURCE["cpu"], 0), have.get("CPU", 0)))
    if kind == "gpu":
        return int(have.get("GPU", 0) / gpu_fraction + 1e-9)
    if kind == "tpu":
        return int(have.get("TPU", 0))
    return int(have.get(slot_resource(kind), 0))  # a PJRT plugin platform: its <platform>_slot


def check_feasible(run_on: tuple[str, ...], gpu_fraction: float = GPU_FRACTION) -> None:
    """Refuse up front a --run-on device no node has (Ray would wait forever)."""
    import ray

    have = ray.cluster_resources()
    kinds = [k for k in dict.fromkeys((*DEVICE_KINDS, *run_on)) if _slots(have, k, gpu_fraction) > 0]
    missing = [k for k in run_on if k not in kinds]
    if missing:
        raise Infeasible(f"--run-on {','.join(missing)} is infeasible: the cluster has "
                         f"{', '.join(f'{k} ({_slots(have, k, gpu_fraction)} slots)' for k in kinds) or 'no worker slots'}")


def running() -> bool:
    """Whether this process is connected to Ray already (never imports ``ray`` to find out)."""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


def shutdown() -> None:
    import ray

    ray.shutdown()


def capacity(kind: str, gpu_fraction: float = GPU_FRACTION) -> int:
    """The worker slots for device ``kind`` the cluster offers now (a node may have gone or come)."""
    import ray

    return _slots(ray.cluster_resources(), kind, gpu_fraction)


@dataclass(eq=False)  # workers are told apart by identity
class Worker:
    """One worker actor (a process on one device slot) and the batch it is running."""

    actor: Any
    stream: Any = None  # the running batch's outcomes, one per harness; None: idle
    batch: list[Harness] = field(default_factory=list)
    pos: int = 0  # index in ``batch`` of the harness running now
    since: float = field(default_factory=time.monotonic)  # when the batch or its last outcome came
    fresh: bool = True  # still starting: no outcome yet, and ``ready_ref`` not answered
    count: int = 0  # harnesses this process finished
    isolated: bool = False  # running one harness alone, retried after its worker died
    kind: str = "cpu"  # the device kind it runs natively on
    ready_ref: Any = None  # answered once the process has started (``HarnessWorker.ready``)
    #: the running batch's window (``workers.chunks``): > 0, a death or a hang may have taken
    #: finished outcomes with it, so its current harness is not yet known to be the cause
    window_s: float = 0.0
    _run_batch: Any = None  # ``actor.run_batch`` as a streaming call, made once (~25 us a task)
    born: float = field(default_factory=time.monotonic)  # when the actor was asked for
    up_s: float | None = None  # seconds from ``born`` to ``ready`` (its start-up), once known

    @classmethod
    def start(cls, kind: str, catalog: str, modules: list[str], options: dict[str, Any],
              env: dict[str, str], gpu_fraction: float = GPU_FRACTION, gpu_backend: str = "cuda") -> Worker:
        """A new worker actor of device ``kind``: Ray's own resources for it (``ray_request``),
        its process pinned to that backend and memory share (``pinned_env``); ``env``: extra
        environment for its process."""
        from workers.actor import HarnessWorker  # imports ray (see the module docstring)

        env_vars = {**dict(env), **pinned_env(kind, gpu_fraction, gpu_backend)}
        opts = {**ray_request(kind, gpu_fraction), "runtime_env": {"env_vars": env_vars}}
        actor = HarnessWorker.options(**opts).remote(catalog, modules, {**options, "device_kind": kind})
        return cls(actor, kind=kind, ready_ref=actor.ready.remote())

    def starting(self, now: float) -> bool:
        """Whether the process is still starting (importing jax and the catalog): the startup
        allowance applies only then. Once it has started, the running job's clock restarts
        there, so a job that hangs on a new worker is a timeout after its own limit."""
        if not self.fresh or self.ready_ref is None:
            return self.fresh
        import ray

        done, _ = ray.wait([self.ready_ref], timeout=0)
        if not done:
            return True
        self.ready_ref, self.fresh, self.since = None, False, max(self.since, now)
        self.up_s = now - self.born
        return False

    @property
    def current(self) -> Harness | None:
        return self.batch[self.pos] if self.pos < len(self.batch) else None

    def run(self, batch: list[Harness], reuse: dict[str, dict[str, Any]], isolated: bool,
            window_s: float = 0.0) -> None:
        """Start ``batch``, with the downstream priors (``reuse``) of those of its harnesses that
        have one; its outcomes come in chunks of those that finished within ``window_s``
        (``workers.chunks``; 0: one per harness, each as soon as it is done)."""
        self.batch, self.pos, self.isolated, self.window_s = batch, 0, isolated, window_s
        self.since = time.monotonic()
        # a job the worker's catalog cannot know (a stored artifact: ``travels``) goes whole
        jobs = [h if getattr(h, "travels", False) else None for h in batch]
        if self._run_batch is None:
            self._run_batch = self.actor.run_batch.options(num_returns="streaming")
        self.stream = self._run_batch.remote(
            [h.fingerprint for h in batch], {h.fingerprint: reuse[h.fingerprint] for h in batch if h.fingerprint in reuse},
            jobs if any(j is not None for j in jobs) else None, window_s)

    def advance(self, now: float) -> bool:
        """Count the harness that just finished; False (and idle) once the batch is over."""
        self.pos += 1
        self.count += 1
        self.since = now
        self.fresh = False
        if self.pos < len(self.batch):
            return True
        self.stream = None
        return False

    def kill(self) -> None:
        """Kill the actor, never restarting it; one already gone is no error."""
        import ray

        self.stream = None
        try:
            ray.kill(self.actor, no_restart=True)
        except Exception:
            pass


def wait(workers: list[Worker], timeout: float) -> list[Worker]:
    """Wait up to ``timeout`` seconds for a busy worker to have something; then every worker
    that does (a second wait that does not block): one turn of the driver serves them all,
    instead of one turn per outcome."""
    import ray

    streams = [w.stream for w in workers]
    ready, rest = ray.wait(streams, num_returns=1, timeout=timeout)
    if ready and rest:
        more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
        ready += more
    ids = {id(g) for g in ready}
    return [w for w in workers if id(w.stream) in ids]


def fetch(workers: list[Worker]) -> list[list[dict[str, Any]] | None | WorkerDied]:
    """The next chunk of outcomes of each ready worker (``workers.chunks``: the outcomes of its
    next harnesses, in order) in one ``ray.get`` (None: its batch is over; a ``WorkerDied``:
    it died), instead of one call per worker."""
    import ray
    from ray.exceptions import RayError

    from workers.chunks import decode

    refs: list[Any] = []
    for w in workers:
        try:
            refs.append(next(w.stream))
        except StopIteration:
            refs.append(None)
        except RayError as e:
            refs.append(WorkerDied(type(e).__name__))
    live = [r for r in refs if r is not None and not isinstance(r, WorkerDied)]
    try:
        got = {id(r): decode(b) for r, b in zip(live, ray.get(live))} if live else {}
    except RayError:  # one of them died: ask each alone to tell which
        got = {}
        for r in live:
            try:
                got[id(r)] = decode(ray.get(r))
            except RayError as e:
                got[id(r)] = WorkerDied(type(e).__name__)
    return [r if r is None or isinstance(r, WorkerDied) else got[id(r)] for r in refs]
