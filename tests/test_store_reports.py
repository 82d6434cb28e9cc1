"""Stored comparison reports (farm.comparison.comparison over farm.store.reports): reused while current, recomputed when
stale, never stored for a run that is not finished; the dashboard, ``farm compare`` and
the end-of-sweep step share them. Small hand-written runs, no Ray."""
from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event, func, select, update

from farm.results import Outcome
from farm.results import Record
from farm.reports import comparison
from farm.store import open_store, queries, reports, writes
from farm.store.models import ReportRow, ResultRow, Run, StoredResultRow

ENV = {"jax_version": "0.10.2", "jaxlib_version": "0.10.2", "python": "3.11.7", "host": "test",
       "device_kinds": ["cpu"], "xla_flags": "", "farm_commit": "abc"}


def harness(i: int) -> dict[str, Any]:
    return {"fingerprint": f"fp{i:04d}", "name": f"h{i}", "catalog": "farm", "family": "fam", "primitive": "sin",
            "group": "sin", "dtype": "float32", "shapes": [[3]], "params": {}}


def outcome(i: int, status: str) -> Outcome:
    return Outcome(f"fp{i:04d}", f"h{i}", [
        Record("lower", "cpu", "ok", 0.01),
        Record("execute", "cpu", status, 0.002, metrics={"execute_s": 0.001}),
        Record("compare", "cpu", status, 0.0, metrics={"max_abs_err": 0.0 if status == "ok" else 1.0,
                                                       "mismatches": 0.0 if status == "ok" else 3.0},
               facts={"against": "numpy", "rtol": 1e-6, "atol": 1e-6})], [])


def add_run(store: Any, name: str, statuses: list[str], *, status: str = "finished", catalog: str = "farm") -> int:
    with store.session() as s:
        run = writes.create_run(s, env=ENV, name=name, catalog=catalog, platforms=["cpu"], run_on=["cpu"],
                                total=len(statuses))
        hids = writes.harness_ids(s, [harness(i) for i in range(len(statuses))])
        writes.Writer(s, run, hids).write([outcome(i, st) for i, st in enumerate(statuses)])
        if status != "running":
            writes.finish_run(s, run, status)
        return run.id


@pytest.fixture
def runs(sqlite_url: str) -> Iterator[dict[str, Any]]:
    """Two finished runs; h1 regresses from ok to fail in the second."""
    store = open_store(sqlite_url)
    base = add_run(store, "r1", ["ok", "ok", "ok"])
    head = add_run(store, "r2", ["ok", "fail", "ok"])
    yield {"url": sqlite_url, "store": store, "base": base, "head": head}
    store.dispose()


