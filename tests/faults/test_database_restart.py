"""A real PostgreSQL restart: a private server (``tests.faults.pgcluster``: ``initdb`` and
``pg_ctl`` on a free port, never the shared server) restarted, or stopped for 30 s, while a
sweep writes to it and while the dashboard reads it. The sweep waits with a progress line
naming the database and goes on; nothing is lost (``farm db check`` clean, the run's rows
equal an undisturbed run's); the dashboard answers one clear 503 while the server is down
and 200 once it is back."""
from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import select

from farm import catalog
from farm.store import open_store, queries, writes
from farm.store.models import HarnessRow, ResultRow
from tests.faults.pgcluster import PgCluster
from tests.faults.sweeps import assert_intact, farm, kill, outcomes, start
from tests.helpers.rows import ENV, harness_desc, outcome

pytestmark = pytest.mark.slow
#: 59 harnesses on one worker: about 10 s of sweep, long enough to stop the server in the middle
SELECTION = ["--family", "elementwise_unary", "--dtype", "float32,int32", "--platforms", "cpu,tpu", "--workers", "1",
             "--batch", "2", "--repeats", "1"]
TOTAL = len(catalog.select(catalog.Filters.parse(family="elementwise_unary", dtype="float32,int32")))
WAITING = re.compile(r"^farm: lost the connection to the database server: (\S+); retrying in ([\d.]+) s "
                     r"\(waited ([\d.]+) s of up to (\d+) s\)")
BACK = re.compile(r"^farm: (\S+) is back after ([\d.]+) s \((\d+) tries\); continuing$")


def rows(url: str, run: str) -> dict[tuple[str, str, str], str]:
    """(harness, platform, stage) -> status, of the run's effective rows."""
    store = open_store(url)
    with store.session() as s:
        rid = queries.resolve_run(s, run).id
        got = s.execute(select(HarnessRow.name, ResultRow.platform, ResultRow.stage, ResultRow.status)
                        .join(HarnessRow, HarnessRow.id == ResultRow.harness_id).where(ResultRow.run_id == rid)).all()
    store.dispose()
    return {(h, p, st): status for h, p, st, status in got}


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, str], str]:
    """The same sweep with nothing in its way (SQLite)."""
    db = f"sqlite:///{tmp_path_factory.mktemp('undisturbed') / 'u.db'}"
    r = farm("sweep", "--db", db, *SELECTION, "--name", "u")
    assert r.returncode == 0, r.stderr[-2000:]
    return rows(db, "u")


class Sweep:
    """A ``farm sweep`` whose stderr is read as it comes; ``waiting`` is set at its first progress
    line saying it lost the database server."""

    def __init__(self, url: str, name: str) -> None:
        self.p = start("sweep", "--db", url, *SELECTION, "--name", name)
        self.lines: list[str] = []
        self.waiting = threading.Event()
        self.reader = threading.Thread(target=self._read)
        self.reader.start()

    def _read(self) -> None:
        for line in self.p.stderr:
            self.lines.append(line.rstrip("\n"))
            if WAITING.match(line):
                self.waiting.set()

    def until_results(self, url: str, n: int, timeout: float = 240) -> None:
        """Wait until ``n`` results are stored; the sweep must still be running."""
        t0 = time.monotonic()
        while outcomes(url) < n:
            assert self.p.poll() is None, "\n".join(self.lines[-30:])
            assert time.monotonic() - t0 < timeout, f"fewer than {n} results after {timeout:.0f}s"
            time.sleep(0.2)
        assert self.p.poll() is None, "the sweep finished before the fault: " + "\n".join(self.lines[-5:])

    def end(self, timeout: float = 400) -> int:
        try:
            self.p.wait(timeout)
        finally:
            if self.p.poll() is None:
                kill(self.p)
        self.reader.join(30)
        return self.p.returncode


@pytest.fixture
def sweep_on(private_pg: PgCluster) -> Iterator[tuple[PgCluster, str]]:
    yield private_pg, private_pg.create_database("farm")


