"""Several processes on one database: a process that migrated a new SQLite file keeps its
writes when another closes the file (docs/reliability.md, the shared-SQLite case), and runs
created in the same second get distinct generated names."""
from __future__ import annotations

import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from farm.store import open_store, writes
from farm.store.environments import get_or_create
from tests.helpers.rows import ENV

ROOT = Path(__file__).resolve().parent.parent


def _in_another_process(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip()


def test_a_process_that_migrated_a_new_sqlite_file_keeps_its_writes_after_another_closes_it(tmp_path: Path) -> None:
    """The migration lock once took a flock on the database file and closed it, which drops every
    POSIX lock of the process on that file, SQLite's WAL lock included. The next process to close
    the database then took itself for the last user, checkpointed and deleted the WAL, and this
    process's later commits went into the deleted file: a sweep's last batches and its ``finished``
    status vanished while it exited 0."""
    url = f"sqlite:///{tmp_path / 'farm.db'}"
    store = open_store(url)  # creates and migrates the file here
    with store.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE probe (who TEXT)")
        conn.exec_driver_sql("INSERT INTO probe VALUES ('before')")
    # another process opens the same database, writes, closes it and exits
    _in_another_process(f"from farm.store import open_store\nst = open_store({url!r})\n"
                        f"with st.engine.begin() as c: c.exec_driver_sql(\"INSERT INTO probe VALUES ('other')\")\n"
                        f"st.dispose()")
    wal_kept = (tmp_path / "farm.db-wal").exists()  # this process still has it open: the other was not the last
    with store.engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO probe VALUES ('after')")
    seen = _in_another_process(f"import sqlite3\nc = sqlite3.connect({str(tmp_path / 'farm.db')!r})\n"
                               f"print(sorted(r[0] for r in c.execute('SELECT who FROM probe')))")
    store.dispose()
    assert seen == "['after', 'before', 'other']"  # before the fix: "['before', 'other']"
    assert wal_kept


def test_two_runs_created_in_the_same_second_get_distinct_names(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two sweeps without ``--name`` starting at once: each creates its run before the other
    commits, so neither sees the other's name (PostgreSQL: the second insert of one name waits
    for the first transaction, then fails). The clock is held at one second."""
    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):  # noqa: ANN001, ANN206
            return datetime(2026, 11, 27, 3, 2, 43)

    monkeypatch.setattr(writes, "datetime", Frozen)
    one, two = open_store(pg_url), open_store(pg_url)
    with one.session() as s:
        get_or_create(s, ENV)  # the environment row is shared: committed first, so only the names can meet
    s1, s2 = one.sessions(), two.sessions()
    try:
        s2.execute(text("SET lock_timeout = '5s'"))  # the old names: an error here, not a hang
        r1 = writes.create_run(s1, env=ENV, total=1)  # inserted, not committed
        r2 = writes.create_run(s2, env=ENV, total=1)
        s1.commit()
        s2.commit()
        names = (r1.name, r2.name)
    finally:
        s1.close()
        s2.close()
        one.dispose()
        two.dispose()
    assert names[0] != names[1]
    assert all(n.startswith("sweep-20261127-030243-") for n in names), names  # still readable: kind and time
    check = open_store(pg_url)
    with check.session() as s:
        assert sorted(s.scalars(text("SELECT name FROM runs")).all()) == sorted(names)
    check.dispose()
