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
    (["sweep", "--platforms", "cpu,metal", "--primitive", "sin"],
     "'metal' is neither a built-in platform (cpu, cuda, rocm, tpu) nor a PJRT plugin platform"),
    (["show", "--db", "mysql+nodriver://x/y"], "database URL"),
    (["show", "--db", "sqlite:////nonexistent/dir/x.db"], "does not exist"),
    (["sweep", "--primitive", "sin", "--dtype", "float32", "--address", "127.0.0.1:1", "--db",
      "sqlite:///{tmp}/farm.db"], "cannot join Ray cluster"),
])
def test_user_mistakes_are_one_line(args: list[str], needle: str, tmp_path) -> None:  # noqa: ANN001
    r = farm(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert r.returncode == 2, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("farm: error:")]
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.slow(reason="the first test of its process to ask for the session's Ray cluster, which starts here")
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


# --------------------------------------------------------------------------- validation at the edge
def error_line(capsys) -> str:  # noqa: ANN001
    err = capsys.readouterr().err
    lines = [l for l in err.splitlines() if l.startswith("farm: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("cmd", [["runs"], ["show"], ["show", "latest", "--format", "json"], ["census"],
                                 ["crosshost"], ["export", "latest"], ["compare", "previous", "latest"]])
def test_read_commands_refuse_a_missing_database(cmd: list[str], tmp_path, capsys) -> None:  # noqa: ANN001
    db = tmp_path / "typo.db"
    assert main([*cmd, "--db", f"sqlite:///{db}"]) == 2
    assert f"no database at 'sqlite:///{db}'" in error_line(capsys)
    assert not db.exists()


def test_read_commands_refuse_a_missing_database_from_env(tmp_path, capsys, monkeypatch) -> None:  # noqa: ANN001
    db = tmp_path / "env.db"
    monkeypatch.setenv("FARM_DB", f"sqlite:///{db}")
    assert main(["runs"]) == 2
    assert "no database at" in error_line(capsys) and not db.exists()


def test_db_upgrade_still_creates_the_database(tmp_path, capsys) -> None:  # noqa: ANN001
    db = tmp_path / "new.db"
    assert main(["db", "upgrade", "--db", f"sqlite:///{db}"]) == 0 and db.exists()
    assert main(["runs", "--db", f"sqlite:///{db}"]) == 0


def test_show_refuses_an_unknown_status(tmp_path, capsys) -> None:  # noqa: ANN001
    db = f"sqlite:///{tmp_path / 'f.db'}"
    assert main(["db", "upgrade", "--db", db]) == 0
    capsys.readouterr()
    assert main(["show", "--status", "nonsense", "--db", db]) == 2
    line = error_line(capsys)
    assert "unknown status 'nonsense'" in line and "expected_fail" in line and "ok" in line
    assert main(["show", "--status", "fial", "--db", db]) == 2
    assert "did you mean fail" in error_line(capsys)


@pytest.mark.parametrize("args,needle", [
    (["sweep", "--workers", "0"], "--workers must be an integer >= 1, not 0"),
    (["sweep", "--workers", "two"], "--workers must be an integer >= 1, not 'two'"),
    (["sweep", "--timeout", "0"], "--timeout must be a number > 0, not 0"),
    (["sweep", "--repeats", "-1"], "--repeats must be an integer >= 1"),
    (["sweep", "--batch", "0"], "--batch must be an integer >= 1"),
    (["catalog", "--limit", "0"], "--limit must be an integer >= 1"),
    (["compare", "a", "b", "--threshold", "-3"], "--threshold must be a number >= 0, not -3"),
    (["compare", "a", "b", "--threshold", "nan"], "--threshold must be a number >= 0, not 'nan'"),
    (["compare", "a", "b", "--history", "-1"], "--history must be an integer >= 0"),
    (["runs", "--limit", "0"], "--limit must be an integer >= 1"),
    (["serve", "--port", "70000"], "--port must be an integer >= 1 and <= 65535, not 70000"),
    (["serve", "--threads", "0"], "--threads must be an integer >= 1"),
    (["worker", "--workers", "0"], "--workers must be an integer >= 1"),
    (["worker", "--deadline", "-5"], "--deadline must be a number > 0"),
    (["jobs", "--out", "x.json", "--per-bundle", "0"], "--per-bundle must be an integer >= 1"),
    (["bench", "--make-db", "a", "b", "--runs", "0"], "--runs must be an integer >= 1"),
])
def test_nonsensical_numbers_are_refused(args: list[str], needle: str, capsys) -> None:  # noqa: ANN001
    assert main(args) == 2
    assert needle in error_line(capsys)


