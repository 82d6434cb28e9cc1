"""A real multi-node Ray cluster on one machine, PostgreSQL as the store.

Head (no worker slots) + two worker nodes started with ``ray start`` (token auth, usage
stats off, small memory), a fresh PostgreSQL database, and a scheduled sweep run by
``farm schedule run-pending``. One worker node is killed mid-sweep: the run must finish
with every result present exactly once.

Every process a node starts shares the session of its ``ray start --block`` process, so
a node is stopped (or killed) by signalling that session only: other Ray instances on
the machine are never touched (no ``ray stop``).
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PG = "postgresql+psycopg://postgres@127.0.0.1:5432/"

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def session_pids(sid: int) -> list[tuple[int, str]]:
    """(pid, command name) of every process in session ``sid``."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                st = fh.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        if int(fields[3]) == sid:
            out.append((int(d), st[st.index("(") + 1:st.rindex(")")]))
    return out


class LocalCluster:
    """Head + worker nodes on loopback, each ``ray start --block`` in its own session."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.dashboard_port = free_port()
        self.dashboard = f"http://127.0.0.1:{self.dashboard_port}"
        self.procs: dict[str, subprocess.Popen] = {}
        self.specs: dict[str, tuple[str, bool, tuple[str, ...]]] = {}
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token,
                    "RAY_USAGE_STATS_ENABLED": "0", "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
                    "PYTHONPATH": str(ROOT),
                    # notice a lost node in ~3 s instead of ~30 s
                    "RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "1000",
                    "RAY_health_check_failure_threshold": "3"}

    def start_node(self, name: str, resources: str, head: bool = False, extra: tuple[str, ...] = (),
                   attempt: int = 1) -> None:
        self.specs[name] = (resources, head, extra)
        cmd = [str(BIN / "ray"), "start", "--block", "--disable-usage-stats", f"--temp-dir={self.base / name}",
               "--node-ip-address=127.0.0.1", "--num-cpus=1", "--object-store-memory=100000000",
               "--memory=2000000000", f"--resources={resources}",
               f"--node-manager-port={free_port()}", f"--object-manager-port={free_port()}",
               f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
               f"--runtime-env-agent-port={free_port()}", f"--metrics-export-port={free_port()}", *extra]
        if head:
            cmd += ["--head", f"--port={self.port}", "--include-dashboard=true", "--dashboard-host=127.0.0.1",
                    f"--dashboard-port={self.dashboard_port}",
                    f"--ray-client-server-port={free_port()}"]
        else:
            cmd += [f"--address={self.address}"]
        log = open(self.base / f"{name}.log", "a")
        self.procs[name] = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True, cwd=str(ROOT))
        # a port free_port() chose may be taken before the node binds it (a private PostgreSQL or another
        # test's cluster on the other xdist worker): a node that exits at once is started again on new ports
        try:
            self.procs[name].wait(timeout=5)
        except subprocess.TimeoutExpired:
            return  # up (``ray start --block`` runs until stopped)
        if attempt < 3:
            self.start_node(name, resources, head, extra, attempt + 1)

    def revive(self) -> list[str]:
        """Start again each worker node whose ``ray start --block`` has exited (a port lost late, on a
        loaded host: a component binds some ports seconds after the node came up); the names revived."""
        dead = [n for n, p in self.procs.items() if p.poll() is not None and not self.specs[n][1]]
        for name in dead:
            self.start_node(name, *self.specs[name])
        return dead

    def log_tails(self, chars: int = 1500) -> str:
        return "\n".join(f"--- {n}.log (exit {p.poll()}) ---\n"
                         + (self.base / f"{n}.log").read_text(errors="replace")[-chars:]
                         for n, p in self.procs.items())

    def wait_for(self, slots: int, timeout_s: float = 300.0, resource: str = "cpu_slot") -> None:
        """Wait until the cluster offers ``slots`` ``resource`` (a client in a child process, polling
        for 30 s at a time); a worker node that died meanwhile is started again, and a cluster that never
        gets there fails with the client's error and every node's log. A client that has not even
        connected within its time (a fresh clone's suite with Bazel beside it: the head took over
        120 s) is one more try, not the end."""
        code = ("import ray,time,sys; ray.init(address=sys.argv[1], log_to_driver=False)\n"
                "t=time.time()\n"
                "while ray.cluster_resources().get(sys.argv[4],0) < int(sys.argv[2]):\n"
                "    time.sleep(0.3)\n"
                "    assert time.time()-t < float(sys.argv[3]), ray.cluster_resources()\n")
        deadline = time.monotonic() + timeout_s
        revived: list[str] = []
        while True:
            revived += self.revive()
            try:
                r = subprocess.run([sys.executable, "-c", code, self.address, str(slots), "30", resource],
                                   env=self.env, timeout=max(60.0, deadline - time.monotonic()),
                                   capture_output=True, text=True)
                if r.returncode == 0:
                    return
                err = r.stderr[-3000:]
            except subprocess.TimeoutExpired as e:
                err = f"the client did not finish in {e.timeout:.0f} s: {(e.stderr or b'')[-3000:]!r}"
            if time.monotonic() > deadline:
                raise AssertionError(f"the cluster did not offer {slots} {resource} in {timeout_s:.0f} s "
                                     f"(nodes started again: {revived}):\n{err}\n{self.log_tails()}")

    def pids(self, name: str) -> list[tuple[int, str]]:
        p = self.procs[name]
        return session_pids(p.pid)  # start_new_session: the session id is the leader's pid

    def kill_node(self, name: str) -> None:
        """SIGKILL every process of one node (raylet, agents, its workers): a machine lost."""
        for pid, _ in self.pids(name):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            for pid, _ in self.pids(name):
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(self.pids(n) for n in self.procs):
            time.sleep(0.3)
        for name in self.procs:
            self.kill_node(name)
        for p in self.procs.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


@pytest.fixture(scope="module")
def timings() -> dict[str, float]:
    t: dict[str, float] = {}
    yield t
    print("\n[cluster timings] " + ", ".join(f"{k} {v:.1f}s" for k, v in t.items()))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, timings: dict[str, float]):  # noqa: ANN201
    if not shutil.which("ray", path=str(BIN)):
        pytest.skip("ray CLI not installed in this environment")
    base = Path(f"/tmp/farmc-{secrets.token_hex(3)}")  # short: Ray's socket paths must stay < 108 chars
    base.mkdir()
    c = LocalCluster(base)
    t0 = time.monotonic()
    try:
        c.start_node("head", "{}", head=True)
        c.start_node("n1", '{"cpu_slot": 1}')
        c.start_node("n2", '{"cpu_slot": 1, "tpu_slot": 1}')
        # a node that declares a GPU to Ray, as plain `ray start --num-gpus 1` does (no cpu_slot)
        c.start_node("g1", "{}", extra=("--num-gpus=1",))
        c.wait_for(2)
        c.wait_for(1, resource="GPU")
        timings["cluster start"] = time.monotonic() - t0
        yield c
    finally:
        t1 = time.monotonic()
        c.stop()
        timings["cluster stop"] = time.monotonic() - t1
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_url():  # noqa: ANN201
    psycopg = pytest.importorskip("psycopg")
    name = f"farm_test_{secrets.token_hex(4)}"
    try:
        admin = psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=postgres", autocommit=True,
                                connect_timeout=5)
    except psycopg.OperationalError as e:
        pytest.skip(f"PostgreSQL is not running on 127.0.0.1:5432: {e}")
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield PG + name
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _outcomes(url: str, run_name: str) -> list[tuple[int, str]]:
    from sqlalchemy import create_engine, text

    eng = create_engine(url)
    try:
        with eng.connect() as conn:
            return [tuple(r) for r in conn.execute(text(
                "SELECT o.harness_id, o.worst FROM harness_outcomes o JOIN runs r ON r.id = o.run_id WHERE r.name = :n"),
                {"n": run_name})]
    except Exception:
        return []
    finally:
        eng.dispose()


@pytest.mark.slow(reason="a multi-node Ray cluster loses a node mid-sweep and the sweep waits it out")
def test_scheduled_sweep_survives_losing_a_node(cluster: LocalCluster, pg_url: str, tmp_path: Path,
                                                timings: dict[str, float]) -> None:
    from farm import catalog
    from farm.run.schedules import config, slots

    filters = {"family": "elementwise_unary"}
    total = len(catalog.select(catalog.Filters.parse(**filters)))
    cfg = tmp_path / "farm.toml"
    cfg.write_text(f"""
