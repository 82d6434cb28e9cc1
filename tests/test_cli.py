"""The farm command: help everywhere, user mistakes end in one line and exit 2."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from farm.cli import command_modules, main, parser

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def farm(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "farm", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": ROOT})


def test_every_subcommand_has_help(capsys) -> None:  # noqa: ANN001
    sub = next(a for a in parser()._actions if a.dest == "command")
    assert {"sweep", "show", "runs", "catalog", "serve", "export", "import", "worker", "db"} <= set(sub.choices)
    for name, p in sub.choices.items():
        assert p.format_help().strip(), name
    assert command_modules()[0] == "farm.commands.sweep"


@pytest.mark.parametrize("args,needle", [
    (["catalog", "--dtype", "float33"], "unknown dtype 'float33'; did you mean float32"),
    (["catalog", "--primitive", "sine"], "unknown primitive 'sine'; did you mean sin"),
    (["sweep", "--platforms", "cpu,metal", "--primitive", "sin"], "unknown platform 'metal'"),
    (["show", "--db", "mysql+nodriver://x/y"], "database URL"),
    (["show", "--db", "sqlite:////nonexistent/dir/x.db"], "does not exist"),
    (["sweep", "--primitive", "sin", "--dtype", "float32", "--address", "127.0.0.1:1", "--db",
      "sqlite:////tmp/farm-cli-test.db"], "cannot join Ray cluster"),
])
def test_user_mistakes_are_one_line(args: list[str], needle: str) -> None:
    r = farm(*args)
    assert r.returncode == 2, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("farm: error:")]
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_show_json_has_status_on_every_stage(tmp_path, ray_local, capsys) -> None:  # noqa: ANN001
    db = f"sqlite:///{tmp_path / 'f.db'}"
    assert main(["sweep", "--db", db, "--primitive", "exp", "--dtype", "float32", "--format", "json"]) == 0
    capsys.readouterr()
    assert main(["show", "latest", "--db", db, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    stages = [st for h in data["harnesses"] for p in h["platforms"].values() for st in p.values()]
    assert stages and all(st["status"] == "ok" for st in stages)
    assert main(["show", "nope", "--db", db]) == 2
    assert main(["export", "latest", "--db", db, "--format", "csv", "-o", str(tmp_path / "x.csv")]) == 0
    assert (tmp_path / "x.csv").read_text().startswith("run,harness,fingerprint")


def test_standalone_worker_bundle_imports(tmp_path) -> None:  # noqa: ANN001
    jobs, bundle, db = tmp_path / "jobs.json", tmp_path / "b.json.gz", f"sqlite:///{tmp_path / 'i.db'}"
    assert farm("jobs", "--catalog", "planted", "--modules", "harnesses.planted", "--platforms", "cpu",
                "--timeout", "8", "--out", str(jobs)).returncode == 0
    r = farm("worker", "--standalone", "--jobs", str(jobs), "--out", str(bundle), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    r = farm("import", str(bundle), "--db", db)
    assert r.returncode == 0 and "imported 5 harness outcomes" in r.stdout, r.stderr
    r = farm("show", "latest", "--db", db, "--format", "json")
    worst = {h["harness"]: {st["status"] for p in h["platforms"].values() for st in p.values()}
             for h in json.loads(r.stdout)["harnesses"]}
    assert "crashed" in worst["planted_abort.abort_float32_4"]
    assert "timeout" in worst["planted_hang.hang_float32_4"]
    assert worst["planted_ok.sin_float32_4"] == {"ok"}
