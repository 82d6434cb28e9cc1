"""A simulated fleet for the driver benchmark (``farm bench --only fleet``): Ray actors on
loopback that replay recorded outcomes at a set rate, driven by the real scheduler
(``farm.run.scheduler.Sweep``) into the real writer (``farm.store.writes.Writer``).

What it measures is the driver alone: the workers do no JAX work, they hand back an
outcome every ``1/rate`` seconds, so the driver's CPU time per harness is its overhead
and the results stored per second are what one driver sustains into a database.

Recorded outcomes are a stored run's (``record_run``) or, without one, a synthetic
upstream-shaped run (``synthetic``: 17 records a harness, as an upstream run's ~95k rows
over ~5.6k harnesses, one export artifact each). They travel to the actors once, as one
byte buffer in Ray's object store that every actor reads without copying.
"""
from __future__ import annotations

import hashlib
import pickle
import random
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from farm.results import Outcome

PLATFORMS = ("cpu", "cuda", "rocm", "tpu")


@dataclass(frozen=True)
class SimHarness:
    """What the scheduler and the store read of a harness."""
    fingerprint: str
    name: str
    family: str
    group: str
    dtype: str
    primitive: str = "sin"
    timeout_s: float | None = None

    def describe(self) -> dict[str, Any]:
        return {"fingerprint": self.fingerprint, "name": self.name, "catalog": "upstream", "family": self.family,
                "primitive": self.primitive, "group": self.group, "dtype": self.dtype, "shapes": [[8, 8]],
                "params": {}}


@dataclass
class Recorded:
    """Harnesses and their outcomes (as ``Outcome.to_dict``), in order."""
    harnesses: list[SimHarness]
    outcomes: list[dict[str, Any]] = field(default_factory=list)


def synthetic(n: int = 5594, seed: int = 0) -> Recorded:
    """An upstream-shaped run: per harness trace, lower/census/export on 4 platforms, serialize,
    compile, execute, compare and crossexec on 3 (17 records), one export artifact."""
    rng = random.Random(seed)
    hs, outs = [], []
    for i in range(n):
        prim = f"prim{i % 180}"
        h = SimHarness(hashlib.sha256(f"sim{seed}:{i}".encode()).hexdigest()[:32], f"{prim}_{i}", f"fam{i % 40}",
                       prim, ("float32", "bfloat16", "int32", "float16")[i % 4], prim)
        blob = rng.randbytes(64) + (f"module @{h.name} {{ func.func public @main() }}\n" * 40).encode()
        sha = hashlib.sha256(blob).hexdigest()
        bad = rng.random() < 0.03
        recs: list[dict[str, Any]] = [_rec("trace", "any", rng, facts={"n_eqns": rng.randint(1, 40)})]
        for p in PLATFORMS:
            recs.append(_rec("lower", p, rng, facts={"module_sha256": sha, "bytes": len(blob)}))
            recs.append(_rec("census", p, rng, facts={"ops": {"stablehlo.sine": 1, "func.return": 1}}))
            recs.append(_rec("export", p, rng))
        recs.append(_rec("serialize", "export", rng, artifact=sha))
        recs.append(_rec("compile", "cpu", rng, facts={"compile_s": rng.random() / 50}))
        recs.append(_rec("execute", "cpu", rng, metrics={"execute_s": rng.random() / 1000,
                                                         "execute_min_s": rng.random() / 2000}))
        recs.append(_rec("compare", "cpu", rng, status="fail" if bad else "ok",
                         metrics={"max_abs_err": rng.random() * (1 if bad else 1e-6), "max_ulp": rng.randint(0, 4)},
                         facts={"verdict": "reference"}))
        recs.append(_rec("crossexec", "cuda", rng, status="not_runnable_here"))
        recs.append(_rec("crossexec", "rocm", rng, status="not_runnable_here"))
        hs.append(h)
        outs.append({"fingerprint": h.fingerprint, "name": h.name, "seconds": round(rng.random() / 5, 6),
                     "worker": f"ray:sim:{i % 64}", "result_key": hashlib.sha256(h.name.encode()).hexdigest(),
                     "downstream_key": None, "records": recs,
                     "artifacts": [{"sha256": sha, "kind": "export", "data": blob, "meta": {"jax_version": "0.10.2"}}]})
    return Recorded(hs, outs)


