"""The suite's time budget (tests/helpers/budget.py): a test over it fails the run unless it
says why it is slow, and every test's time is reported."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])

_TESTS = '''
import time
import pytest

def test_quick():
    pass

def test_sleeps():
    time.sleep(0.6)

@pytest.mark.slow(reason="waits on purpose")
def test_sleeps_with_a_reason():
    time.sleep(0.6)

@pytest.mark.slow
def test_sleeps_marked_without_a_reason():
    time.sleep(0.6)

@pytest.mark.slow(reason="a reason beside a bare marker still counts")
@pytest.mark.slow
def test_sleeps_with_a_reason_and_a_bare_marker():
    time.sleep(0.6)
'''


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_timed.py").write_text(_TESTS)
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop("FARM_TEST_BUDGET_S", None)
    if not any(a.startswith("--budget-load") for a in args):
        args = ("--budget-load", "0", *args)  # an idle host, whatever this one's load
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.helpers.budget", "-p", "no:cacheprovider",
                           "-q", str(tmp_path / "test_timed.py"), *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_a_test_over_the_budget_fails_the_run_unless_it_says_why_it_is_slow(tmp_path: Path) -> None:
    report = tmp_path / "durations.txt"
    r = _pytest(tmp_path, "--budget-s", "0.3", "--durations-report", str(report))
    assert r.returncode == 1, r.stdout
    over = {line.rsplit("::", 1)[1] for line in r.stdout.split("over the 0.3 s budget", 1)[1].splitlines()
            if "::" in line}
    assert over == {"test_sleeps", "test_sleeps_marked_without_a_reason"}
    lines = report.read_text().splitlines()
    assert len(lines) == 5 and "test_quick" in lines[-1]  # every test, slowest first
    assert [float(line.split()[0]) >= 0.6 for line in lines] == [True, True, True, True, False]
    assert any("test_sleeps_with_a_reason  [slow: waits on purpose]" in line for line in lines)


def test_within_the_budget_the_run_passes_and_shows_the_slowest(tmp_path: Path) -> None:
    r = _pytest(tmp_path, "--budget-s", "30")
    assert r.returncode == 0, r.stdout
    assert "slowest tests" in r.stdout and "over the" not in r.stdout


def test_the_budget_holds_under_xdist(tmp_path: Path) -> None:
    r = _pytest(tmp_path, "--budget-s", "0.3", "-n", "2")
    assert r.returncode == 1, r.stdout
    assert "test_sleeps_marked_without_a_reason" in r.stdout.split("over the 0.3 s budget", 1)[1]


def test_a_test_slowed_by_a_loaded_host_is_held_to_its_unshared_seconds(tmp_path: Path) -> None:
    """Under a load of four runnable processes per CPU, a 0.6 s test counts as 0.15 s: within
    a 0.3 s budget, where on an idle host it is over; the report gives the load and both times."""
    from tests.helpers.budget import unshared

    assert unshared(90.0, 6.0, 2) == 30.0 and unshared(90.0, 1.0, 2) == 90.0 and unshared(5.0, 0.0, 1) == 5.0
    cpus = len(os.sched_getaffinity(0))
    report = tmp_path / "durations.txt"
    r = _pytest(tmp_path, "--budget-s", "0.3", "--budget-load", str(4.0 * cpus), "--durations-report", str(report))
    assert r.returncode == 0 and "over the" not in r.stdout, r.stdout
    line = next(x for x in report.read_text().splitlines() if "::test_sleeps  (load" in x)
    assert f"(load {4.0 * cpus:.1f}: " in line and float(line.split()[0]) >= 0.6, line
