"""A database filled by two real sweeps and planted data, and the fixtures every dashboard
test module binds over it (tests/test_dashboard*.py, the browser tests)."""
from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

EVIL = '<script>alert("pwned")</script> & <b>bold</b>'
TOKEN = "t0ken-for-tests"


def make_db(path: str) -> dict[str, Any]:
    """Two real sweeps of sin, exp, asinh, add (float32) into a SQLite file, then planted data:
    a regression carrying a malicious error string, a stale limitation, a corrupt module.

    Returns what the tests need: the URL and the fingerprints, run ids and shas involved."""
    import ray

    from farm import catalog
    from farm.results import Options
    from farm.run.sweep import SweepConfig, ray_init, sweep
    from farm.store import open_store
    from farm.store.models import ArtifactRow, HarnessRow, ResultRow, StoredResultRow

    url = f"sqlite:///{path}"
    store = open_store(url)
    filters = catalog.Filters.parse(primitive="sin,exp,asinh,add", dtype="float32", name="*3x4*")  # not special_values
    hs = catalog.select(filters)
    started = ray_init(None, 2).started  # one cluster for both sweeps (False: one was running)
    try:
        runs = []
        for _ in range(2):
            run, _ = sweep(store, hs, options=Options(repeats=1), catalog="farm", filters=filters.to_dict(),
                           config=SweepConfig(workers=2, progress=False), force=True, log=lambda s: None)
            runs.append(run.id)
    finally:
        if started:
            ray.shutdown()
    with store.session() as s:
        fps = dict(s.execute(select(HarnessRow.primitive, HarnessRow.fingerprint)).tuples().all())
        hid = dict(s.execute(select(HarnessRow.primitive, HarnessRow.id)).tuples().all())
        head = runs[1]
        s.execute(update(StoredResultRow).where(StoredResultRow.run_id == head, StoredResultRow.harness_id == hid["sin"],
                                                StoredResultRow.platform == "cpu", StoredResultRow.stage == "execute")
                  .values(status="fail", error_type="RuntimeError", error=EVIL, detail="Traceback\n" + EVIL))
        s.execute(update(StoredResultRow).where(StoredResultRow.run_id == head, StoredResultRow.harness_id == hid["add"],
                                                StoredResultRow.platform == "cpu", StoredResultRow.stage == "compare")
                  .values(status="unexpected_pass", error="expected to fail, passed"))
        exp_module = s.scalar(select(ResultRow.facts).where(
            ResultRow.run_id == head, ResultRow.harness_id == hid["exp"], ResultRow.platform == "cpu",
            ResultRow.stage == "lower"))["module_sha256"]
        s.execute(update(ArtifactRow).where(ArtifactRow.sha256 == exp_module)
                  .values(data=zlib.compress(b"module @tampered {}")))
        asinh_module = s.scalar(select(ResultRow.facts).where(
            ResultRow.run_id == head, ResultRow.harness_id == hid["asinh"], ResultRow.platform == "cpu",
            ResultRow.stage == "lower"))["module_sha256"]
    store.dispose()
    return {"url": url, "fp": fps, "base": runs[0], "head": runs[1], "corrupt": exp_module, "asinh_module": asinh_module}


def shared_db(tmp_path_factory: pytest.TempPathFactory, label: str) -> dict[str, Any]:
    """``make_db``'s database as a copy of its own in a temporary directory named ``label``.

    ``make_db`` (a Ray cluster, two sweeps: ~17 CPU-s) runs once per test session, in whichever
    test process asks first (the others wait on a lock in the run's common temporary directory),
    and each caller gets its own copy (SQLite's backup API), so what one module writes no other
    sees (tests/test_dashboard.py checks it). Without pytest-xdist, once per process."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # pytest-N/: this run's only
    made = root / "dashboard-db"
    made.mkdir(exist_ok=True)
    with open(made / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (made / "made.json").exists():
            info = make_db(str(made / "farm.db"))
            (made / "made.json").write_text(json.dumps(info))
    info = json.loads((made / "made.json").read_text())
    dest = tmp_path_factory.mktemp(label) / "farm.db"
    src, dst = sqlite3.connect(made / "farm.db"), sqlite3.connect(dest)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return {**info, "url": f"sqlite:///{dest}"}


def dashboard_fixtures(label: str) -> tuple[Any, Any, Any]:
    """``farm_db`` (a copy of ``make_db``'s database in a temporary directory named ``label``,
    once per module: ``shared_db``),
    ``app`` (the dashboard over it, with the write token) and ``client``: the fixtures every
    dashboard test module binds as ``farm_db, app, client = dashboard_fixtures(LABEL)``."""

    @pytest.fixture(scope="module")
    def farm_db(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
        return shared_db(tmp_path_factory, label)

    @pytest.fixture(scope="module")
    def app(farm_db: dict[str, Any]) -> Iterator[Any]:
        from dashboards.app import create_app

        a = create_app(farm_db["url"], token=TOKEN)
        yield a
        a.config["STORE"].dispose()

    @pytest.fixture
    def client(app: Any) -> Any:
        return app.test_client()

    return farm_db, app, client


def html(resp: Any) -> str:
    return resp.get_data(as_text=True)
