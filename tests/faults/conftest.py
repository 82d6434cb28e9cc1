"""The fault suite (docs/reliability.md). Its slow part is marked ``faults_slow`` and runs
only when selected (``pytest tests/faults -m faults_slow``, the scheduled job), so the
test command's CI run stays quick; each slow case has a quick twin here that still runs."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.faults.pgcluster import PgCluster


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "faults_slow: the fault suite's long cases (run on a schedule, "
                                       "see docs/reliability.md): select with -m faults_slow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "faults_slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="faults_slow: run with -m faults_slow (scheduled job, docs/reliability.md)")
    for item in items:
        if "faults_slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def private_pg() -> Iterator[PgCluster]:
    """A private PostgreSQL server (``tests.faults.pgcluster``), running; stopped and deleted afterwards."""
    try:
        cluster = PgCluster()
    except (RuntimeError, OSError) as e:
        pytest.skip(f"cannot make a private PostgreSQL server here: {e}")
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.remove()
