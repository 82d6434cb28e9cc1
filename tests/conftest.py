"""Shared fixtures: real databases (SQLite file, a fresh PostgreSQL database) and a
real local Ray cluster, each cleaned up afterwards."""
from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

#: the per-test time budget and report (tests/helpers/budget.py)
pytest_plugins = ("tests.helpers.budget",)

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("FARM_VALIDATE_PLOTS", "1")  # every plot a test draws is checked against the Vega-Lite schema (dashboards.plots)

PG_ADMIN = os.environ.get("FARM_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def _pg_available() -> bool:
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN, connect_timeout=3):
            return True
    except Exception:
        return False


@pytest.fixture
def sqlite_url(tmp_path) -> str:  # noqa: ANN001
    return f"sqlite:///{tmp_path / 'farm.db'}"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database, dropped afterwards."""
    if not _pg_available():
        pytest.skip("PostgreSQL is not reachable on 127.0.0.1:5432")
    import psycopg

    name = f"farm_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request) -> str:  # noqa: ANN001
    """The same test on both backends."""
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")


@pytest.fixture(scope="session")
def ray_local() -> Iterator[None]:
    """A real local Ray cluster with two cpu_slots, shared by the session."""
    import ray

    from farm.run.sweep import ray_init

    if ray.is_initialized():
        yield
        return
    ray_init(None, 2)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture
def triage_db(sqlite_url: str) -> Iterator[str]:
    """Three runs whose failures form known clusters (tests.helpers.triage)."""
    from tests.helpers.triage import fill

    yield from fill(sqlite_url)