@pytest.fixture
def analysis_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the calls of ``farm.analysis.report`` made through the stored-report path."""
    calls: list[int] = []
    original = comparison.analysis.report

    @functools.wraps(original)
    def counted(*a: Any, **k: Any) -> dict[str, Any]:
        calls.append(1)
        return original(*a, **k)

    monkeypatch.setattr(comparison.analysis, "report", counted)
    return calls


def stored_rows(store: Any) -> int:
    with store.session() as s:
        return s.scalar(select(func.count()).select_from(ReportRow)) or 0


def test_report_is_stored_once_and_reused(runs: dict[str, Any], analysis_calls: list[int]) -> None:
    store = runs["store"]
    first = comparison.comparison(store, runs["base"], runs["head"])
    assert (first.from_store, first.stored, len(analysis_calls)) == (False, True, 1)
    assert first.report["regressions"]["status"] == ["h1"]
    again = comparison.comparison(store, "previous", "latest")
    assert (again.from_store, len(analysis_calls)) == (True, 1)
    assert again.report == json.loads(json.dumps(first.report))  # the same answer, cold or warm
    assert stored_rows(store) == 1


def test_settings_are_part_of_the_key(runs: dict[str, Any], analysis_calls: list[int]) -> None:
    store = runs["store"]
    comparison.comparison(store, runs["base"], runs["head"])
    other = comparison.comparison(store, runs["base"], runs["head"], comparison.Settings(threshold=0.5))
    assert (other.from_store, len(analysis_calls), stored_rows(store)) == (False, 2, 2)
    assert other.report["settings"]["threshold"] == 0.5
    assert comparison.Settings().key() != comparison.Settings(history=20).key()


def test_dashboard_second_request_reads_the_stored_report(runs: dict[str, Any], analysis_calls: list[int]) -> None:
    """A second dashboard process (no page cache of its own yet) reads the stored report."""
    from dashboards.app import create_app

    first, second = create_app(runs["url"]), create_app(runs["url"])
    seen: list[str] = []
    listener = lambda *a: seen.append(a[2])  # noqa: E731
    engines = [app.config["STORE"].engine for app in (first, second)]
    for engine in engines:
        event.listen(engine, "before_cursor_execute", listener)
    try:
        cold = first.test_client().get("/compare.json").get_json()
        cold_statements, seen[:] = list(seen), []
        c = second.test_client()
        warm = c.get("/compare.json").get_json()
        assert len(analysis_calls) == 1
        assert warm == cold
        assert [f["harness"] for f in warm["report"]["flips"] if f["kind"] == "regression"] == ["h1", "h1"]
        # no result rows loaded: only aggregates (the page cache's data state, counts) touch results
        assert not any("FROM results" in q for q in seen if "count(" not in q and "max(" not in q)
        assert len(seen) < len(cold_statements)
        assert c.get("/compare").status_code == 200
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", listener)
        for app in (first, second):
            app.config["STORE"].dispose()


@pytest.mark.parametrize("status", ["running", "interrupted"])
def test_a_run_that_is_not_finished_is_never_stored(runs: dict[str, Any], analysis_calls: list[int],
                                                    status: str) -> None:
    store = runs["store"]
    late = add_run(store, "r3", ["fail", "fail", "ok"], status=status)
    for _ in range(2):
        c = comparison.comparison(store, runs["head"], late)
        assert (c.from_store, c.stored) == (False, False)
        assert c.report["candidate"]["status"] == status
    assert len(analysis_calls) == 2 and stored_rows(store) == 0
    with store.session() as s, pytest.raises(ValueError, match="only reports of finished runs are stored"):
        reports.put(s, c.base, c.head, c.report, comparison.DASHBOARD.key(), comparison.DASHBOARD.as_dict())


def test_a_report_of_an_older_format_is_recomputed(runs: dict[str, Any], analysis_calls: list[int],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    store = runs["store"]
    comparison.comparison(store, runs["base"], runs["head"])
    # the analysis moves to the next format: the stored report is stale
    computed, new = comparison.analysis.report, comparison.analysis.FORMAT_VERSION + 1
    monkeypatch.setattr(comparison.analysis, "FORMAT_VERSION", new)
    monkeypatch.setattr(comparison.analysis, "report",
                        functools.wraps(computed)(lambda *a, **k: computed(*a, **k) | {"format_version": new}))
    c = comparison.comparison(store, runs["base"], runs["head"])
    assert (c.from_store, c.stored, c.report["format_version"], len(analysis_calls)) == (False, True, new, 2)
    assert comparison.comparison(store, runs["base"], runs["head"]).from_store
    with store.session() as s:
        assert s.scalars(select(ReportRow.format_version)).all() == [new]  # replaced, not added


def test_a_stored_json_of_another_format_is_recomputed(runs: dict[str, Any], analysis_calls: list[int]) -> None:
    store = runs["store"]
    rep = comparison.comparison(store, runs["base"], runs["head"]).report
    text = json.dumps(rep | {"format_version": 0})
    with store.session() as s:
        s.execute(update(ReportRow).values(content=text, sha256=hashlib.sha256(text.encode()).hexdigest()))
    assert not comparison.comparison(store, runs["base"], runs["head"]).from_store
    assert len(analysis_calls) == 2


def test_altered_text_or_changed_runs_are_recomputed(runs: dict[str, Any], analysis_calls: list[int]) -> None:
    store = runs["store"]
    comparison.comparison(store, runs["base"], runs["head"])
    with store.session() as s:  # the text no longer matches its hash
        s.execute(update(ReportRow).values(content=ReportRow.content + " "))
    assert not comparison.comparison(store, runs["base"], runs["head"]).from_store
    with store.session() as s:  # a result of the head run changed after the report
        s.execute(update(StoredResultRow).where(StoredResultRow.run_id == runs["head"], StoredResultRow.status == "fail")
                  .values(status="ok"))
    c = comparison.comparison(store, runs["base"], runs["head"])
    assert not c.from_store and c.report["regressions"]["status"] == []
    with store.session() as s:  # the head run was resumed and finished again
        r = s.get(Run, runs["head"])
        r.status = "running"
        writes.finish_run(s, r, "finished")
    assert not comparison.comparison(store, runs["base"], runs["head"]).from_store
    assert comparison.comparison(store, runs["base"], runs["head"]).from_store
    assert len(analysis_calls) == 4


def test_put_replaces_and_get_reads_on_both_backends(db_url: str) -> None:
    store = open_store(db_url)
    try:
        a, b = add_run(store, "r1", ["ok", "ok"]), add_run(store, "r2", ["ok", "error"])
        with store.session() as s:
            base, head = queries.run_dict(s, s.get(Run, a)), queries.run_dict(s, s.get(Run, b))
        version = comparison.analysis.FORMAT_VERSION
        rep = {"format_version": version, "findings": [], "ratio": float("inf")}
        key, settings = comparison.DASHBOARD.key(), comparison.DASHBOARD.as_dict()
        for note in ("first", "second"):
            with store.session() as s:
                reports.put(s, base, head, rep | {"note": note}, key, settings, seconds=0.5)
        with store.session() as s:
            assert reports.get(s, base, head, key, version)["note"] == "second"
            assert reports.get(s, base, head, comparison.Settings(history=3).key(), version) is None
            assert reports.get(s, head, base, key, version) is None
            assert s.scalar(select(func.count()).select_from(ReportRow)) == 1
    finally:
        store.dispose()


def test_precompute_stores_the_report_against_the_previous_comparable_run(
        runs: dict[str, Any], analysis_calls: list[int]) -> None:
    store = runs["store"]
    add_run(store, "other-catalog", ["ok"], catalog="upstream")
    late = add_run(store, "r4", ["ok", "fail", "fail"])
    lines: list[str] = []
    c = comparison.precompute(store, late, lines.append)
    assert c is not None and c.stored and (c.base["id"], c.head["id"]) == (runs["head"], late)
    assert len(lines) == 1 and "stored" in lines[0]
    assert comparison.comparison(store, runs["head"], late).from_store
    assert len(analysis_calls) == 1


def test_precompute_skips_unfinished_runs_and_never_raises(runs: dict[str, Any]) -> None:
    store = runs["store"]
    lines: list[str] = []
    assert comparison.precompute(store, add_run(store, "r3", ["ok"] * 3, status="running"), lines.append) is None
    assert comparison.precompute(store, runs["base"], lines.append) is None  # nothing before it
    assert lines == [] and stored_rows(store) == 0

    class Broken:
        def session(self) -> Any:
            raise RuntimeError("database gone")

    assert comparison.precompute(Broken(), runs["head"], lines.append) is None
    assert len(lines) == 1 and "RuntimeError: database gone" in lines[0]


def test_cli_compare_uses_the_stored_report(runs: dict[str, Any], analysis_calls: list[int],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from farm.cli import main

    args = ["compare", str(runs["base"]), str(runs["head"]), "--db", runs["url"], "--format", "json"]
    assert main(args) == 1 and main(args) == 1  # a status regression either way
    out = capsys.readouterr().out
    assert len(analysis_calls) == 1 and '"h1"' in out
    assert main(args + ["--recompute"]) == 1 and len(analysis_calls) == 2


def test_comparison_rows_carry_what_the_analysis_reads(runs: dict[str, Any]) -> None:
    from farm import analysis

    with runs["store"].session() as s:
        full = {r["id"]: (r, queries.results(s, r["id"]))
                for r in (queries.run_dict(s, s.get(Run, runs["base"])), queries.run_dict(s, s.get(Run, runs["head"])))}
        slim = {i: queries.comparison_rows(s, i) for i in full}
    (b, brows), (h, hrows) = full.values()
    assert analysis.report(b, brows, h, hrows) == analysis.report(b, slim[b["id"]], h, slim[h["id"]])
    assert sorted(slim[h["id"]][0]) == sorted(["harness", "fingerprint", "primitive", "dtype", "platform", "stage",
                                               "status", "seconds", "error_type", "error", "metrics", "facts"])
