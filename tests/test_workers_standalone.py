"""The standalone worker writes each result as it finishes (an fsynced journal next to the
bundle): killed mid-run, it loses only the harness in flight; `farm import` reads the
journal, and the same command run again resumes from it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "PYTHONPATH": ROOT}
FARM = [sys.executable, "-m", "farm"]
pytestmark = pytest.mark.slow


def farm(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*FARM, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=ENV)


def outcome_lines(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        docs = [json.loads(line) for line in f.read().splitlines()[1:] if line.strip()]
    return [d for d in docs if "outcome" in d]


def test_killed_standalone_worker_keeps_finished_results_and_resumes(tmp_path) -> None:  # noqa: ANN001
    jobs, bundle = tmp_path / "jobs.json", tmp_path / "b.json.gz"
    journal = str(bundle) + ".journal.jsonl"
    assert farm("jobs", "--catalog", "planted", "--modules", "harnesses.planted", "--platforms", "cpu",
                "--timeout", "60", "--out", str(jobs)).returncode == 0
    # round-robin order: sin (ok), abort (crashed, after one retry), hang (60 s) ...: kill during the hang
    p = subprocess.Popen([*FARM, "worker", "--standalone", "--jobs", str(jobs), "--out", str(bundle)], cwd=ROOT,
                         env=ENV, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t0 = time.monotonic()
    try:
        while not (os.path.exists(journal) and len(outcome_lines(journal)) >= 2):
            assert p.poll() is None, p.stderr.read().decode()[-2000:]
            assert time.monotonic() - t0 < 240, "no results journaled"
            time.sleep(0.2)
        time.sleep(1.0)  # the third harness (the hang) is in flight
        os.killpg(p.pid, signal.SIGKILL)  # the worker and its child processes: a host lost
        p.wait(30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert not bundle.exists()
    kept = outcome_lines(journal)
    assert len(kept) == 2 and {d["outcome"]["name"] for d in kept} == {"planted_ok.sin_float32_4",
                                                                        "planted_abort.abort_float32_4"}

    # the journal imports as a partial run: everything that finished, nothing else
    db = f"sqlite:///{tmp_path / 'i.db'}"
    r = farm("import", journal, "--db", db, "--name", "partial")
    assert r.returncode == 0 and "imported 2 harness outcomes" in r.stdout, r.stderr[-2000:]
    r = farm("runs", "--db", db)
    assert r.returncode == 0 and "interrupted" in r.stdout, r.stdout

    # the same command again resumes: the two finished harnesses are not run again
    r = farm("worker", "--standalone", "--jobs", str(jobs), "--out", str(bundle))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "resuming from" in r.stderr and "2 harnesses already done" in r.stderr
    assert not os.path.exists(journal)  # the bundle holds everything now
    r = farm("import", str(bundle), "--db", db, "--name", "whole")
    assert r.returncode == 0 and "imported 5 harness outcomes" in r.stdout, r.stderr[-2000:]
    r = farm("show", "whole", "--db", db, "--format", "json")
    worst = {h["harness"]: {st["status"] for p in h["platforms"].values() for st in p.values()}
             for h in json.loads(r.stdout)["harnesses"]}
    assert len(worst) == 5 and "crashed" in worst["planted_abort.abort_float32_4"]
    assert "timeout" in worst["planted_hang.hang_float32_4"]
    # the imported results link to the device host's own environment (one, its worker processes)
    (group,) = json.loads(r.stdout)["worker_environments"]
    assert group["key"] and group["environment"]["devices"][0]["platform"] == "cpu"
    assert group["results"] == sum(len(p) for h in json.loads(r.stdout)["harnesses"] for p in h["platforms"].values())
    assert any(w.startswith("standalone:") for w in group["workers"])