def _check(sw: Sweep, url: str, undisturbed: dict, down_s: float) -> tuple[float, int]:
    """The end state: exit 0, progress lines naming the database, back once, nothing lost.
    Returns (the pause the sweep reports, how many progress lines)."""
    log = "\n".join(sw.lines)
    assert sw.p.returncode == 0 and "Traceback" not in log, log[-3000:]
    waits = [m for m in map(WAITING.match, sw.lines) if m]
    backs = [m for m in map(BACK.match, sw.lines) if m]
    assert waits and all(m.group(1) == url for m in waits), log[-3000:]  # the database named (it has no password)
    assert len(backs) == 1 and backs[0].group(1) == url, log[-3000:]
    pause = float(backs[0].group(2))
    assert pause >= down_s * 0.5, (pause, down_s)  # it waited the outage out (from its first failed write)
    assert_intact(url, "pg", TOTAL)  # farm db check clean, finished, every harness once
    assert rows(url, "pg") == undisturbed
    return pause, len(waits)


@pytest.mark.slow(reason="PostgreSQL restarted mid-sweep; the sweep waits it out")
def test_a_restart_mid_sweep_is_waited_out(sweep_on: tuple[PgCluster, str], undisturbed: dict) -> None:
    """The server stopped mid-sweep (``pg_ctl stop -m fast``: the sweep's connections are cut)
    and started again as soon as the sweep says it is waiting: a restart that a write is sure
    to meet (``pg_ctl restart`` alone takes 0.2 s here, usually between two batches)."""
    cluster, url = sweep_on
    sw = Sweep(url, "pg")
    try:
        sw.until_results(url, 10)
        t0 = time.monotonic()
        cluster.stop()
        assert sw.waiting.wait(60), "\n".join(sw.lines[-20:])
        cluster.start()
        down = time.monotonic() - t0
    finally:
        sw.end()
    pause, lines = _check(sw, url, undisturbed, 0)
    print(f"restart: server down {down:.1f} s; the sweep waited {pause:.1f} s ({lines} progress lines); "
          f"{TOTAL} harnesses, rows equal the undisturbed run's, db check clean")


@pytest.mark.faults_slow  # 30 s of outage
def test_a_server_stopped_for_30_s_is_waited_out(sweep_on: tuple[PgCluster, str], undisturbed: dict) -> None:
    cluster, url = sweep_on
    sw = Sweep(url, "pg")
    try:
        sw.until_results(url, 10)
        t0 = time.monotonic()
        cluster.stop()
        time.sleep(30)  # the fault itself: 30 s without a server
        cluster.start()
        down = time.monotonic() - t0
        assert sw.waiting.is_set(), "\n".join(sw.lines[-20:])  # it noticed, and is still there
        assert sw.p.poll() is None, "\n".join(sw.lines[-20:])
    finally:
        sw.end()
    pause, lines = _check(sw, url, undisturbed, 30)
    print(f"stopped 30 s: server down {down:.1f} s; the sweep waited {pause:.1f} s ({lines} progress lines); "
          f"{TOTAL} harnesses, rows equal the undisturbed run's, db check clean")


def test_the_dashboard_answers_503_while_the_server_is_down_and_200_after(private_pg: PgCluster) -> None:
    from dashboards.app import create_app

    url = private_pg.create_database("farm")
    store = open_store(url)
    with store.session() as s:
        run = writes.create_run(s, env=ENV, name="r", total=2)
        hids = writes.harness_ids(s, [harness_desc(i) for i in range(2)])
        writes.Writer(s, run, hids).write([outcome(0), outcome(1, "fail")])
        writes.finish_run(s, run, "finished")
    store.dispose()
    app = create_app(url)
    client = app.test_client()
    pages = ("/", "/runs", "/runs.json", "/?status=fail")
    try:
        assert [client.get(p).status_code for p in pages] == [200] * len(pages)
        private_pg.stop()
        down = client.get("/runs")
        down_json = client.get("/runs.json")
        private_pg.start()
        after = [client.get(p).status_code for p in pages * 3]
    finally:
        app.config["STORE"].dispose()
    assert down.status_code == 503 and down.headers.get("Retry-After") == "5"
    text = down.get_data(as_text=True)
    assert "cannot reach the database server" in text and f"127.0.0.1:{private_pg.port}/farm" in text, text[:2000]
    assert "Traceback" not in text and "OperationalError" not in text
    assert down_json.status_code == 503 and down_json.get_json()["status"] == 503
    assert "cannot reach the database server" in down_json.get_json()["error"]
    assert after == [200] * len(after)  # back: every page, no 503 left over (dead pooled connections replaced)
