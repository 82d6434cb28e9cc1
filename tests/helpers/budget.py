"""The suite's time budget, as a pytest plugin (loaded by ``tests/conftest.py``).

Every test's time (setup + call + teardown, so a module fixture's cost lands on the test
that first asks for it) is written to ``--durations-report`` (one line a test, slowest
first) and the slowest are printed at the end of the run. A test over ``--budget-s``
(default 60 s, ``$FARM_TEST_BUDGET_S``) fails the run, unless it is marked
``@pytest.mark.slow(reason="...")``: a slow test has to say why it cannot be faster.

Works the same in one process and under pytest-xdist: the workers send each phase's
report, with the test's slow reason in its ``user_properties``, and the controller adds
them up.
"""
from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

_REASON = "slow_reason"
#: how many of the slowest tests the terminal summary shows
SHOWN = 15


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("farm budget")
    group.addoption("--budget-s", type=float, default=float(os.environ.get("FARM_TEST_BUDGET_S", 60)),
                    help="a test (setup + call + teardown) over this many seconds fails the run unless "
                         "marked slow(reason=...) (default 60, $FARM_TEST_BUDGET_S; 0: no limit)")
    group.addoption("--durations-report", default=None, metavar="PATH",
                    help="write every test's seconds here, slowest first")


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
        self.ranked: list[tuple[str, float]] = []  # slowest first, made at the session's end
        self.over: list[tuple[str, float]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] += report.duration
        for key, value in report.user_properties:
            if key == _REASON:
                self.reasons[report.nodeid] = value

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: Any) -> None:
        self.ranked = ranked = sorted(self.seconds.items(), key=lambda kv: -kv[1])
        path = self.config.getoption("durations_report")
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text("".join(f"{s:8.2f} {n}{'  [slow: ' + self.reasons[n] + ']' if n in self.reasons else ''}\n"
                                          for n, s in ranked))
        budget = self.config.getoption("budget_s")
        self.over = [(n, s) for n, s in ranked if budget and s > budget and n not in self.reasons]
        if self.over and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        tr = terminalreporter
        ranked = self.ranked[:SHOWN]  # the terminal reporter summarizes after every sessionfinish has run
        if not ranked:
            return
        tr.write_sep("=", f"the {len(ranked)} slowest tests (setup + call + teardown)")
        for n, s in ranked:
            tr.write_line(f"{s:8.2f}s {n}" + (" [slow]" if n in self.reasons else ""))
        if self.over:
            budget = self.config.getoption("budget_s")
            tr.write_sep("=", f"over the {budget:g} s budget, not marked slow(reason=...)", red=True)
            for n, s in self.over:
                tr.write_line(f"{s:8.2f}s {n}", red=True)
