"""Scheduled sweeps: config, slots and catch-up, the state file, locks, regression actions.

No Ray here: the sweep itself is replaced by a stub that writes a run row, so each test
checks one scheduling behaviour in well under a second. tests/test_run_cluster.py runs the
real thing on a multi-node cluster.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import secrets
import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from sqlalchemy import select

from farm.run.schedules import config, jobs, slots, state
from farm.errors import ConfigError
from farm.store.models import Run

UTC = timezone.utc
ENV = {"jax_version": "0", "jaxlib_version": "0", "python": "3.11", "host": "test", "device_kinds": ["cpu"],
       "xla_flags": "", "farm_commit": "test"}


def write(tmp_path: Path, body: str, db: str | None = None) -> config.Config:
    p = tmp_path / "farm.toml"
    db = db or f"sqlite:///{tmp_path / 'farm.db'}"
    p.write_text(f'[farm]\ndb = "{db}"\n' + body)
    return config.load_config(p)


NIGHTLY = """
[sweep.nightly]
schedule = "0 2 * * *"
primitive = ["exp", "sin"]
dtype = "float32"
platforms = "cpu"
baseline = "previous"
[sweep.nightly.on_regression]
exit_code = 3
report = "reports/{run}.md"
"""


# --------------------------------------------------------------------------- config
def test_config_builds_sweep_args(tmp_path: Path) -> None:
    cfg = write(tmp_path, NIGHTLY)
    spec = cfg.sweeps["nightly"]
    assert spec.run_name(datetime(2026, 1, 2, 2, 0, tzinfo=UTC)) == "nightly-20260102T0200Z"
    args = spec.sweep_args("nightly-20260102T0200Z")
    assert args[:3] == ["sweep", "--name", "nightly-20260102T0200Z"]
    assert ["--primitive", "exp,sin"] == args[args.index("--primitive"):args.index("--primitive") + 2]
    assert spec.sweep_args("nightly-x", resume=True)[:3] == ["sweep", "--resume", "nightly-x"]
    assert cfg.state_path == tmp_path / "farm.state.json"


@pytest.mark.parametrize("body, message", [
    ('[sweep.a]\nschedule = "61 * * * *"\n', "not valid cron"),
    ('[sweep.a]\nprimitive = "exp"\n', "missing schedule"),
    ('[sweep.a]\nschedule = "* * * * *"\nplatfroms = "cpu"\n', "did you mean 'platforms'"),
    ('[sweep.a]\nschedule = "* * * * *"\nsubmit = true\n', "needs dashboard"),
    ("", "no [sweep.NAME] tables"),
    ('[sweep.a]\nschedule = "* * * * *"\nconfig = "x64=maybe"\n', "[sweep.a]: --config x64: unknown value 'maybe'"),
    ('[sweep.a]\nschedule = "* * * * *"\njax = ["0.9.2", "0.4.1"]\n', "0.4.1 is older than the oldest supported"),
    ('[sweep.a]\nschedule = "* * * * *"\njax = "0.9.2"\nconfig = "x64=on"\n', "one dimension per sweep"),
    ('[sweep.a]\nschedule = "* * * * *"\nfamily = ["elementwise_unray"]\n', "unknown family 'elementwise_unray'; did you mean elementwise_unary"),
    ('[sweep.a]\nschedule = "* * * * *"\ndtype = "float23"\n', "unknown dtype 'float23'"),
    ('[sweep.a]\nschedule = "* * * * *"\ncatalog = "upstreem"\n', "unknown catalog 'upstreem'; did you mean upstream"),
])
def test_bad_config_is_one_clear_error(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        write(tmp_path, body)


def test_example_config_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    from farm.run.versions import venvs

    monkeypatch.setattr(venvs, "_published", ["0.10.2", "0.11.0", "0.11.2", "0.12.0", "0.12.0.1"])
    cfg = config.load_config(Path(__file__).resolve().parent.parent / "farm.example.toml")
    assert cfg.sweeps
    # the nightly release sweep follows the index: the newest release and the last of the line before
    releases = cfg.sweeps["nightly-releases"]
    assert releases.labels == ("jax=0.11.2", "jax=0.12.0.1")
    assert "--jax" in (argv := releases.sweep_args("r")) and argv[argv.index("--jax") + 1] == "0.11.2,0.12.0.1"


# --------------------------------------------------------------------------- slots
def test_due_slot_is_the_most_recent_slot_once() -> None:
    now = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
    # three nights missed: only the newest slot runs
    assert config.due_slot("0 2 * * *", now, datetime(2026, 1, 1, 2, 0, tzinfo=UTC)) == \
        datetime(2026, 1, 5, 2, 0, tzinfo=UTC)
    assert config.due_slot("0 2 * * *", now, datetime(2026, 1, 5, 2, 0, tzinfo=UTC)) is None
    # a slot at the current minute is due
    assert config.due_slot("30 9 * * *", now, None) == now


# --------------------------------------------------------------------------- running
class FakeSweep:
    """Stands in for `farm sweep`: records calls and writes a finished run row."""

    def __init__(self, db: str, rc: int = 0) -> None:
        self.db, self.rc, self.calls = db, rc, []

    def __call__(self, args: list[str], log=None) -> int:  # noqa: ANN001
        from farm.store import open_store, writes

        from farm.run import configs
        from farm.run.versions import venvs

        from farm.results import RunDims
        from farm.run.request import SweepRequest

        self.calls.append(args)
        req = SweepRequest.from_argv(args)
        if self.rc == 0 and req.name:
            base = RunDims(schedule=req.schedule, slot=req.slot)
            runs = [(f"{req.name}@{c.label}", dataclasses.replace(base, series=req.name, config=c.label))
                    for c in configs.parse(list(req.config))] if req.config else []
            if req.jax:
                runs += [(f"{req.name}@jax={v}", dataclasses.replace(base, series=req.name, jax_version=v))
                         for v in venvs.parse(req.jax)]
            store = open_store(self.db)
            with store.session() as s:
                for n, dims in runs or [(req.name, base)]:
                    if s.scalar(select(Run.id).where(Run.name == n)) is None:
                        writes.finish_run(s, writes.create_run(s, env=ENV, name=n, dims=dims), "finished")
            store.dispose()
        return self.rc


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeSweep:
    f = FakeSweep(f"sqlite:///{tmp_path / 'farm.db'}")
    monkeypatch.setattr(slots, "run_farm", f)
    monkeypatch.setattr(slots, "compare", lambda spec, base, run, log=None: (False, ""))
    return f


def test_run_pending_records_the_slot_and_does_not_repeat_it(tmp_path: Path, fake: FakeSweep) -> None:
    cfg = write(tmp_path, NIGHTLY)
    now = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
    (r,) = slots.run_pending(cfg, now=now, log=lambda m: None)
    assert (r.run, r.status) == ("nightly-20260105T0200Z", "finished")
    assert slots.run_pending(cfg, now=now, log=lambda m: None) == []
    saved = json.loads(cfg.state_path.read_text())["sweeps"]["nightly"]
    assert saved["last_slot"].startswith("2026-01-05T02:00") and saved["status"] == "finished"
    assert len(fake.calls) == 1


def test_store_is_the_record_without_a_state_file(tmp_path: Path, fake: FakeSweep) -> None:
    """A CronJob pod has no disk of its own: the run name in the store says the slot is done."""
    cfg = write(tmp_path, NIGHTLY)
    now = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
    slots.run_pending(cfg, now=now, log=lambda m: None)
    cfg.state_path.unlink()
    (r,) = slots.run_pending(cfg, now=now, log=lambda m: None)
    assert r.status == "skipped" and len(fake.calls) == 1


def test_an_interrupted_slot_is_resumed(tmp_path: Path, fake: FakeSweep) -> None:
    from farm.store import open_store, writes

    cfg = write(tmp_path, NIGHTLY)
    store = open_store(cfg.sweeps["nightly"].db)
    with store.session() as s:
        writes.create_run(s, env=ENV, name="nightly-20260105T0200Z")  # left "running"
    store.dispose()
    state.State(cfg.state_path).update("nightly", last_slot="2026-01-05T02:00:00+00:00", status="running")
    slots.run_pending(cfg, now=datetime(2026, 1, 5, 9, 30, tzinfo=UTC), log=lambda m: None)
    assert fake.calls[0][:3] == ["sweep", "--resume", "nightly-20260105T0200Z"]


def test_a_failed_slot_is_not_retried_every_tick(tmp_path: Path, fake: FakeSweep) -> None:
    fake.rc = 1
    cfg = write(tmp_path, NIGHTLY)
    now = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
    (r,) = slots.run_pending(cfg, now=now, log=lambda m: None)
    assert r.status == "failed" and slots.exit_code([r]) == 1
    assert slots.run_pending(cfg, now=now, log=lambda m: None) == []


def test_regression_writes_report_posts_webhook_and_sets_exit_code(tmp_path: Path, fake: FakeSweep,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    got: list[dict] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *a) -> None:  # noqa: ANN002
            pass

    srv = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        cfg = write(tmp_path, NIGHTLY + f'webhook = "http://127.0.0.1:{srv.server_port}/hook"\n')
        seen = []
        monkeypatch.setattr(slots, "compare",
                            lambda spec, base, run, log=None: (seen.append((base, run)), (True, "# worse\n"))[1])
        slots.run_pending(cfg, now=datetime(2026, 1, 4, 9, 0, tzinfo=UTC), log=lambda m: None)
        (r,) = slots.run_pending(cfg, now=datetime(2026, 1, 5, 9, 0, tzinfo=UTC), log=lambda m: None)
    finally:
        srv.shutdown()
    assert seen == [("nightly-20260104T0200Z", "nightly-20260105T0200Z")]  # baseline: the previous run
    assert (r.status, r.exit_code) == ("regressed", 3)
    assert Path(r.report).read_text() == "# worse\n" and Path(r.report).parent == tmp_path / "reports"
    assert got and got[0]["run"] == "nightly-20260105T0200Z" and got[0]["report"] == "# worse\n"


DIMENSIONS = """
[sweep.matrix]
schedule = "0 2 * * *"
primitive = "sin"
platforms = "cpu"
"""


@pytest.mark.parametrize("dimension, labels", [
    ('config = ["x64=off,on"]', ("x64=off", "x64=on")),
    ('jax = "0.10.2,0.9.2"', ("jax=0.9.2", "jax=0.10.2")),
])
def test_a_sweep_over_configurations_or_versions_is_one_slot_of_several_runs(
        tmp_path: Path, fake: FakeSweep, monkeypatch: pytest.MonkeyPatch, dimension: str, labels: tuple) -> None:
    cfg = write(tmp_path, DIMENSIONS + dimension + "\n")
    spec = cfg.sweeps["matrix"]
    assert spec.labels == labels
    args = spec.sweep_args("matrix-20260104T0200Z", resume=True)  # continues by itself: never --resume
    assert "--resume" not in args and args[args.index("--name") + 1] == "matrix-20260104T0200Z"
    seen: list[tuple[str, str]] = []
    worse = f"matrix-20260105T0200Z@{labels[1]}"
    monkeypatch.setattr(slots, "compare", lambda spec, base, run, log=None: (
        seen.append((base, run)), (run == worse, f"# {run}\n"))[1])
    (r1,) = slots.run_pending(cfg, now=datetime(2026, 1, 4, 9, 0, tzinfo=UTC), log=lambda m: None)
    (r2,) = slots.run_pending(cfg, now=datetime(2026, 1, 5, 9, 0, tzinfo=UTC), log=lambda m: None)
    assert r1.status == "finished" and (r2.status, r2.baseline) == ("regressed", "matrix-20260104T0200Z")
    # each configuration / version against the same one of the previous slot
    assert seen == [(f"matrix-20260104T0200Z@{lab}", f"matrix-20260105T0200Z@{lab}") for lab in labels]
    assert slots.run_pending(cfg, now=datetime(2026, 1, 5, 9, 0, tzinfo=UTC), log=lambda m: None) == []
    # a slot with one of its runs missing is run again (the sweep keeps what finished)
    store_url = f"sqlite:///{tmp_path / 'farm.db'}"
    from farm.store import open_store  # noqa: PLC0415

    store = open_store(store_url)
    with store.session() as s:
        s.delete(s.scalar(select(Run).where(Run.name == f"matrix-20260105T0200Z@{labels[0]}")))
    store.dispose()
    r3 = slots.run_slot(spec, cfg, datetime(2026, 1, 5, 2, 0, tzinfo=UTC), log=lambda m: None)
    assert r3.status != "skipped" and len(fake.calls) == 3


def test_compare_missing_is_skipped_with_a_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    msgs: list[str] = []
    cfg = write(tmp_path, NIGHTLY)
    assert slots.compare(cfg.sweeps["nightly"], "a", "b", msgs.append) == (None, "")
    assert "not available" in msgs[0]


# --------------------------------------------------------------------------- locks
def test_file_lock_keeps_a_second_copy_out(tmp_path: Path) -> None:
    cfg = write(tmp_path, NIGHTLY)
    spec = cfg.sweeps["nightly"]
    with state.sweep_lock(spec, tmp_path):
        with pytest.raises(state.AlreadyRunning):
            with state.sweep_lock(spec, tmp_path):
                pass
    with state.sweep_lock(spec, tmp_path):  # released
        pass


@pytest.mark.postgres
def test_postgres_advisory_lock_keeps_a_second_copy_out(tmp_path: Path) -> None:
    psycopg = pytest.importorskip("psycopg")
    try:
        psycopg.connect("host=127.0.0.1 user=postgres dbname=postgres", connect_timeout=3).close()
    except psycopg.OperationalError:
        pytest.skip("PostgreSQL is not running on 127.0.0.1:5432")
    body = NIGHTLY.replace("nightly", f"n{secrets.token_hex(4)}")
    cfg = write(tmp_path, body, db="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    spec = next(iter(cfg.sweeps.values()))
    with state.sweep_lock(spec, tmp_path) as what:
        assert what.startswith("advisory lock")
        with pytest.raises(state.AlreadyRunning):
            with state.sweep_lock(spec, tmp_path):
                pass
    with state.sweep_lock(spec, tmp_path):
        pass


# --------------------------------------------------------------------------- sweep --submit
def test_sweep_submit_rebuilds_the_same_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    from farm import cli

    sent = {}
    monkeypatch.setattr(jobs, "submit", lambda args, dashboard: sent.update(args=args, dash=dashboard) or 0)
    rc = cli.main(["sweep", "--submit", "--dashboard", "http://h:8265", "--db", "postgresql://u@db/farm",
                   "--primitive", "exp", "--run-on", "cpu", "--repeats", "1", "--no-crossexec", "--name", "r1"])
    assert rc == 0 and sent["dash"] == "http://h:8265"
    a = sent["args"]
    assert a[0] == "sweep" and "--submit" not in a and "--dashboard" not in a
    for pair in (["--primitive", "exp"], ["--repeats", "1"], ["--name", "r1"], ["--db", "postgresql://u@db/farm"]):
        assert a[a.index(pair[0]):a.index(pair[0]) + 2] == pair
    assert "--no-crossexec" in a


def test_sweep_submit_refuses_a_relative_sqlite_db(capsys: pytest.CaptureFixture[str]) -> None:
    from farm import cli

    assert cli.main(["sweep", "--submit", "--dashboard", "http://h:8265", "--db", "sqlite:///farm.db"]) == 2
    assert "--db the cluster can open" in capsys.readouterr().err


def test_commands_are_registered() -> None:
    from farm import cli

    p = cli.parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    assert "schedule" in sub.choices
