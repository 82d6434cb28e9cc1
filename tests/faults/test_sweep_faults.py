"""Sweeps under faults: the driver SIGKILLed at random points, the database connection
cut mid-sweep (PostgreSQL), two sweeps and the dashboard on one SQLite file, a full disk.
Every case ends with ``farm db check`` clean and every harness's result exactly once."""
from __future__ import annotations

import os
import random
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.faults.sweeps import CACHED, FAMILY, SMALL, assert_intact, farm, kill, outcomes, selected, start, wait_for

pytestmark = pytest.mark.slow
SEED = int(os.environ.get("FARM_FAULT_SEED", "20261125"))


def run_exists(db: str, name: str) -> bool:
    r = farm("runs", "--db", db, "--format", "json")
    return r.returncode == 0 and f'"{name}"' in r.stdout


def kill_loop(tmp_path: Path, sel: list[str], kills: int, window: tuple[float, float]) -> dict[str, int]:
    """Start (or resume) the sweep and SIGKILL it after a random time, ``kills`` times; then resume to the end."""
    rng = random.Random(SEED)
    db = f"sqlite:///{tmp_path / 'k.db'}"
    total = selected(sel)
    landed = 0
    for _ in range(kills):
        p = start("sweep", "--db", db, *sel, *(["--resume", "k"] if run_exists(db, "k") else ["--name", "k"]))
        time.sleep(rng.uniform(*window))
        if p.poll() is None:
            landed += 1
        kill(p)
        assert farm("db", "check", "--db", db).returncode in (0, 2), "a killed sweep left a store that fails its check"
    r = farm("sweep", "--db", db, *sel, "--resume", "k") if run_exists(db, "k") else \
        farm("sweep", "--db", db, *sel, "--name", "k")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    assert_intact(db, "k", total)
    print(f"driver SIGKILL: {kills} kills ({landed} while running), 1 resume to the end, {total} results, 0 lost")
    return {"kills": kills, "landed": landed}


@pytest.mark.faults_slow  # quick twin in CI: tests/test_sweep.py::test_killed_driver_resumes_without_redoing
def test_driver_killed_twice_then_resumed(tmp_path: Path) -> None:
    kill_loop(tmp_path, SMALL, kills=2, window=(6.0, 16.0))


@pytest.mark.faults_slow
def test_driver_killed_at_ten_random_points_then_resumed(tmp_path: Path) -> None:
    kill_loop(tmp_path, FAMILY, kills=10, window=(2.0, 30.0))


def _descends(pid: str, ancestor: int) -> bool:
    p = int(pid)
    while p > 1:
        try:
            with open(f"/proc/{p}/stat") as f:
                p = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if p == ancestor:
            return True
    return False


@pytest.mark.faults_slow  # quick twin in CI: tests/test_sweep.py::test_worker_killed_mid_sweep_loses_nothing
def test_worker_killed_mid_harness(tmp_path: Path) -> None:
    """SIGKILL one of this sweep's Ray workers while it runs (the machine may run other sweeps: this
    one's workers are those descended from its driver, through the raylet it started)."""
    db = f"sqlite:///{tmp_path / 'w.db'}"
    p = start("sweep", "--db", db, *FAMILY, "--name", "w")
    killed = 0
    try:
        pids: list[str] = []
        t0 = time.monotonic()
        while not pids and p.poll() is None and time.monotonic() - t0 < 240:
            time.sleep(0.5)
            pids = [pid for pid in subprocess.run(["pgrep", "-f", "ray::HarnessWorker.run_batch"], capture_output=True,
                                                  text=True).stdout.split() if _descends(pid, p.pid)]
        time.sleep(3.0)  # well into its batch
        for pid in pids[:1]:
            os.kill(int(pid), 9)
            killed += 1
        err = p.communicate(timeout=400)[1]
    finally:
        if p.poll() is None:
            kill(p)
    assert killed == 1 and p.returncode == 0 and "Traceback" not in err, err[-2000:]
    print(f"worker SIGKILL: {killed} worker killed mid-sweep; the sweep finished")
    assert_intact(db, "w", selected(FAMILY))


@pytest.mark.slow(reason="a PostgreSQL connection cut mid-sweep; the sweep carries on")
def test_database_connection_cut_mid_sweep(pg_url: str) -> None:
    """What a PostgreSQL restart looks like to the client: every backend of the sweep's database
    terminated (pg_terminate_backend) while it writes. The shared server itself is not restarted."""
    import psycopg

    from tests.conftest import PG_ADMIN

    dbname = pg_url.rsplit("/", 1)[1]
    # the whole family (271 harnesses): 52 now run in about a second, and the writer commits
    # them in one or two batches, so the sweep was often over before the first cut
    whole = selected(FAMILY)
    p = start("sweep", "--db", pg_url, *FAMILY, "--name", "pg")
    cuts = 0
    try:
        for target in (6, 20, 34):
            if wait_for(p, pg_url, target) >= whole or p.poll() is not None:
                break
            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                cuts += len(conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                         "WHERE datname = %s AND pid <> pg_backend_pid()", (dbname,)).fetchall())
        err = p.communicate(timeout=300)[1]
    finally:
        if p.poll() is None:
            kill(p)
    assert cuts >= 1, f"no backend to cut (sweep exit {p.returncode}): {err[-3000:]}"
    assert "Traceback" not in err, err[-3000:]
    if p.returncode != 0:  # stopped resumably, with one line
        assert p.returncode == 2 and "lost the connection" in err, err[-2000:]
        r = farm("sweep", "--db", pg_url, "--resume", "pg")
        assert r.returncode == 0, r.stderr[-2000:]
    print(f"connection cut: {cuts} backends terminated; sweep exit {p.returncode}")
    assert_intact(pg_url, "pg", whole)


