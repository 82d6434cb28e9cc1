"""The suite's time budget, as a pytest plugin (loaded by ``tests/conftest.py``).

Every test's time (setup + call + teardown, so a module fixture's cost lands on the test
that first asks for it) is written to ``--durations-report`` (one line a test, slowest
first) and the slowest are printed at the end of the run. A test over ``--budget-s``
(default 60 s, ``$FARM_TEST_BUDGET_S``) fails the run, unless it is marked
``@pytest.mark.slow(reason="...")``: a slow test has to say why it cannot be faster.

The budget is held against the test's seconds on an unshared host: its wall time divided
by how oversubscribed the host was while it ran (the 1-minute load average over the CPU
count, at its start and end; never below 1). ``./dev test`` runs three test processes and
Bazel's family tests on two cores: the same test took 35 s in a quiet run and 88 s in CI's,
and a wall-time budget failed a run for the host's load, not the test. The report shows both.
(A test that waits instead of working is flattered under load; a quiet run still shows it.)

Works the same in one process and under pytest-xdist: the workers send each phase's
report, with the test's slow reason and the load it ran under in its ``user_properties``,
and the controller adds them up.
"""
from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

_REASON = "slow_reason"
_LOAD = "host_load"
#: the load a test's setup began under, until its teardown adds the end's and reports the mean
_START_LOAD = pytest.StashKey[float]()
#: how many of the slowest tests the terminal summary shows
SHOWN = 15


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("farm budget")
    group.addoption("--budget-s", type=float, default=float(os.environ.get("FARM_TEST_BUDGET_S", 60)),
                    help="a test (setup + call + teardown) over this many seconds fails the run unless "
                         "marked slow(reason=...) (default 60, $FARM_TEST_BUDGET_S; 0: no limit)")
    group.addoption("--durations-report", default=None, metavar="PATH",
                    help="write every test's seconds here, slowest first")
    group.addoption("--budget-load", type=float, default=None, metavar="LOAD",
                    help="take the host's load as this instead of measuring it (the budget's own tests)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow(reason): over the per-test time budget, and why it cannot be faster")
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist) keeps the books
        config.pluginmanager.register(_Books(config), "farm-budget-books")


def slow_reason(item: pytest.Item) -> str | None:
    """The reason a test is allowed over the budget, or None (no marker, or one without a reason)."""
    for marker in item.iter_markers("slow"):  # the test's own first, then its class's and module's
        reason = marker.kwargs.get("reason") or (marker.args[0] if marker.args else None)
        if reason and str(reason).strip():
            return str(reason).strip()
    return None


def unshared(seconds: float, load: float, cpus: int) -> float:
    """A test's seconds on an unshared host: ``seconds`` of wall time under ``load`` runnable
    processes on ``cpus`` CPUs took that much longer than alone, where the load exceeded them."""
    return seconds / max(1.0, load / max(cpus, 1))


def _load(config: pytest.Config) -> float:
    fixed = config.getoption("budget_load")
    return float(fixed) if fixed is not None else os.getloadavg()[0]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_START_LOAD] = _load(item.config)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    start = item.stash.get(_START_LOAD, None)
    end = _load(item.config)
    item.user_properties.append((_LOAD, end if start is None else (start + end) / 2))



def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        reason = slow_reason(item)
        if reason:
            item.user_properties.append((_REASON, reason))


class _Books:
    """Adds up each test's phases; at the end, reports and enforces the budget."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.seconds: dict[str, float] = defaultdict(float)
        self.reasons: dict[str, str] = {}
        self.loads: dict[str, float] = {}
        self.cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        self.ranked: list[tuple[str, float]] = []  # slowest first, made at the session's end
        self.over: list[tuple[str, float]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] += report.duration
        for key, value in report.user_properties:
            if key == _REASON:
                self.reasons[report.nodeid] = value
            elif key == _LOAD:
                self.loads[report.nodeid] = float(value)

    def unshared(self, nodeid: str) -> float:
        return unshared(self.seconds[nodeid], self.loads.get(nodeid, 0.0), self.cpus)

    def _line(self, n: str, s: float) -> str:
        load = self.loads.get(n)
        return f"{s:8.2f} {n}{'  [slow: ' + self.reasons[n] + ']' if n in self.reasons else ''}" + (
            f"  (load {load:.1f}: {self.unshared(n):.1f} s unshared)" if load is not None else "")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: Any) -> None:
        self.ranked = ranked = sorted(self.seconds.items(), key=lambda kv: -kv[1])
        path = self.config.getoption("durations_report")
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text("".join(self._line(n, s) + "\n" for n, s in ranked))
        budget = self.config.getoption("budget_s")
        self.over = [(n, s) for n, s in ranked if budget and self.unshared(n) > budget and n not in self.reasons]
        if self.over and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        tr = terminalreporter
        ranked = self.ranked[:SHOWN]  # the terminal reporter summarizes after every sessionfinish has run
        if not ranked:
            return
        tr.write_sep("=", f"the {len(ranked)} slowest tests (setup + call + teardown; seconds on an unshared host)")
        for n, s in ranked:
            tr.write_line(f"{s:8.2f}s ({self.unshared(n):6.1f}s) {n}" + (" [slow]" if n in self.reasons else ""))
        if self.over:
            budget = self.config.getoption("budget_s")
            tr.write_sep("=", f"over the {budget:g} s budget on an unshared host, not marked slow(reason=...)", red=True)
            for n, s in self.over:
                tr.write_line(f"{s:8.2f}s ({self.unshared(n):6.1f}s) {n}", red=True)
