"""Dashboard figures: page server times, and a bounded loopback load test of ``farm serve``.

``page_times`` times each page through Flask's test client in one process: ``first`` is
the first request of a fresh app (the per-run trend summaries already kept in the
database, as after any earlier view), ``render`` the median with the page cache and
the plot memo emptied before every request (what a page costs to compute), ``cached``
the median of page-cache hits (what a repeat visit costs while the runs are unchanged).

``load`` starts the real ``farm serve`` (waitress) on a free loopback port, has
``clients`` threads each fetch the pages in a shuffled cycle over one keep-alive
connection for ``seconds`` (no validators: every answer is a full 200 page), and stops
it. Nothing leaves 127.0.0.1. The server's stderr goes to a temporary file, never to an
unread pipe: waitress logs a warning for every queued request under load, and once a
pipe's 64 KiB were full its event loop blocked in that write and the server stopped
answering (60 s client timeouts). The lines of the server's errors come back in
``Load.server_errors``.
"""
from __future__ import annotations

import http.client
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from farm.errors import ConfigError

#: The search the figures time: two words; 8 harnesses of the upstream catalog (jax 0.10.2).
SEARCH = "/search?q=cumsum+float32"


def pages(store: Any) -> dict[str, str]:
    """page -> path on a database with at least two runs: overview, trends over the newest
    10 runs, compare (previous vs latest), the harness with the most records in the latest
    run, and a search.

    Raises:
        ConfigError: fewer than two runs.
    """
    from sqlalchemy import func, select  # deferred: sqlalchemy; farm --help imports farm.bench

    from farm.store.models import HarnessRow, ResultRow, Run  # deferred: farm.store.models

    with store.session() as s:
        ids = s.scalars(select(Run.id).order_by(Run.id.desc()).limit(2)).all()
        if len(ids) < 2:
            raise ConfigError("the dashboard figures need a database with at least two runs "
                              "(see `farm bench --make-db`)")
        fp = s.scalar(select(HarnessRow.fingerprint).join(ResultRow, ResultRow.harness_id == HarnessRow.id)
                      .where(ResultRow.run_id == ids[0]).group_by(HarnessRow.id, HarnessRow.name)
                      .order_by(func.count().desc(), HarnessRow.name).limit(1))
    return {"overview": "/", "trends": "/trends?runs=10", "compare": f"/compare?base={ids[1]}&head={ids[0]}",
            "harness": f"/harness/{fp}", "search": SEARCH}


@dataclass
class PageTime:
    page: str
    path: str
    first_s: float
    render_s: list[float]
    cached_s: list[float]
    statements: int  # SQL statements of one uncached request
    bytes: int