@pytest.mark.slow(reason="two concurrent sweeps and the dashboard on one SQLite file")
def test_two_sweeps_and_the_dashboard_share_one_sqlite_file(tmp_path: Path) -> None:
    """Two sweeps create and migrate one new SQLite file at once and write to it while the
    dashboard reads. Both runs end ``finished`` with all their rows: before the migration lock
    stopped closing a descriptor of the database file, the first sweep to exit deleted the WAL
    the other was still committing to (``tests/test_store_concurrency.py``), and 2 runs in 3
    left run ``b`` ``running`` with only its installation stats (about 18 s)."""
    db = f"sqlite:///{tmp_path / 'shared.db'}"
    a = start("sweep", "--db", db, *SMALL, "--name", "a")
    b = start("sweep", "--db", db, *SMALL[:-6], "--workers", "1", "--batch", "3", "--repeats", "1", "--name", "b")
    statuses: list[int] = []
    bodies: list[str] = []
    stop = threading.Event()

    def browse() -> None:
        from dashboards.app import create_app

        while not (tmp_path / "shared.db").exists() and not stop.is_set():
            time.sleep(0.2)
        while outcomes(db) == 0 and not stop.is_set():
            time.sleep(0.2)
        app = create_app(db)
        client = app.test_client()
        while not stop.is_set():
            for url in ("/", "/runs", "/runs.json", "/?status=ok"):
                r = client.get(url)
                statuses.append(r.status_code)
                if r.status_code >= 500:
                    bodies.append(r.get_data(as_text=True)[:500])
            stop.wait(0.25)  # a reader every quarter second, not a core spent reading
        app.config["STORE"].dispose()

    t = threading.Thread(target=browse)
    t.start()
    try:
        err_a = a.communicate(timeout=400)[1]
        err_b = b.communicate(timeout=400)[1]
    finally:
        stop.set()
        t.join(60)
        for p in (a, b):
            if p.poll() is None:
                kill(p)
    for err, p in ((err_a, a), (err_b, b)):
        assert p.returncode == 0 and "locked" not in err and "Traceback" not in err, err[-2000:]
    assert statuses and not bodies, bodies[:2]
    print(f"shared SQLite: 2 sweeps, {len(statuses)} dashboard requests during them, none failed")
    assert_intact(db, "a", selected(SMALL))
    assert_intact(db, "b", selected(SMALL))


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True).returncode == 0


@pytest.mark.slow(reason="a sweep runs into a full disk, then resumes to the end")
def test_a_full_disk_is_one_error_and_resume_completes(tmp_path: Path) -> None:
    """A size-limited tmpfs holds the database; a ballast file leaves it ~700 KiB free, less than
    the 59 harnesses' results need. Nothing here is timed, so JAX's compilation
    cache stays on (the whole family without it took 50 s of CPU; the disk fills the same way)."""
    fs = tmp_path / "small"
    if not _mount_tmpfs(fs, "32m"):
        pytest.skip("cannot mount a size-limited tmpfs here (needs root): see docs/reliability.md")
    try:
        db = f"sqlite:///{fs / 'full.db'}"
        assert farm("db", "upgrade", "--db", db).returncode == 0
        st = os.statvfs(fs)
        ballast = fs / "ballast"
        ballast.write_bytes(b"\0" * max(0, st.f_bavail * st.f_frsize - 700 * 1024))
        r = farm("sweep", "--db", db, *SMALL, "--name", "full", env=CACHED)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
        lines = [l for l in r.stderr.splitlines() if l.startswith("farm: error:")]
        assert len(lines) == 1 and "disk is full" in lines[0] and "--resume full" in lines[0], r.stderr[-2000:]
        ballast.unlink()  # space freed
        check = farm("db", "check", "--db", db)
        assert check.returncode == 0, check.stdout + check.stderr  # the database is intact
        done = outcomes(db, "full")
        r = farm("sweep", "--db", db, "--resume", "full", env=CACHED)
        assert r.returncode == 0, r.stderr[-2000:]
        whole = selected(SMALL)
        print(f"disk full: stopped after {done} of {whole} results; resumed to the end")
        assert done < whole
        assert_intact(db, "full", whole)
    finally:
        subprocess.run(["umount", "-l", str(fs)], capture_output=True)
