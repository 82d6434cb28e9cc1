"""The store on SQLite and PostgreSQL: migrations match models, writes are idempotent,
artifacts are verified, bad URLs are one clear error."""
from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import func, select, text

from farm.errors import ArtifactCorrupt, BadDatabaseURL
from farm.store import artifacts, open_store, queries, writes
from farm.store.models import ArtifactRow, Base, OutcomeRow, ResultRow, StoredResultRow

from tests.helpers.rows import ENV, harness_desc, outcome  # noqa: F401  (shared with tests/faults)


def test_migrations_match_models(db_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    store = open_store(db_url)
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []
    assert {"runs", "stored_results", "artifacts", "harnesses", "environments", "stored_outcomes"} <= set(store.tables())
    from sqlalchemy import inspect

    assert {"results", "harness_outcomes"} <= set(inspect(store.engine).get_view_names())  # what readers read


def test_writes_are_idempotent_and_queryable(db_url: str) -> None:
    store = open_store(db_url)
    with store.session() as s:
        run = writes.create_run(s, env=ENV, name="r1", platforms=["cpu"], run_on=["cpu"], total=3)
        hids = writes.harness_ids(s, [harness_desc(i) for i in range(3)])
        w = writes.Writer(s, run, hids)
        w.write([outcome(0), outcome(1, "fail")])
        w.write([outcome(0), outcome(1, "fail"), outcome(2)])  # a resumed writer repeats some
    with store.session() as s:
        assert s.scalar(select(func.count()).select_from(OutcomeRow)) == 3
        assert s.scalar(select(func.count()).select_from(ResultRow)) == 9
        assert s.scalar(select(func.count()).select_from(ArtifactRow)) == 1  # content-addressed, deduplicated
        rows = queries.results(s, queries.resolve_run(s, "latest").id)
        fail = [r for r in rows if r["status"] == "fail"]
        assert [r["harness"] for r in fail] == ["h1"]
        assert fail[0]["metrics"]["max_abs_err"] == "inf"
        assert queries.resolve_run(s, "r1").id == queries.resolve_run(s, str(run.id)).id


def test_two_writers_storing_one_artifact_between_lookup_and_commit_both_finish(db_url: str, monkeypatch) -> None:  # noqa: ANN001
    """Two sweeps on one database write the same module: the second looks up the address,
    the first commits it, then the second inserts. Both runs keep their rows and the blob is
    stored once (a plain INSERT failed the second sweep on the primary key, in CI)."""
    store = open_store(db_url)
    with store.session() as s:
        hids = writes.harness_ids(s, [harness_desc(i) for i in range(2)])
        run_a = writes.create_run(s, env=ENV, name="a").id
        run_b = writes.create_run(s, env=ENV, name="b").id
    real = artifacts.stored
    interleaved: list[dict[str, bool]] = []

    def lookup_then_other_writer_commits(session, shas):  # noqa: ANN001, ANN202
        seen = real(session, shas)
        if not interleaved:
            interleaved.append(seen)
            with store.session() as other:
                writes.Writer(other, other.get(writes.Run, run_b), hids).write([outcome(0), outcome(1)])
        return seen

    monkeypatch.setattr(artifacts, "stored", lookup_then_other_writer_commits)
    with store.session() as s:
        writes.Writer(s, s.get(writes.Run, run_a), hids).write([outcome(0), outcome(1)])
    assert interleaved == [{}]  # the first writer saw no row: the other committed it after the lookup
    with store.session() as s:
        assert s.scalar(select(func.count()).select_from(ArtifactRow)) == 1
        for run in (run_a, run_b):
            assert s.scalar(select(func.count()).select_from(OutcomeRow).where(OutcomeRow.run_id == run)) == 2
        assert artifacts.get(s, outcome(0).artifacts[0].sha256)[1] == b"module text"


def test_database_enforces_status_vocabulary(db_url: str) -> None:
    store = open_store(db_url)
    with store.session() as s:
        run = writes.create_run(s, env=ENV, name="r2")
        hid = writes.harness_ids(s, [harness_desc(9)])["fp0009"]
    with pytest.raises(Exception):
        with store.session() as s:
            s.add(StoredResultRow(run_id=run.id, harness_id=hid, platform="cpu", stage="x", status="great", comparable="c"))


def test_corrupt_artifact_is_a_clear_error(db_url: str) -> None:
    store = open_store(db_url)
    blob = b"serialized export bytes" * 10
    sha = hashlib.sha256(blob).hexdigest()
    with store.session() as s:
        artifacts.put(s, sha, "export", blob, jax_version="0.10.2")
    with store.session() as s:
        assert artifacts.get(s, sha)[1] == blob
        import zlib

        s.get(ArtifactRow, sha).data = zlib.compress(b"tampered")
    with store.session() as s, pytest.raises(ArtifactCorrupt, match="corrupt"):
        artifacts.get(s, sha)


def test_artifact_directory_backend_rejects_escapes(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    from farm.errors import ArtifactNotFound

    monkeypatch.setenv("FARM_ARTIFACT_DIR", str(tmp_path / "blobs"))
    store = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    blob = b"abc"
    sha = hashlib.sha256(blob).hexdigest()
    with store.session() as s:
        artifacts.put(s, sha, "module", blob, jax_version="x")
    with store.session() as s:
        assert artifacts.get(s, sha)[1] == blob
        with pytest.raises(ArtifactNotFound):
            artifacts.get(s, "../../etc/passwd")


@pytest.mark.parametrize("url", ["nonsense://", "sqlite:////no/such/dir/farm.db",
                                 "postgresql+psycopg://postgres@127.0.0.1:1/nope"])
def test_bad_database_url(url: str) -> None:
    with pytest.raises(BadDatabaseURL):
        open_store(url)


def test_sqlite_uses_wal(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    with store.engine.connect() as c:
        assert c.execute(text("PRAGMA journal_mode")).scalar() == "wal"


def test_a_database_at_the_schema_main_had_before_delta_runs_upgrades_and_reads_the_same(db_url: str) -> None:
    """A database the previous main made (schema 0007, rows as its writer stored them) upgrades
    to today's head, and every row reads back through today's queries."""
    store = open_store(db_url, upgrade=False)
    store.upgrade("0007")
    with store.session() as s:
        s.execute(text("INSERT INTO environments (id, fingerprint, jax_version, jaxlib_version, python, host, "
                       "device_kinds, xla_flags, farm_commit, created_at) VALUES (1, 'envfp', '0.10.2', '0.10.2', "
                       "'3.11.7', 'test', '[\"cpu\"]', '', 'abc', '2026-01-01')"))
        s.execute(text("INSERT INTO harnesses (id, fingerprint, name, catalog, family, primitive, grp, dtype, shapes, "
                       "params, definition) VALUES (1, 'fp0001', 'h1', 'farm', 'fam', 'sin', 'sin', 'float32', "
                       "'[[3]]', '{}', '{}')"))
        s.execute(text("INSERT INTO runs (id, name, kind, status, started_at, catalog, filters, platforms, run_on, "
                       "total, environment_id, stats, series, config) VALUES (1, 'nightly@x64=on', 'sweep', "
                       "'finished', '2026-01-01', 'farm', '{}', '[\"cpu\"]', '[\"cpu\"]', 1, 1, '{}', 'nightly', "
                       "'x64=on')"))
        for stage, status in (("trace", "ok"), ("compare", "fail")):
            s.execute(text("INSERT INTO results (run_id, harness_id, platform, stage, status, seconds, metrics, "
                           "facts, comparable) VALUES (1, 1, 'cpu', :st, :status, 0.5, '{\"max_ulp_err\": 9.0}', "
                           "'{}', 'c')"), {"st": stage, "status": status})
        s.execute(text("INSERT INTO harness_outcomes (run_id, harness_id, environment_id, worst, seconds, worker) "
                       "VALUES (1, 1, 1, 'fail', 0.5, 'w')"))
    store.upgrade()
    with store.session() as s:
        run = queries.resolve_run(s, "nightly@x64=on")
        info = queries.run_dict(s, run)
        rows = queries.results(s, run.id)
    assert info["status"] == "finished" and info["done"] == 1 and info["status_counts"] == {"ok": 1, "fail": 1}
    assert info["dims"]["series"] == "nightly" and info["dims"]["config"] == "x64=on"
    assert [(r["stage"], r["status"], r["metrics"]) for r in rows] == [
        ("trace", "ok", {"max_ulp_err": 9.0}), ("compare", "fail", {"max_ulp_err": 9.0})]
    store.dispose()