[farm]
db = "{pg_url}"
address = "{cluster.address}"

[sweep.cluster]
schedule = "0 0 * * *"   # the most recent slot (today 00:00 UTC) is due at once: catch-up
family = "elementwise_unary"
platforms = "cpu"
repeats = 1
crossexec = false
batch = 2
""")
    spec = config.load_config(cfg).sweeps["cluster"]
    (_, slot), = slots.pending(config.load_config(cfg))
    run_name = spec.run_name(slot)

    t0 = time.monotonic()
    out = open(tmp_path / "run-pending.log", "w")
    proc = subprocess.Popen([str(BIN / "farm"), "schedule", "run-pending", "--config", str(cfg)], env=cluster.env,
                            stdout=out, stderr=subprocess.STDOUT, cwd=str(ROOT))
    hosts: dict[str, set[int]] = {"n1": set(), "n2": set(), "head": set()}
    killed_at = None
    try:
        while proc.poll() is None:
            for name in hosts:
                if name == "n1" and killed_at is not None:
                    continue
                hosts[name] |= {pid for pid, comm in cluster.pids(name) if comm.startswith("ray::Harness")}
            if killed_at is None:
                done = len(_outcomes(pg_url, run_name))
                if done >= total // 4 and hosts["n1"] and hosts["n2"]:
                    cluster.kill_node("n1")
                    killed_at = done
                    timings["node killed after"] = time.monotonic() - t0
            assert time.monotonic() - t0 < 540, "sweep did not finish"
            if killed_at is None and done and "first result" not in timings:
                timings["first result"] = time.monotonic() - t0
            time.sleep(0.3)
    finally:
        if proc.poll() is None:
            proc.kill()
        out.close()
    timings["sweep"] = time.monotonic() - t0
    log = (tmp_path / "run-pending.log").read_text()
    print(log[-3000:])
    assert proc.returncode == 0, log[-3000:]
    assert killed_at is not None and killed_at < total, "the node was not killed mid-sweep"
    assert hosts["n1"] and hosts["n2"] and not hosts["head"], hosts  # spread over both worker nodes only

    rows = _outcomes(pg_url, run_name)
    ids = [hid for hid, _ in rows]
    assert len(ids) == total and len(set(ids)) == total  # every result, exactly once
    assert not [w for _, w in rows if w in ("crashed", "timeout")], rows

    from sqlalchemy import create_engine, text

    eng = create_engine(pg_url)
    with eng.connect() as conn:
        status, stats = conn.execute(text("SELECT status, stats FROM runs WHERE name = :n"), {"n": run_name}).one()
    eng.dispose()
    assert status == "finished"
    assert stats["workers_seen"] >= 2 and stats["crashed"] == 0, stats

    # The slot is recorded: a second tick runs nothing.
    p = subprocess.run([str(BIN / "farm"), "schedule", "run-pending", "--config", str(cfg)], env=cluster.env,
                       capture_output=True, text=True, cwd=str(ROOT), timeout=120)
    assert p.returncode == 0 and "nothing is due" in p.stderr, p.stderr
    print(f"\n{total} harnesses; n1 killed after {killed_at} results; worker pids n1={sorted(hosts['n1'])} "
          f"n2={sorted(hosts['n2'])}; run stats {stats}")


def test_sweep_submit_runs_the_driver_on_the_cluster(cluster: LocalCluster, pg_url: str,
                                                    timings: dict[str, float]) -> None:
    """farm sweep --submit: a Ray job whose driver runs on the head, results in PostgreSQL."""
    t0 = time.monotonic()
    p = subprocess.run([str(BIN / "farm"), "sweep", "--submit", "--dashboard", cluster.dashboard, "--db", pg_url,
                        "--group", "exp,sin", "--dtype", "float32", "--platforms", "cpu", "--repeats", "1",
                        "--no-crossexec", "--name", "submitted"], env=cluster.env, capture_output=True, text=True,
                       cwd=str(ROOT), timeout=300)
    timings["submitted sweep"] = time.monotonic() - t0
    assert p.returncode == 0, p.stderr[-3000:]
    assert "SUCCEEDED" in p.stderr
    rows = _outcomes(pg_url, "submitted")
    assert len(rows) == 2 and not [w for _, w in rows if w in ("crashed", "timeout")], rows


def test_sweep_runs_on_cpu_and_gpu_nodes(cluster: LocalCluster, tmp_path: Path, timings: dict[str, float]) -> None:
    """--run-on cpu,gpu on the cluster: every harness on a cpu worker (cpu_slot nodes) and on
    a gpu worker holding half of g1's Ray GPU, pinned to cuda with a matching memory cap;
    without a real GPU behind it, the gpu lane says not_runnable_here."""
    import json

    db = f"sqlite:///{tmp_path / 'kinds.db'}"
    t0 = time.monotonic()
    p = subprocess.run([str(BIN / "farm"), "sweep", "--address", cluster.address, "--db", db, "--group", "exp,sin",
                        "--dtype", "float32", "--platforms", "cpu,cuda", "--run-on", "cpu,gpu", "--gpu-fraction",
                        "0.5", "--workers", "1", "--no-crossexec", "--name", "kinds"], env=cluster.env,
                       capture_output=True, text=True, cwd=str(ROOT), timeout=300)
    timings["cpu,gpu sweep"] = time.monotonic() - t0
    assert p.returncode == 0, p.stderr[-3000:]
    p = subprocess.run([str(BIN / "farm"), "show", "kinds", "--db", db, "--format", "json"], env=cluster.env,
                       capture_output=True, text=True, cwd=str(ROOT), timeout=120)
    hs = json.loads(p.stdout)["harnesses"]
    assert len(hs) == 2
    for h in hs:
        assert h["platforms"]["cpu"]["execute"]["status"] == "ok"
        assert h["platforms"]["cuda"]["execute"]["status"] == "not_runnable_here"
    from sqlalchemy import create_engine, text

    eng = create_engine(db)
    with eng.connect() as conn:
        stats = json.loads(conn.execute(text("SELECT stats FROM runs WHERE name = 'kinds'")).scalar_one())
    eng.dispose()
    envs = stats["worker_environments"]
    gpu = [e for e in envs.values() if e["device_kind"] == "gpu"]
    assert gpu and gpu[0]["pinned"] == {"JAX_PLATFORMS": "cuda", "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
                                        "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.450"}
    gpu_nodes = {w.split(":")[1] for w, e in envs.items() if e["device_kind"] == "gpu"}
    cpu_nodes = {w.split(":")[1] for w, e in envs.items() if e["device_kind"] == "cpu"}
    assert gpu_nodes and cpu_nodes and not gpu_nodes & cpu_nodes  # the gpu workers ran on g1 only
