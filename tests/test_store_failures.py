"""``farm.store.failures.retry``: a write that loses its server is tried again, one progress line
per wait naming the database, one when it gets through; a failure that is no storage outage,
or one that outlasts the waits, is raised."""
from __future__ import annotations

import pytest
from sqlalchemy.exc import OperationalError

from farm.store import failures


class Flaky:
    def __init__(self, fails: int, error: Exception) -> None:
        self.fails, self.error, self.calls, self.undone = fails, error, 0, 0

    def write(self) -> str:
        self.calls += 1
        if self.calls <= self.fails:
            raise self.error
        return "written"

    def undo(self) -> None:
        self.undone += 1


REFUSED = OperationalError("INSERT ...", {}, Exception('connection failed: connection to server at "127.0.0.1", '
                                                       'port 5433 failed: Connection refused'))
STARTING = OperationalError("SELECT 1", {}, Exception("FATAL:  the database system is starting up"))


@pytest.mark.parametrize("error", [REFUSED, STARTING], ids=["down", "starting up"])
def test_a_write_that_loses_its_server_waits_with_progress_lines(error: Exception) -> None:
    w, lines = Flaky(2, error), []
    assert failures.retry(w.write, w.undo, (0.0, 0.0, 0.0), what="postgresql://farm@db:5432/farm",
                          log=lines.append) == "written"
    assert (w.calls, w.undone, len(lines)) == (3, 2, 3)
    assert all(l.startswith("farm: lost the connection to the database server: postgresql://farm@db:5432/farm; "
                            "retrying in 0 s (waited ") for l in lines[:2]), lines
    assert lines[2].startswith("farm: postgresql://farm@db:5432/farm is back after ") and "(2 tries)" in lines[2]


def test_a_write_that_never_gets_through_raises_its_failure_after_the_waits() -> None:
    w, lines = Flaky(99, REFUSED), []
    with pytest.raises(OperationalError):
        failures.retry(w.write, w.undo, (0.0, 0.0), log=lines.append)
    assert (w.calls, len(lines)) == (3, 2)
    assert failures.explain(REFUSED).args[0].startswith("lost the connection to the database server; the last batch")


def test_other_failures_are_not_retried() -> None:
    w, lines = Flaky(1, ValueError("a bug")), []
    with pytest.raises(ValueError):
        failures.retry(w.write, w.undo, (0.0, 0.0), log=lines.append)
    assert (w.calls, w.undone, lines) == (1, 1, [])


def test_the_waits_outlast_a_minute_and_notice_a_server_back_within_10_s() -> None:
    assert sum(failures.RETRY_WAITS_S) >= 90 and max(failures.RETRY_WAITS_S) <= 10