@pytest.mark.parametrize("args,needle", [
    (["jobs", "--out", ""], "--out must name a file, not ''"),  # was a FileNotFoundError traceback
    (["jobs", "--out", "/no/such/dir/jobs.json"], "no directory '/no/such/dir' to write it in"),
    (["worker", "--out", "."], "--out '.' is a directory"),
    (["coverage", "--out", " "], "--out must name a file"),
    (["bench", "--out", "/no/such/dir/t.md"], "no directory"),
    (["export", "latest", "-o", ""], "--output must name a file"),
])
def test_an_output_file_that_cannot_be_written_is_refused_before_any_work(args: list[str], needle: str,
                                                                          capsys) -> None:  # noqa: ANN001
    assert main(args) == 2
    assert needle in error_line(capsys)


def test_an_output_file_in_an_existing_directory_is_written(tmp_path, capsys) -> None:  # noqa: ANN001
    out = tmp_path / "jobs.json"
    assert main(["jobs", "--primitive", "sin", "--dtype", "float32", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["names"]


def test_version(capsys) -> None:  # noqa: ANN001
    from importlib import metadata

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"farm {metadata.version('farm')}"


def test_help_shows_every_default() -> None:
    sub = next(a for a in parser()._actions if a.dest == "command")
    checked = 0
    for name, p in sub.choices.items():
        for a in p._actions:
            if a.option_strings and a.default not in (None, False, "==SUPPRESS==") and a.help != "==SUPPRESS==":
                assert "default" in (a.help or ""), (name, a.option_strings)
                checked += 1
    assert checked > 20
    text = sub.choices["sweep"].format_help()
    assert "(default: 3)" in text and "(default: 120.0)" in text
    assert "(default: about 1 s of work each)" in " ".join(text.split())  # --batch: said in words, not "None"
    assert "(default 0.2 = 20%)" in " ".join(sub.choices["compare"].format_help().split())  # named once, not twice


def test_serve_uses_waitress_and_flask_only_with_debug(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    import flask
    import waitress

    db = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["db", "upgrade", "--db", db]) == 0
    calls: list[tuple[str, dict]] = []
    monkeypatch.setattr(waitress, "serve", lambda app, **kw: calls.append(("waitress", kw)))
    monkeypatch.setattr(flask.Flask, "run", lambda self, **kw: calls.append(("flask", kw)))
    assert main(["serve", "--db", db, "--port", "8123", "--threads", "3"]) == 0
    assert calls == [("waitress", {"host": "127.0.0.1", "port": 8123, "threads": 3, "ident": "farm",
                                   "_quiet": True, "connection_limit": 1000, "channel_timeout": 30,
                                   "cleanup_interval": 10})]
    calls.clear()
    assert main(["serve", "--db", db, "--debug"]) == 0
    assert calls[0][0] == "flask" and calls[0][1]["debug"] is True
    assert main(["serve", "--db", f"sqlite:///{tmp_path / 'typo.db'}"]) == 2  # read-only: no new database


def test_sweep_creates_its_database_and_names_it_in_the_hint(tmp_path, ray_local, capsys,  # noqa: ANN001
                                                              monkeypatch) -> None:
    db = f"sqlite:///{tmp_path / 'from-env.db'}"
    monkeypatch.setenv("FARM_DB", db)
    assert main(["sweep", "--primitive", "exp", "--dtype", "float32", "--platforms", "cpu", "--no-crossexec",
                 "--repeats", "1"]) == 0
    err = capsys.readouterr().err
    assert f"farm: created a new database {db}" in err
    assert f"farm serve --db {db} " in err and "sqlite:///farm.db" not in err


def test_name_names_a_run_everywhere(capsys) -> None:  # noqa: ANN001
    for cmd in (["catalog"], ["jobs", "--out", "x.json"]):
        assert main([*cmd, "--name", "sin"]) == 2
        line = error_line(capsys)
        assert "--name names a run" in line and "with --match" in line
    assert main(["catalog", "--match", "sin_float32*", "--count", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["harnesses"] >= 1
    sweep = next(a for a in parser()._actions if a.dest == "command").choices["sweep"]
    assert sweep.parse_args(["--name", "nightly", "--match", "sin*"]).run_name == "nightly"


def test_the_dashboard_hint_names_this_farm(monkeypatch, tmp_path) -> None:  # noqa: ANN001
    """The end-of-sweep hint calls the same farm: .venv/bin/farm from the checkout, its full
    path from elsewhere (a pip-installed farm is not under .venv/)."""
    import os
    import sys

    from farm.commands.sweep import _farm_command

    exe = os.path.join(os.path.dirname(sys.executable), "farm")
    monkeypatch.chdir(os.path.dirname(os.path.dirname(os.path.dirname(exe))))  # the checkout holding .venv
    assert _farm_command() == os.path.join(".venv", "bin", "farm")
    monkeypatch.chdir(tmp_path)  # outside the checkout: a path that works from anywhere
    assert _farm_command() == exe and os.path.isabs(exe)
