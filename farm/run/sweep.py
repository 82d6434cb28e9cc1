"""The sweep: selection → jobs → Ray workers → results streamed to the store.

One driver, one writer. Workers are long-lived Ray actors (one per slot) that stream
one outcome per harness; the driver watches every in-flight harness so that a worker
that dies is replaced (its harness retried once alone, then recorded ``crashed``) and a
worker that hangs past the time limit is killed (``timeout``). Results are committed in
batches as they arrive, so an interrupted sweep resumes without redoing anything.
"""
from __future__ import annotations

import os
import sys
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Callable

from farm.pipeline import cachekey as digest
from farm.catalog import Harness
from farm.errors import CatalogMismatch, ClusterError, Infeasible
from farm.pipeline import judge_crash
from farm.results import Options, Outcome
from farm.results import BAD
from farm.platforms import DEVICE_KINDS, SLOT_RESOURCE


@dataclass
class SweepConfig:
    workers: int | None = None  # None: every core (local) / every cpu_slot (cluster)
    address: str | None = None
    batch: int = 8
    timeout_s: float = 120.0
    startup_s: float = 120.0
    recycle_after: int = 1500  # harnesses per worker process before it is replaced
    rss_budget: int = 2_000_000_000  # bytes; a worker above this is replaced
    commit_every_s: float = 1.0
    modules: tuple[str, ...] = ()
    progress: bool | None = None  # None: a bar on a TTY, periodic lines otherwise
    env: dict[str, str] = field(default_factory=dict)  # extra environment for worker processes


@dataclass
class SweepStats:
    done: int = 0
    cached: int = 0
    crashed: int = 0
    timeouts: int = 0
    workers_replaced: int = 0
    peak_rss: dict[int, int] = field(default_factory=dict)
    bad: int = 0
    wall_s: float = 0.0
    dedup_hits: int = 0
    downstream_reused: int = 0  # re-traced and re-lowered; compile, execute and compare reused
    install_digest_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"done": self.done, "cached": self.cached, "downstream_reused": self.downstream_reused,
                "install_digest_s": round(self.install_digest_s, 3),
                "crashed": self.crashed, "timeouts": self.timeouts,
                "workers_replaced": self.workers_replaced, "bad": self.bad, "wall_s": round(self.wall_s, 3),
                "peak_rss_per_worker": max(self.peak_rss.values(), default=0),
                "workers_seen": len(self.peak_rss)}