def page_times(db_url: str, repeats: int = 5, log: Callable[[str], None] = lambda s: None) -> list[PageTime]:
    """Server times of every page in ``pages`` on ``db_url`` (see the module docstring)."""
    from sqlalchemy import event  # deferred: sqlalchemy; farm --help imports farm.bench

    from dashboards import plots  # deferred: dashboards (: flask, altair, vl-convert)
    from dashboards.app import create_app  # deferred: as above

    app = create_app(db_url)
    store = app.config["STORE"]
    paths = pages(store)
    cache = app.extensions["farm_page_cache"]
    statements = [0]

    def count(*_a: Any, **_k: Any) -> None:
        statements[0] += 1

    client = app.test_client()
    out: list[PageTime] = []
    event.listen(store.engine, "before_cursor_execute", count)
    try:
        for page, path in paths.items():
            t0 = time.perf_counter()
            first = client.get(path)
            first_s = time.perf_counter() - t0
            if first.status_code != 200:
                raise RuntimeError(f"GET {path} answered {first.status_code}")
            render, cached = [], []
            for _ in range(repeats):
                cache.clear()
                plots.forget()
                statements[0] = 0
                t0 = time.perf_counter()
                client.get(path)
                render.append(time.perf_counter() - t0)
                n = statements[0]
            for _ in range(repeats):
                t0 = time.perf_counter()
                r = client.get(path)
                cached.append(time.perf_counter() - t0)
                assert r.headers.get("X-Farm-Cache") == "hit", path
            out.append(PageTime(page, path, first_s, render, cached, n, len(first.data)))
            log(f"bench: {page} first {first_s * 1e3:.0f} ms, render {statistics.median(render) * 1e3:.0f} ms, "
                f"cached {statistics.median(cached) * 1e3:.1f} ms")
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
        store.dispose()
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_up(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"farm serve exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"farm serve did not listen on 127.0.0.1:{port} within {timeout:.0f} s")


@dataclass
class Load:
    clients: int
    seconds: float
    threads: int
    latencies: list[float] = field(default_factory=list)
    by_page: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    server_errors: list[str] = field(default_factory=list)  # the server's error lines (tracebacks' last lines)

    @property
    def requests(self) -> int:
        return len(self.latencies)

    def quantile(self, q: float, xs: list[float] | None = None) -> float:
        xs = sorted(self.latencies if xs is None else xs)
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def _client(port: int, paths: dict[str, str], until: float, seed: int, load: Load, lock: threading.Lock) -> None:
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    order = list(paths.items())
    try:
        while time.monotonic() < until:
            rng.shuffle(order)
            for page, path in order:
                if time.monotonic() >= until:
                    break
                t0 = time.perf_counter()
                try:
                    conn.request("GET", path)
                    resp = conn.getresponse()
                    resp.read()
                    ok, why = resp.status == 200, f"{resp.status} {path}"
                except (OSError, http.client.HTTPException) as e:
                    ok, why = False, f"{type(e).__name__} {path}"
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                dt = time.perf_counter() - t0
                with lock:
                    load.latencies.append(dt)
                    load.by_page.setdefault(page, []).append(dt)
                    if not ok:
                        load.errors.append(why)
    finally:
        conn.close()


def load(db_url: str, clients: int = 20, seconds: float = 30.0, threads: int = 8,
         log: Callable[[str], None] = lambda s: None) -> Load:
    """The load test (see the module docstring): ``clients`` concurrent clients for ``seconds``
    against ``farm serve --threads threads`` over ``db_url``, loopback only."""
    if not 1 <= clients <= 200 or not 0 < seconds <= 600:
        raise ConfigError(f"clients must be 1..200 and seconds 0..600, not {clients} and {seconds}")
    from farm.store import open_store  # deferred: farm.store (sqlalchemy); farm --help imports farm.bench

    store = open_store(db_url, upgrade=False)
    try:
        paths = pages(store)
    finally:
        store.dispose()
    port = _free_port()
    farm = os.path.join(os.path.dirname(sys.executable), "farm")
    cmd = [farm, "serve", "--db", db_url, "--host", "127.0.0.1", "--port", str(port), "--threads", str(threads)]
    server_log = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=server_log, text=True)
    result = Load(clients, seconds, threads)
    try:
        _wait_up(port, proc)
        log(f"bench: load test, {clients} clients x {seconds:.0f} s on farm serve (waitress, {threads} threads) "
            f"127.0.0.1:{port}")
        lock = threading.Lock()
        t0 = time.monotonic()
        until = t0 + seconds
        workers = [threading.Thread(target=_client, args=(port, paths, until, i, result, lock), daemon=True)
                   for i in range(clients)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(seconds + 120)
        result.seconds = time.monotonic() - t0
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        server_log.seek(0)
        result.server_errors = _error_lines(server_log.read())
        server_log.close()
    for line in result.server_errors[:5]:
        log(f"bench: farm serve: {line}")
    return result


def _error_lines(text: str) -> list[str]:
    """The server's errors in its stderr: each "ERROR" log line and each traceback's last
    line (the exception: the first unindented line after its frames), in order; waitress's
    queue-depth warnings are left out."""
    out: list[str] = []
    prev = ""
    for line in text.splitlines():
        if " ERROR " in line or line.startswith("ERROR"):
            out.append(line.strip())
        elif line.strip() and not line[0].isspace() and prev[:1].isspace() \
                and not line.startswith(("Traceback", "During handling", "The above")):
            out.append(line.strip())
        prev = line
    return out