def _rec(stage: str, platform: str, rng: random.Random, *, status: str = "ok", metrics: dict | None = None,
         facts: dict | None = None, artifact: str | None = None) -> dict[str, Any]:
    return {"stage": stage, "platform": platform, "status": status, "seconds": round(rng.random() / 100, 6),
            "error_type": None, "error": None, "detail": None, "metrics": metrics or {}, "facts": facts or {},
            "artifact": artifact}


def record_run(store: Any, run_ref: str) -> Recorded:
    """A stored run's outcomes, to replay (records, keys, worker and timing as stored)."""
    from sqlalchemy import select  # deferred: sqlalchemy; the actors need none of it

    from farm.store import artifacts, queries
    from farm.store.models import HarnessRow, OutcomeRow

    with store.session() as s:
        run = queries.resolve_run(s, run_ref)
        rows = queries.results(s, run.id, detail=True)
        outs = s.execute(select(HarnessRow, OutcomeRow).join(OutcomeRow, OutcomeRow.harness_id == HarnessRow.id)
                         .where(OutcomeRow.run_id == run.id)).all()
        by_fp: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            by_fp.setdefault(r["fingerprint"], []).append(
                {"stage": r["stage"], "platform": r["platform"], "status": r["status"], "seconds": r["seconds"],
                 "error_type": r["error_type"], "error": r["error"], "detail": r.get("detail"),
                 "metrics": r["metrics"], "facts": r["facts"], "artifact": r["artifact"]})
        rec = Recorded([])
        for h, o in outs:
            recs = by_fp.get(h.fingerprint, [])
            arts = []
            for sha in dict.fromkeys(r["artifact"] for r in recs if r["artifact"]):
                row, data = artifacts.get(s, sha)
                arts.append({"sha256": sha, "kind": row.kind, "data": data, "meta": row.meta or {}})
            rec.harnesses.append(SimHarness(h.fingerprint, h.name, h.family, h.grp, h.dtype, h.primitive))
            rec.outcomes.append({"fingerprint": h.fingerprint, "name": h.name, "seconds": o.seconds,
                                 "worker": o.worker, "result_key": o.result_key, "downstream_key": o.downstream_key,
                                 "records": recs, "artifacts": arts})
    return rec


def pack(outcomes: list[dict[str, Any]]) -> tuple[Any, dict[str, tuple[int, int]]]:
    """One byte buffer of pickled outcomes and fingerprint -> (start, end) in it."""
    import numpy as np  # deferred: only the fleet needs it

    parts, index, pos = [], {}, 0
    for o in outcomes:
        b = pickle.dumps(o, protocol=5)
        index[o["fingerprint"]] = (pos, pos + len(b))
        parts.append(b)
        pos += len(b)
    return np.frombuffer(b"".join(parts), dtype=np.uint8), index


def replay_actor() -> Any:
    """The Ray actor class (made on first use: importing this module needs no Ray)."""
    import ray  # deferred: ray

    @ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)
    class ReplayWorker:
        def __init__(self, buf: Any, index: dict[str, tuple[int, int]], rate: float) -> None:
            from workers.chunks import harness_thread

            self.buf, self.index = buf, index  # buf: read in place from the object store
            self.period = 1.0 / rate if rate > 0 else 0.0
            self.thread = harness_thread()

        def ready(self) -> bool:
            return True

        def run_batch(self, fps: list[str], reuse: dict[str, Any] | None = None, jobs: list[Any] | None = None,
                      window_s: float = 0.0) -> Iterator[bytes]:  # HarnessWorker.run_batch's, chunks and all
            from workers.chunks import stream

            yield from stream(lambda: self._replay(fps), self.thread, window_s)

        def _replay(self, fps: list[str]) -> Iterator[Any]:
            from farm.results import Outcome

            t = time.monotonic()
            for fp in fps:
                if self.period:
                    t += self.period
                    delay = t - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                a, b = self.index[fp]
                yield Outcome.from_dict(pickle.loads(self.buf[a:b].tobytes()))  # typed, as a worker's

    return ReplayWorker