class Progress:
    """A tqdm bar on a TTY; a plain line every few seconds otherwise (CI logs)."""

    def __init__(self, total: int, enabled: bool | None = None, every_s: float = 10.0) -> None:
        self.total, self.n, self.bad = total, 0, 0
        self.t0 = time.monotonic()
        self.last = self.t0
        self.every_s = every_s
        tty = sys.stderr.isatty() if enabled is None else enabled
        self.bar = None
        if tty:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="harness", dynamic_ncols=True, file=sys.stderr)

    def update(self, n: int, bad: int) -> None:
        self.n += n
        self.bad += bad
        if self.bar is not None:
            self.bar.update(n)
            self.bar.set_postfix(failures=self.bad, refresh=False)
            return
        now = time.monotonic()
        if now - self.last >= self.every_s or self.n == self.total:
            self.last = now
            el = now - self.t0
            rate = self.n / el if el else 0.0
            eta = (self.total - self.n) / rate if rate else float("inf")
            print(f"[farm] {self.n}/{self.total} harnesses, {rate:.1f}/s, ETA {eta:.0f}s, failures {self.bad}",
                  file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class _Slot:
    """One worker actor and the batch it is running."""

    def __init__(self, actor: Any, fresh: bool = True) -> None:
        self.actor = actor
        self.gen: Any = None
        self.batch: list[Harness] = []
        self.pos = 0
        self.since = time.monotonic()
        self.fresh = fresh
        self.count = 0
        self.isolated = False


def ray_init(address: str | None, workers: int | None) -> tuple[bool, int]:
    """Start a local cluster or join one. Returns (started_here, worker slots)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    if ray.is_initialized():
        slots = int(ray.cluster_resources().get("cpu_slot", 0)) or (workers or 1)
        return False, workers or slots
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
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
        return True, workers or slots
    n = workers or os.cpu_count() or 1
    ray.init(num_cpus=max(n, os.cpu_count() or 1), include_dashboard=False, log_to_driver=False,
             configure_logging=False, resources={"cpu_slot": n},
             runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}})
    return True, n


def _check_reachable(address: str, timeout: float = 3.0) -> None:
    """Ray retries an unreachable head for minutes; say so in seconds instead."""
    import socket

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


def check_feasible(run_on: tuple[str, ...]) -> None:
    """Refuse up front a --run-on device no node has (Ray would wait forever)."""
    import ray

    have = ray.cluster_resources()
    kinds = [k for k in DEVICE_KINDS if have.get(SLOT_RESOURCE[k], 0) > 0]
    missing = [k for k in run_on if k not in kinds]
    if missing:
        raise Infeasible(f"--run-on {','.join(missing)} is infeasible: the cluster has "
                         f"{', '.join(f'{k} ({int(have[SLOT_RESOURCE[k]])} slots)' for k in kinds) or 'no worker slots'}")


class Sweep:
    """Runs harnesses on Ray actors and hands outcomes to ``sink`` as they finish."""

    def __init__(self, harnesses: list[Harness], options: Options, catalog: str, config: SweepConfig,
                 sink: Callable[[list[Outcome], str], None], *, options_digest: str | None = None,
                 reuse: dict[str, dict[str, Any]] | None = None) -> None:
        self.harnesses = harnesses
        self.options = options
        self.catalog = catalog
        self.config = config
        self.sink = sink
        self.stats = SweepStats()
        self.options_digest = options_digest
        #: fingerprint -> an earlier run's downstream records (``pipeline.Reuse`` as a dict)
        self.reuse = reuse or {}

    def _new_actor(self, kind: str) -> _Slot:
        from workers.actor import HarnessWorker

        opts = {"platforms": list(self.options.platforms), "run_on": [kind], "warmup": self.options.warmup,
                "repeats": self.options.repeats, "crossexec": self.options.crossexec,
                "roundtrip": self.options.roundtrip, "keep_modules": self.options.keep_modules,
                "options_digest": self.options_digest}
        extra = {"runtime_env": {"env_vars": dict(self.config.env)}} if self.config.env else {}
        actor = HarnessWorker.options(num_cpus=0, resources={SLOT_RESOURCE[kind]: 1}, **extra).remote(
            self.catalog, list(self.config.modules), opts)
        return _Slot(actor)

    def run(self) -> SweepStats:
        import ray
        from ray.exceptions import RayActorError, RayError

        cfg = self.config
        t0 = time.monotonic()
        queue: deque[list[Harness]] = deque()
        hs = sorted(self.harnesses, key=lambda h: (h.family, h.group, h.dtype, h.name))
        # Small batches at the end keep both workers busy until the last harness.
        i, n = 0, len(hs)
        while i < n:
            size = max(1, min(cfg.batch, (n - i) // (2 * max(1, cfg.workers or 2)) or 1))
            queue.append(hs[i:i + size])
            i += size
        retry_alone: set[str] = set()
        node_requeues: dict[str, int] = {}
        kind = (self.options.run_on or ("cpu",))[0]
        n_slots = max(1, cfg.workers or 1)
        slots = [self._new_actor(kind) for _ in range(min(n_slots, max(1, len(queue))))]
        target = len(slots)
        # After a worker dies its slot is refilled only while the cluster has room: when a
        # node is lost, its slots go and the surviving nodes take the work.
        lost_at = -1e9
        last_check = 0.0
        progress = Progress(n, cfg.progress)
        buffer: list[Outcome] = []
        last_commit = time.monotonic()

        def flush(force: bool = False) -> None:
            nonlocal buffer, last_commit
            if buffer and (force or time.monotonic() - last_commit >= cfg.commit_every_s or len(buffer) >= 200):
                self.sink(buffer, "ray")
                buffer = []
                last_commit = time.monotonic()

        def finish(o: Outcome) -> None:
            buffer.append(o)
            self.stats.done += 1
            self.stats.downstream_reused += any("reused_from" in r.facts for r in o.records)
            bad = o.worst in BAD
            self.stats.bad += bad
            progress.update(1, int(bad))

        def replace(slot: _Slot, why: str) -> _Slot:
            try:
                ray.kill(slot.actor, no_restart=True)
            except Exception:
                pass
            self.stats.workers_replaced += 1
            return self._new_actor(kind)

        def lose(slot: _Slot) -> None:
            nonlocal lost_at
            try:
                ray.kill(slot.actor, no_restart=True)
            except Exception:
                pass
            lost_at = time.monotonic()
            return None

        def rebalance() -> None:
            """Match live workers to the slots the cluster has now (a node may have gone or come)."""
            cap = int(ray.cluster_resources().get(SLOT_RESOURCE[kind], 0))
            # More workers than slots: the newest that never started cannot be placed.
            for s in [s for s in reversed(slots) if s.fresh and s.count == 0]:  # replacements are appended
                if len(slots) <= cap:
                    break
                requeue_rest(s, s.pos)
                s.gen = None
                lose(s)
                slots.remove(s)
            while len(slots) < min(target, cap):
                slots.append(self._new_actor(kind))
                self.stats.workers_replaced += 1

        def requeue_rest(slot: _Slot, after: int) -> None:
            rest = slot.batch[after:]
            if rest:
                queue.appendleft(rest)

        try:
            while True:
                for j, slot in enumerate(slots):
                    if slot.gen is None and queue:
                        batch = queue.popleft()
                        slot.batch, slot.pos, slot.since = batch, 0, time.monotonic()
                        slot.isolated = len(batch) == 1 and batch[0].fingerprint in retry_alone
                        slot.gen = slot.actor.run_batch.options(num_returns="streaming").remote(
                            [h.fingerprint for h in batch],
                            {h.fingerprint: self.reuse[h.fingerprint] for h in batch if h.fingerprint in self.reuse})
                active = [s for s in slots if s.gen is not None]
                if not active and not queue:
                    break
                if not active:  # every worker was lost; wait for the cluster to offer slots again
                    time.sleep(0.2)
                ready, _ = ray.wait([s.gen for s in active], num_returns=1, timeout=0.2) if active else ([], [])
                now = time.monotonic()
                ready_ids = {id(g) for g in ready}
                for j, slot in enumerate(slots):
                    if slot.gen is None:
                        continue
                    cur = slot.batch[slot.pos] if slot.pos < len(slot.batch) else None
                    if id(slot.gen) in ready_ids:
                        try:
                            ref = next(slot.gen)
                            d = ray.get(ref)
                        except StopIteration:
                            slot.gen = None
                            continue
                        except (RayActorError, RayError) as e:
                            # The worker process died under this harness.
                            if cur is None:
                                slot.gen = None
                                slots[j] = lose(slot)
                                continue
                            node_lost = int(ray.cluster_resources().get(SLOT_RESOURCE[kind], 0)) < target
                            if node_lost and node_requeues.get(cur.fingerprint, 0) < 3:
                                # its node went away (the cluster has fewer slots): not the harness's fault
                                node_requeues[cur.fingerprint] = node_requeues.get(cur.fingerprint, 0) + 1
                                queue.appendleft([cur])
                                requeue_rest(slot, slot.pos + 1)
                            elif cur.fingerprint in retry_alone or slot.isolated:
                                self.stats.crashed += 1
                                finish(judge_crash(cur, Outcome.failed(cur.fingerprint, cur.name, "crashed",
                                                                       f"worker process died: {type(e).__name__}"),
                                                   (kind,)))
                                requeue_rest(slot, slot.pos + 1)
                            else:
                                retry_alone.add(cur.fingerprint)
                                queue.appendleft([cur])
                                requeue_rest(slot, slot.pos + 1)
                            slots[j] = lose(slot)
                            continue
                        o = Outcome.from_dict(d)
                        if any(r.error_type == "UnknownHarness" for r in o.records):
                            raise CatalogMismatch(
                                f"a worker (pid {d.get('pid')}) does not know harness {cur.name if cur else o.name}: "
                                "its catalog differs from the driver's (code changed during the sweep, or nodes "
                                "run different farm versions). Finished results are kept; make the code the same "
                                "everywhere, then `farm sweep --resume latest`")
                        if d.get("pid"):
                            self.stats.peak_rss[d["pid"]] = max(self.stats.peak_rss.get(d["pid"], 0), d.get("rss", 0))
                        finish(o)
                        slot.pos += 1
                        slot.count += 1
                        slot.since = now
                        slot.fresh = False
                        if slot.pos >= len(slot.batch):
                            slot.gen = None
                            if slot.count >= cfg.recycle_after or d.get("rss", 0) > cfg.rss_budget:
                                slots[j] = replace(slot, "recycle")
                        continue
                    if cur is None:
                        continue
                    limit = (cur.timeout_s or cfg.timeout_s) + (cfg.startup_s if slot.fresh else 0.0)
                    if now - slot.since > limit:
                        self.stats.timeouts += 1
                        finish(Outcome.failed(cur.fingerprint, cur.name, "timeout", f"no result after {limit:.0f}s; worker killed"))
                        requeue_rest(slot, slot.pos + 1)
                        slots[j] = replace(slot, "timeout")
                slots = [s for s in slots if s is not None]
                if len(slots) < target or now - lost_at < 60.0:
                    if now - last_check >= 1.0:
                        last_check = now
                        rebalance()
                    if not slots and now - lost_at > cfg.startup_s:
                        raise ClusterError(f"no node offers {SLOT_RESOURCE[kind]} any more "
                                           f"({len(queue)} batches left); resume the run when nodes are back")
                flush()
        except BaseException:  # Ctrl-C, a lost cluster, a catalog mismatch: keep what finished
            flush(force=True)
            raise
        finally:
            progress.close()
            for s in slots:
                try:
                    ray.kill(s.actor, no_restart=True)
                except Exception:
                    pass
        flush(force=True)
        self.stats.wall_s = time.monotonic() - t0
        return self.stats


# --------------------------------------------------------------------------- sweep
def sweep(store: Any, harnesses: list[Harness], *, options: Options, catalog: str, filters: dict[str, Any],
          config: SweepConfig, name: str | None = None, resume: str | None = None, force: bool = False,
          log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> tuple[Any, SweepStats]:
    """Create (or resume) a run, skip what is done or cached, run the rest on Ray."""
    import ray

    from farm.store import queries, writes

    # A local CPU sweep is always feasible: start Ray only if something is left to run
    # (a warm re-sweep whose results are all cached never pays for a cluster).
    lazy = config.address is None and tuple(options.run_on) == ("cpu",) and not ray.is_initialized()
    started = False
    if not lazy:
        started, config.workers = ray_init(config.address, config.workers)
    try:
        if not lazy:
            check_feasible(options.run_on)
        env = _cluster_environment(options.run_on)
        install = digest.installation()
        opt_d = digest.options_digest(options, env=config.env)
        with store.session() as s:
            if resume:
                run = queries.resolve_run(s, resume)
                run.status = "running"
            else:
                run = writes.create_run(s, env=env, name=name, catalog=catalog, filters=filters,
                                        platforms=options.platforms, run_on=options.run_on, total=len(harnesses))
            hids = writes.harness_ids(s, harnesses)
            done = writes.finished(s, run.id)
            todo = [h for h in harnesses if hids[h.fingerprint] not in done]
            cached: dict[int, int] = {}
            reuse: dict[str, dict[str, Any]] = {}
            if not force:
                cached = writes.copy_cached(s, run, {hids[h.fingerprint]: digest.result_key(h, opt_d) for h in todo})
                todo = [h for h in todo if hids[h.fingerprint] not in cached]
                priors = writes.downstream_priors(s, run, [hids[h.fingerprint] for h in todo])
                reuse = {h.fingerprint: priors[hids[h.fingerprint]] for h in todo if hids[h.fingerprint] in priors}
            run.stats = {**(run.stats or {}), "installation": install.to_dict()}
        if resume:
            log(f"resuming run {run.name}: {len(done)} done, {len(todo)} to go")
        if cached:
            sources = ", ".join(f"{n} from run {r}" for r, n in sorted(Counter(cached.values()).items()))
            log(f"{len(cached)} harnesses reused whole: nothing that shapes their results changed "
                f"(harness, jax/jaxlib/plugin files, farm code, options) [{sources}] (use --force to recompute)")
        if reuse:
            log(f"{len(todo)} to run: trace and lower again; compile, execute and compare are reused where the "
                f"exact modules, inputs and compiler are unchanged ({len(reuse)} have an earlier result)")
        if todo and lazy:
            started, config.workers = ray_init(config.address, config.workers)
        writer_session = store.sessions()
        writer = writes.Writer(writer_session, writer_session.merge(run), hids)

        def sink(outcomes: list[Outcome], worker: str) -> None:
            writer.write(outcomes, worker)
            writer_session.commit()

        sw = Sweep(todo, options, catalog, config, sink, options_digest=opt_d, reuse=reuse)
        status = "finished"
        try:
            stats = sw.run() if todo else sw.stats
        except KeyboardInterrupt:
            status = "interrupted"
            stats = sw.stats
            raise
        except Exception:
            status = "failed"  # e.g. every node lost: not finished, so it can be resumed
            raise
        finally:
            stats = sw.stats
            stats.cached = len(cached)
            stats.install_digest_s = install.seconds
            with store.session() as s:
                r = s.get(type(run), run.id)
                writes.finish_run(s, r, status, {**stats.to_dict(), "resumed": bool(resume)})
            writer_session.close()
        # The dashboard's default compare page (this run against the previous one) opens
        # at once if its report is stored now; this never raises (a failure is one line).
        from farm.store import reports

        if stats.done:  # nothing new was computed: the report would only restate its cache source
            reports.precompute(store, run.id, log)
        return run, stats
    finally:
        if started:
            ray.shutdown()


def _cluster_environment(run_on: tuple[str, ...]) -> dict[str, Any]:
    """The environment as a worker sees it (the driver may have no jax devices)."""
    from farm.run.host import describe

    env = describe(device_kinds=list(run_on))
    return env
