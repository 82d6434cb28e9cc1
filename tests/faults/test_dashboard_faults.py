"""``farm serve`` (waitress) facing hostile clients: 200 slow clients holding connections
open (each trickling its request headers), oversized query strings, other methods and path
traversal. Nothing is a 5xx, nothing leaks a file, and a normal client is still answered;
its latency with and without the slow clients is printed (docs/reliability.md has the
figures; speed is not asserted here)."""
from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from farm.store import open_store, writes
from tests.helpers.rows import ENV, harness_desc, outcome

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    d = tmp_path_factory.mktemp("serve")
    url = f"sqlite:///{d / 'd.db'}"
    store = open_store(url)
    for name in ("one", "two"):
        with store.session() as s:
            run = writes.create_run(s, env=ENV, name=name, platforms=["cpu"], run_on=["cpu"], total=3)
            writes.Writer(s, run, writes.harness_ids(s, [harness_desc(i) for i in range(3)])).write(
                [outcome(0), outcome(1, "fail"), outcome(2)])
            writes.finish_run(s, run, "finished")
    store.dispose()
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "farm", "serve", "--db", url, "--port", str(port)], cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    base = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            requests.get(base + "/runs", timeout=2)
            break
        except requests.ConnectionError:
            time.sleep(0.2)
    yield base, p
    p.terminate()
    p.wait(30)


def p95(base: str, n: int = 60) -> tuple[float, list[int]]:
    lat, codes = [], []
    with requests.Session() as s:
        for i in range(n):
            t0 = time.perf_counter()
            r = s.get(base + ("/", "/runs", "/?status=fail")[i % 3], timeout=60)
            lat.append(time.perf_counter() - t0)
            codes.append(r.status_code)
    return statistics.quantiles(lat, n=20)[-1], codes


def test_slow_clients_do_not_starve_a_normal_one(server: tuple[str, subprocess.Popen]) -> None:
    base, proc = server
    port = int(base.rsplit(":", 1)[1])
    p95(base, 10)  # warm the page cache
    quiet, codes = p95(base)
    assert set(codes) == {200}
    slow = []
    for i in range(200):  # each sends half a request and keeps its connection open
        c = socket.create_connection(("127.0.0.1", port), timeout=5)
        c.sendall(b"GET /runs HTTP/1.1\r\nHost: x\r\n")
        slow.append(c)
    try:
        for c in slow[::10]:
            c.sendall(b"X-Slow: 1\r\n")  # still trickling
        loaded, codes = p95(base)
        assert set(codes) == {200}
    finally:
        for c in slow:
            c.close()
    assert proc.poll() is None
    print(f"normal client p95: {quiet * 1000:.1f} ms unloaded, {loaded * 1000:.1f} ms with 200 slow clients "
          f"({loaded / quiet:.2f}x)")


@pytest.mark.parametrize("size", [8_000, 300_000, 2_000_000])
def test_oversized_query_strings_are_refused_not_crashed(server: tuple[str, subprocess.Popen], size: int) -> None:
    base, proc = server
    r = requests.get(base + "/?status=" + "a" * size, timeout=60)
    assert 400 <= r.status_code < 500 and "Traceback" not in r.text
    assert proc.poll() is None


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "TRACE", "OPTIONS", "PROPFIND", "HEAD"])
def test_other_methods(server: tuple[str, subprocess.Popen], method: str) -> None:
    base, _ = server
    for path in ("/", "/runs", "/api/runs", "/harness/fp0000"):
        r = requests.request(method, base + path, timeout=30)
        assert r.status_code < 500, (method, path, r.status_code)


@pytest.mark.parametrize("path", ["/static/../../../../etc/passwd", "/static/..%2f..%2f..%2f..%2fetc%2fpasswd",
                                  "/%2e%2e/%2e%2e/%2e%2e/etc/passwd", "/static/%2e%2e/%2e%2e/farm/store/db.py",
                                  "/harness/..%2f..%2f..%2fetc%2fpasswd", "/static//etc/passwd",
                                  "/static/..\\..\\..\\etc\\passwd", "/harness/%00", "/runs%00.json"])
def test_path_traversal_serves_nothing_outside(server: tuple[str, subprocess.Popen], path: str) -> None:
    base, _ = server
    with socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])), timeout=30) as c:
        c.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())  # sent as is: no client-side normalisation
        data = b""
        while chunk := c.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    assert status in (400, 404, 308), (path, data[:200])  # 308: Werkzeug merging "//", to a path inside /static/
    if status == 308:
        assert b"Location: http://waitress.invalid" in data and b"/static/etc" in data
    assert b"root:" not in data and b"def open_store" not in data
