"""Sweeps on a real local Ray cluster: results stored, faults isolated, workers replaced,
interrupted sweeps resumed, impossible requests refused up front."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from sqlalchemy import func, select

from farm import catalog
from farm.errors import Infeasible
from farm.results import Options
from farm.run.sweep import SweepConfig, sweep
from farm.store import open_store, queries
from farm.store.models import OutcomeRow, ResultRow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.slow


def select_(**kw) -> list[catalog.Harness]:  # noqa: ANN003
    return catalog.select(catalog.Filters.parse(**kw))


def test_sweep_stores_every_stage(ray_local, sqlite_url) -> None:  # noqa: ANN001
    store = open_store(sqlite_url)
    hs = select_(primitive="sin,exp,add", dtype="float32,int32")
    run, stats = sweep(store, hs, options=Options(), catalog="farm", filters={}, config=SweepConfig(workers=2))
    assert stats.done == len(hs) and stats.crashed == 0
    with store.session() as s:
        rows = queries.results(s, run.id)
        r = queries.resolve_run(s, "latest")
        assert r.status == "finished"
    stages = {(x["stage"], x["platform"]) for x in rows}
    for p in ("cpu", "cuda", "rocm", "tpu"):
        assert ("lower", p) in stages and ("census", p) in stages
    assert {("export", "export"), ("serialize", "export"), ("compile", "cpu"), ("execute", "cpu"),
            ("compare", "cpu"), ("crossexec", "tpu")} <= stages
    assert {x["status"] for x in rows} == {"ok"}
    assert len({x["harness"] for x in rows}) == len(hs)
    with store.session() as s:  # each outcome says which Ray node and worker process ran it
        where = s.execute(select(OutcomeRow.worker).where(OutcomeRow.run_id == run.id)).scalars().all()
    assert len(where) == len(hs) and all(w.startswith("ray:") and len(w.split(":")) == 3 for w in where)
    # a second sweep in the same environment reuses every result (result cache)
    run2, stats2 = sweep(store, hs, options=Options(), catalog="farm", filters={}, config=SweepConfig(workers=2))
    assert stats2.cached == len(hs) and stats2.done == 0
    with store.session() as s:
        assert len(queries.results(s, run2.id)) == len(rows)


def test_crash_and_hang_are_isolated(ray_local, sqlite_url) -> None:  # noqa: ANN001
    store = open_store(sqlite_url)
    hs = catalog.select(catalog.Filters(catalog="planted", modules=("harnesses.planted",)))
    cfg = SweepConfig(workers=2, batch=2, modules=("harnesses.planted",), startup_s=60)
    run, stats = sweep(store, hs, options=Options(platforms=("cpu",)), catalog="planted", filters={}, config=cfg)
    with store.session() as s:
        worst = dict(s.execute(select(OutcomeRow.harness_id, OutcomeRow.worst).where(OutcomeRow.run_id == run.id)).all())
        names = {h.id: h.name for h in s.scalars(select(__import__("farm.store.models", fromlist=["HarnessRow"]).HarnessRow))}
    by_name = {names[k]: v for k, v in worst.items()}
    assert by_name["planted_abort.abort_float32_4"] == "crashed"
    assert by_name["planted_hang.hang_float32_4"] == "timeout"
    assert {v for k, v in by_name.items() if k.startswith("planted_ok")} == {"ok"}
    assert stats.crashed == 1 and stats.timeouts == 1 and len(by_name) == len(hs)


def test_two_quick_harnesses_start_one_worker_not_one_per_slot(ray_local, sqlite_url) -> None:  # noqa: ANN001
    """A worker's start costs ~2.7 s of a core: two harnesses of a fraction of a second do not
    pay for a second one (``batching.first_workers``; ``grow`` would add it only if the first
    harness ran longer than a worker takes to start)."""
    store = open_store(sqlite_url)
    hs = [h for h in catalog.select(catalog.Filters(catalog="planted", modules=("harnesses.planted",)))
          if h.group == "planted_ok"][:2]
    cfg = SweepConfig(workers=2, modules=("harnesses.planted",))
    run, stats = sweep(store, hs, options=Options(platforms=("cpu",)), catalog="planted", filters={}, config=cfg)
    assert len(hs) == 2 and stats.done == 2 and stats.bad == 0
    assert stats.workers_started == 1


@pytest.mark.parametrize("culprit,status", [("abort", "crashed"), ("hang", "timeout")])
def test_a_death_or_hang_is_blamed_on_its_harness_not_on_one_waiting_in_its_window(
        ray_local, sqlite_url, culprit, status) -> None:  # noqa: ANN001
    """``sin`` finishes first and waits in its worker's window (60 s, longer than any time
    limit here) when ``culprit`` kills or hangs the process: the driver cannot tell which
    harness did it (for all it knows ``sin`` is still running, and past its 15 s limit), so
    ``sin`` is retried alone, not recorded as the crash or the timeout."""
    store = open_store(sqlite_url)
    by = {h.name.split(".")[1].split("_")[0]: h for h in
          catalog.select(catalog.Filters(catalog="planted", modules=("harnesses.planted",)))}
    hs = [by["sin"], by[culprit], by["exp"], by["cos"]]  # batches: [sin, culprit], [exp], [cos]
    cfg = SweepConfig(workers=1, batch=2, modules=("harnesses.planted",), startup_s=60, keep_order=True,
                      window_s=60.0, timeout_s=15.0)
    run, stats = sweep(store, hs, options=Options(platforms=("cpu",)), catalog="planted", filters={}, config=cfg)
    with store.session() as s:
        worst = dict(s.execute(select(OutcomeRow.harness_id, OutcomeRow.worst).where(OutcomeRow.run_id == run.id)).all())
        names = {h.id: h.name.split(".")[1].split("_")[0]
                 for h in s.scalars(select(__import__("farm.store.models", fromlist=["HarnessRow"]).HarnessRow))}
    assert {names[k]: v for k, v in worst.items()} == {"sin": "ok", culprit: status, "exp": "ok", "cos": "ok"}
    assert (stats.crashed, stats.timeouts) == ((1, 0) if culprit == "abort" else (0, 1))


def test_run_on_missing_device_is_refused_up_front(ray_local, sqlite_url) -> None:  # noqa: ANN001
    store = open_store(sqlite_url)
    t0 = time.monotonic()
    with pytest.raises(Infeasible, match="gpu"):
        sweep(store, select_(primitive="sin", dtype="float32"), options=Options(run_on=("gpu",)), catalog="farm",
              filters={}, config=SweepConfig(workers=2))
    assert time.monotonic() - t0 < 10


def _descends_from_us(pid: int) -> bool:
    """Whether ``pid`` is a descendant of this test process (its own local Ray cluster's
    worker, not one of another sweep on the same machine)."""
    me = os.getpid()
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid == me:
            return True
    return False


def _worker_pids() -> list[int]:
    out = subprocess.run(["pgrep", "-f", "ray::HarnessWorker"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split() if _descends_from_us(int(p))]


@pytest.mark.slow(reason="a Ray worker killed mid-sweep must be replaced and the sweep finished")
def test_worker_killed_mid_sweep_loses_nothing(ray_local, sqlite_url) -> None:  # noqa: ANN001
    store = open_store(sqlite_url)
    # big enough that the sweep is still running when the first results land (~20 s)
    hs = select_(family="elementwise_unary,elementwise_binary,reduction,cumulative", dtype="float32,float64,float16")
    result: dict = {}

    def go() -> None:
        result["run"], result["stats"] = sweep(store, hs, options=Options(platforms=("cpu", "tpu")), catalog="farm",
                                               filters={}, config=SweepConfig(workers=2, batch=4), force=True)

    t = threading.Thread(target=go)
    t.start()
    killed = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and killed is None:
        time.sleep(0.5)
        with store.session() as s:
            n = s.scalar(select(func.count()).select_from(OutcomeRow)) or 0
        pids = _worker_pids()
        if n >= 1 and pids:
            killed = pids[0]
            os.kill(killed, signal.SIGKILL)
    t.join(300)
    assert killed is not None, "never saw a worker to kill"
    stats = result["stats"]
    assert stats.workers_replaced >= 1
    with store.session() as s:
        run_id = result["run"].id
        worst = s.execute(select(OutcomeRow.worst).where(OutcomeRow.run_id == run_id)).scalars().all()
        dup = s.scalar(select(func.count()).select_from(ResultRow).where(ResultRow.run_id == run_id)) or 0
        distinct = len(set(s.execute(select(ResultRow.harness_id, ResultRow.platform, ResultRow.stage)
                                     .where(ResultRow.run_id == run_id)).all()))
    assert len(worst) == len(hs)
    assert "crashed" not in worst  # the harness under the killed worker was retried alone and passed
    assert dup == distinct


@pytest.mark.slow(reason="a real sweep killed mid-way, then resumed in a fresh process")
def test_killed_driver_resumes_without_redoing(tmp_path) -> None:  # noqa: ANN001
    """Kill the whole `farm sweep` process group mid-way; --resume finishes the same run.

    The first sweep cannot finish before the kill: a planted hang holds one harness (past the
    test's deadline) while the other worker lands the rest. Racing a sweep that could finish
    between two polls once left nothing to resume (CI, 155 of 155 done before the kill)."""
    db = f"sqlite:///{tmp_path / 'r.db'}"
    farm = [sys.executable, "-m", "farm"]
    # 155 harnesses, a third of the two whole families; population_count (int32 only, mid-catalog) hangs
    args = ["sweep", "--db", db, "--family", "elementwise_binary,elementwise_unary", "--dtype", "float32,float64,int32",
            "--platforms", "cpu,tpu", "--workers", "2", "--batch", "2", "--timeout", "900", "--name", "killme"]
    env = {**os.environ, "PYTHONPATH": ROOT}
    p = subprocess.Popen(farm + args, cwd=ROOT, env={**env, "FARM_PLANT": "hang:population_count"},
                         start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    done_before, failures = 0, []
    while time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.5)
        if os.path.exists(tmp_path / "r.db"):
            try:
                store = open_store(db, upgrade=False)
                with store.session() as s:
                    done_before = s.scalar(select(func.count()).select_from(OutcomeRow)) or 0
                store.dispose()
            except Exception as e:  # noqa: BLE001 - a database still being created
                failures.append(repr(e))
                continue
            if done_before >= 6:
                break
    assert p.poll() is None, f"the sweep ended before the kill (rc {p.returncode}); polls failed: {failures[-3:]}"
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(30)
    time.sleep(2)
    store = open_store(db)
    with store.session() as s:
        done_before = s.scalar(select(func.count()).select_from(OutcomeRow))
        total = queries.resolve_run(s, "killme").total
        first_ids = set(s.execute(select(ResultRow.id)).scalars())
    assert 0 < done_before < total
    r = subprocess.run(farm + ["sweep", "--db", db, "--resume", "killme", "--workers", "2"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"{done_before} done" in r.stderr
    with store.session() as s:
        run = queries.resolve_run(s, "killme")
        assert run.status == "finished"
        n_out = s.scalar(select(func.count()).select_from(OutcomeRow).where(OutcomeRow.run_id == run.id))
        rows = s.execute(select(ResultRow.id, ResultRow.harness_id, ResultRow.platform, ResultRow.stage)
                         .where(ResultRow.run_id == run.id)).all()
    assert n_out == total
    assert len(rows) == len({(h, p_, st) for _, h, p_, st in rows})
    assert first_ids <= {r_[0] for r_ in rows}  # nothing finished before the kill was rewritten