def start_actors(recorded: Recorded, workers: int, rate: float) -> list[Any]:
    """``workers`` replay actors, each replaying at ``rate`` outcomes/s, started and answering."""
    import ray  # deferred: ray

    buf, index = pack(recorded.outcomes)
    buf_ref, index_ref = ray.put(buf), ray.put(index)
    actors = [replay_actor().remote(buf_ref, index_ref, rate) for _ in range(workers)]
    ray.get([a.ready.remote() for a in actors])
    return actors


def fleet_sweep(recorded: Recorded, sink: Any, *, pool: list[Any], batch: int | None = None,
                commit_every_s: float = 1.0) -> Any:
    """Run ``recorded`` through the real scheduler on the replay actors ``pool``; returns its stats."""
    from farm.results import Options
    from farm.run.cluster import Worker
    from farm.run.progress import SweepConfig
    from farm.run.scheduler import Sweep

    free = list(pool)

    class FleetSweep(Sweep):
        def _new_worker(self, kind: str) -> Worker:
            return Worker(free.pop(), kind=kind)  # a replaced worker would need another: none is (no crashes)

    cfg = SweepConfig(workers=len(pool), batch=batch, commit_every_s=commit_every_s, progress=False,
                      startup_s=600.0)
    sw = FleetSweep(recorded.harnesses, Options(run_on=("cpu",)), "upstream", cfg, sink)  # type: ignore[arg-type]
    return sw.run()


def drive(store: Any, recorded: Recorded, *, name: str, workers: int = 64, rate: float = 50.0,
          batch: int | None = None,
          write: bool = True, delta: bool = True) -> dict[str, Any]:
    """One simulated sweep into ``store``: the driver's CPU seconds and wall time per harness,
    result rows per second, and what the run stored."""
    from farm.store import writes

    env = {"jax_version": "0.10.2", "jaxlib_version": "0.10.2", "python": "3.11", "host": "fleet",
           "device_kinds": ["cpu"], "xla_flags": "", "farm_commit": "sim"}
    session = store.sessions()
    run = writes.create_run(session, env=env, name=name, catalog="upstream", platforms=list(PLATFORMS),
                            run_on=["cpu"], total=len(recorded.harnesses))
    hids = writes.harness_ids(session, recorded.harnesses)
    session.commit()
    writer = writes.Writer(session, run, hids)
    rows = 0
    write_s = 0.0

    def sink(outcomes: list[Outcome], worker: str) -> None:
        nonlocal rows, write_s
        t = time.perf_counter()
        if write:
            writer.write(outcomes, worker)
            session.commit()
        write_s += time.perf_counter() - t
        rows += sum(len(o.records) for o in outcomes)

    pool = start_actors(recorded, workers, rate)  # started and ready before the clock: not the driver's cost
    c0, t0 = time.process_time(), time.perf_counter()
    stats = fleet_sweep(recorded, sink, pool=pool, batch=batch)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    t = time.perf_counter()
    d = writes.finish_run(session, run, "finished", delta=delta and write)
    session.commit()
    finish_s = time.perf_counter() - t
    session.close()
    n = stats.done
    return {"workers": workers, "rate": rate, "harnesses": n, "rows": rows, "wall_s": wall, "driver_cpu_s": cpu,
            "driver_ms_per_harness": 1000 * cpu / max(1, n), "wall_ms_per_harness": 1000 * wall / max(1, n),
            "harnesses_per_s": n / wall, "rows_per_s": rows / wall,
            "write_s": write_s, "finish_s": finish_s, "delta": d.to_dict() if d else None}
