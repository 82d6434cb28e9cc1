"""A database filled by two real sweeps and planted data, and the fixtures every dashboard
test module binds over it (tests/test_dashboard*.py, the browser tests)."""
from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
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
    from farm.run.sweep import SweepConfig, sweep
    from farm.store import open_store
    from farm.store.models import ArtifactRow, HarnessRow, ResultRow, StoredResultRow

    url = f"sqlite:///{path}"
    store = open_store(url)
    filters = catalog.Filters.parse(primitive="sin,exp,asinh,add", dtype="float32", name="*3x4*")  # not special_values
    hs = catalog.select(filters)
    started = not ray.is_initialized()
    if started:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        ray.init(num_cpus=2, resources={"cpu_slot": 2}, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": root}})
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


def dashboard_fixtures(label: str) -> tuple[Any, Any, Any]:
    """``farm_db`` (``make_db`` in a temporary directory named ``label``, once per module),
    ``app`` (the dashboard over it, with the write token) and ``client``: the fixtures every
    dashboard test module binds as ``farm_db, app, client = dashboard_fixtures(LABEL)``."""

    @pytest.fixture(scope="module")
    def farm_db(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
        return make_db(str(tmp_path_factory.mktemp(label) / "farm.db"))

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
