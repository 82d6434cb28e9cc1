"""Delta runs: a run identical to an earlier one stores (almost) nothing, reads exactly like a
fully stored run through every reader, and any change in any field is stored."""
from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest
from sqlalchemy import func, select

from farm.analysis.workers import group_results
from farm.store import deltas, open_store, queries, writes
from farm.store.models import OutcomeRow, ResultRow, Run, StoredOutcomeRow

from tests.helpers.deltas import (  # noqa: F401
    ENV, OTHER_ENV, N, PRIMS, harness_desc, outcome, write_run, stored, base_of, effective, CHANGED, CHANGED_FP, build, mutate_record, RECORD_CHANGES, _outcomes_with,
)


def test_an_unchanged_run_stores_nothing_and_names_its_base(sqlite_url: str) -> None:
    ids = build(sqlite_url, delta=True)
    store = open_store(sqlite_url)
    assert base_of(store, ids["base"]) is None and stored(store, ids["base"]) == (N, N * 6)
    assert base_of(store, ids["same"]) == ids["base"] and stored(store, ids["same"]) == (0, 0)
    # one harness of 40 changed: stored (6 rows), the rest inherited
    assert base_of(store, ids["changed"]) == ids["base"] and stored(store, ids["changed"]) == (1, 6)
    assert base_of(store, ids["again"]) == ids["base"] and stored(store, ids["again"]) == (1, 6)
    with store.session() as s:
        run = s.get(Run, ids["same"])
        assert run.stats["delta"] == {"base": ids["base"], "harnesses": N, "stored": 0}
        assert s.scalar(select(func.count()).select_from(ResultRow).where(ResultRow.run_id == ids["same"])) == N * 6
        assert s.scalar(select(func.count()).select_from(OutcomeRow).where(OutcomeRow.run_id == ids["same"])) == N
    rows = effective(store, ids["changed"])
    hit = [r for r in rows if r["harness"] == harness_desc(CHANGED)["name"] and r["stage"] == "compare"]
    assert hit[0]["status"] == "fail" and hit[0]["metrics"]["max_ulp"] == 9


def test_over_the_threshold_a_run_stays_fully_stored_and_becomes_the_base(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    base = [outcome(i) for i in range(N)]
    a = write_run(store, "a", base)
    changed = [mutate_record(o, 0, seconds=1.0) if i < 4 else o for i, o in enumerate(base)]  # 10% changed
    b = write_run(store, "b", changed, max_fraction=0.05)
    assert base_of(store, b) is None and stored(store, b) == (N, N * 6)
    c = write_run(store, "c", changed)  # identical to b: b is the newest full run
    assert base_of(store, c) == b and stored(store, c) == (0, 0)
    assert base_of(store, a) is None


# ---- a change in any field is stored ------------------------------------------------------------

@pytest.mark.parametrize("change", [*RECORD_CHANGES, "missing_stage", "extra_stage", "worst_seconds", "worker",
                                    "result_key", "downstream_key"])
def test_a_change_in_any_field_is_stored(db_url: str, change: str) -> None:
    """Write base, then a run with one harness changed in one field: the run is a delta that
    stores exactly that harness, and reads exactly like the same run stored in full."""
    store = open_store(db_url)
    write_run(store, "base", [outcome(i) for i in range(N)])
    outs = _outcomes_with(change)
    head = write_run(store, "head", outs, max_fraction=0.05)
    full = write_run(store, "full", outs, delta=False)
    assert base_of(store, head) is not None and stored(store, head)[0] == 1
    with store.session() as s:
        assert s.scalars(select(StoredOutcomeRow.harness_id).where(StoredOutcomeRow.run_id == head)).all() == \
            [writes.harness_ids(s, [harness_desc(5)])["fp0005"]]
    assert effective(store, head) == effective(store, full)
    with store.session() as s:
        def outcomes(run_id: int) -> list[tuple]:
            return s.execute(select(OutcomeRow.harness_id, OutcomeRow.worst, OutcomeRow.seconds, OutcomeRow.worker,
                                    OutcomeRow.result_key, OutcomeRow.downstream_key, OutcomeRow.cached_from)
                             .where(OutcomeRow.run_id == run_id).order_by(OutcomeRow.harness_id)).tuples().all()
        assert outcomes(head) == outcomes(full)


def test_outcome_provenance_and_environment_changes_are_stored(sqlite_url: str) -> None:
    """cached_from and the environment are outcome fields too: a copy that differs only there is stored."""
    store = open_store(sqlite_url)
    outs = [outcome(i) for i in range(N)]
    write_run(store, "base", outs)
    with store.session() as s:  # the same rows, but one outcome says it was copied from another run
        run = writes.create_run(s, env=ENV, name="head", total=N)
        hids = writes.harness_ids(s, [harness_desc(i) for i in range(N)])
        writes.Writer(s, run, hids).write(outs)
        s.execute(StoredOutcomeRow.__table__.update().where(StoredOutcomeRow.run_id == run.id,
                                                            StoredOutcomeRow.harness_id == hids["fp0003"])
                  .values(cached_from=1))
        writes.finish_run(s, run, "finished", max_fraction=0.05)
        head = run.id
    assert stored(store, head)[0] == 1
    other = write_run(store, "other-env", outs, env=OTHER_ENV)  # another environment: every comparable key differs
    assert base_of(store, other) is None and stored(store, other) == (N, N * 6)


def test_a_run_missing_a_harness_of_its_base_is_not_a_delta(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    write_run(store, "base", [outcome(i) for i in range(N)])
    head = write_run(store, "head", [outcome(i) for i in range(N - 1)], max_fraction=1.0)
    assert base_of(store, head) is None and stored(store, head)[0] == N - 1
    # a run with an extra harness is a delta that stores just the extra one
    more = [outcome(i) for i in range(N + 1)]
    extra = write_run(store, "extra", more, n=N + 1, max_fraction=0.05)
    assert base_of(store, extra) is not None and stored(store, extra) == (1, 6)
    assert len(effective(store, extra)) == (N + 1) * 6


def test_materialize_keeps_what_a_delta_run_reads(db_url: str) -> None:
    store = open_store(db_url)
    base = write_run(store, "base", [outcome(i) for i in range(N)])
    outs = _outcomes_with("status")
    head = write_run(store, "head", outs, max_fraction=0.05)
    before = effective(store, head)
    with store.session() as s:
        assert deltas.materialize(s, s.get(Run, head)) == N - 1
    assert base_of(store, head) is None and stored(store, head) == (N, N * 6)
    assert effective(store, head) == before
    with store.session() as s:
        assert s.get(Run, base) is not None


# ---- every reader reads a delta run as if it were fully stored ----------------------------------

def _strip(x: Any) -> Any:
    """Drop what says how a run is stored (stats.delta) and what is timed per call."""
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if k not in ("delta", "compute_seconds", "generated_at", "started_at", "finished_at",
                                                               "duration_s", "created_at", "seconds_to_compute", "per_s", "throughput", "wall",
                                                               "wall_s")}
    if isinstance(x, (list, tuple)):
        return [_strip(v) for v in x]
    return x


def _unordered(rows: list[Any]) -> list[Any]:
    """Rows a reader documents as in no order (storage order differs in a delta run)."""
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _readers(url: str, ids: dict[str, int]) -> dict[str, Any]:
    from farm.reports import comparison, triage
    from farm.store import harnesses, search, trends, verdicts, workers

    store = open_store(url)
    out: dict[str, Any] = {}
    with store.session() as s:
        out["list_runs"] = queries.list_runs(s)
        out["status_counts"] = queries.status_counts(s, list(ids.values()))
        for name, rid in ids.items():
            run = s.get(Run, rid)
            hid = writes.harness_ids(s, [harness_desc(CHANGED)])[CHANGED_FP]
            out[name] = {
                "run_dict": queries.run_dict(s, run),
                "results": queries.results(s, rid, detail=True),
                "matrix": queries.primitive_matrix(s, rid),
                "filtered": queries.filtered_matrix(s, rid, by="dtype", status="fail"),
                "filters": queries.filter_values(s, rid),
                "page": queries.harness_page(s, rid, limit=15, offset=5),
                "harness_results": harnesses.harness_results(s, hid, rid),
                "coverage": queries.coverage(s, rid),
                "boundary": queries.boundary(s, rid),
                "stage_counts": queries.stage_counts(s, rid),
                "census": queries.census_facts(s, rid),
                "comparison_rows": _unordered(queries.comparison_rows(s, rid)),
                "trend": trends.compute(s, rid),
                "triage": triage.triage(s, str(rid)),
                "search": search.harnesses(s, "sin", run_id=rid),
                "by_env": group_results(workers.worker_environments(run), workers.result_counts(s, run)),
                "verdicts": [_unordered(x) for x in verdicts.verdict_records(s, rid)],
            }
        out["history"] = harnesses.harness_history(s, CHANGED_FP)
        out["harness_runs"] = harnesses.harness_runs(s, writes.harness_ids(s, [harness_desc(CHANGED)])[CHANGED_FP])
        out["outcomes_by_env"] = {rid: group_results(envs, rows) for rid, (envs, rows)
                                  in workers.outcome_counts(s, list(ids.values())).items()}
    for a, b in (("base", "same"), ("same", "changed"), ("changed", "again"), ("base", "again")):
        out[f"compare {a} {b}"] = comparison.comparison(store, ids[a], ids[b]).report
    store.dispose()
    return out


def _faces(url: str, ids: dict[str, int]) -> dict[str, Any]:
    """The dashboard's JSON pages and the CLI's JSON output."""
    from dashboards.app import create_app
    from farm.cli import main

    c = create_app(url).test_client()
    out: dict[str, Any] = {}
    pages = ["/overview.json", "/runs.json", "/trends.json", "/failures.json",
             *(f"/overview.json?run={r}" for r in ids.values()),
             *(f"/coverage.json?run={r}" for r in ids.values()), *(f"/boundary.json?run={r}" for r in ids.values()),
             *(f"/compare.json?base={ids[a]}&head={ids[b]}" for a, b in (("base", "same"), ("same", "changed"),
                                                                         ("base", "again"))),
             f"/search.json?q=sin&run={ids['again']}", f"/harness/{CHANGED_FP}.json?run={ids['again']}",
             f"/failures.json?run={ids['changed']}"]
    for p in pages:
        r = c.get(p)
        out[p] = (r.status_code, r.get_json())
    for argv in (["show", str(ids["again"]), "--format", "json"], ["export", str(ids["same"])],
                 ["export", str(ids["again"]), "--format", "csv"],
                 ["compare", str(ids["same"]), str(ids["again"]), "--format", "json"],
                 ["triage", str(ids["again"]), "--format", "json"]):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = main([*argv, "--db", url])
        text = buf.getvalue()
        with contextlib.suppress(ValueError):
            text = json.loads(text)
        out[" ".join(argv)] = (rc, text)
    return out


def test_every_reader_reads_a_delta_run_as_if_fully_stored(tmp_path: Any) -> None:
    full_url, delta_url = f"sqlite:///{tmp_path / 'full.db'}", f"sqlite:///{tmp_path / 'delta.db'}"
    ids = build(full_url, delta=False)
    assert build(delta_url, delta=True) == ids
    store = open_store(delta_url)
    assert [base_of(store, ids[k]) for k in ("same", "changed", "again")] == [ids["base"]] * 3
    store.dispose()
    full, delta = _strip(_readers(full_url, ids)), _strip(_readers(delta_url, ids))
    assert full.keys() == delta.keys()
    for k in full:
        assert delta[k] == full[k], k
    full, delta = _strip(_faces(full_url, ids)), _strip(_faces(delta_url, ids))
    for k in full:
        assert delta[k] == full[k], k
        assert full[k][0] in (0, 1, 200), (k, full[k])
    assert any(v[0] == 1 for v in full.values())  # the gate failed: the comparisons saw the change


def test_counts_without_the_views_equal_the_views(db_url: str) -> None:
    """``deltas.counts`` (a delta run: its own rows, plus its base's, less the base's it
    overrides) gives exactly what grouping the ``results`` and ``harness_outcomes`` views gives,
    for full and delta runs, one of them overriding a harness of its base."""
    ids = build(db_url, delta=True)
    store = open_store(db_url)
    try:
        with store.session() as s:
            assert base_of(store, ids["changed"]) == ids["base"] and stored(store, ids["changed"])[0] > 0
            runs = list(ids.values())
            by_status = deltas.counts(s, runs)
            done = deltas.counts(s, runs, "outcomes")
            for rid in runs:
                view = dict(s.execute(select(ResultRow.status, func.count()).where(ResultRow.run_id == rid)
                                      .group_by(ResultRow.status)).tuples().all())
                assert dict(by_status[rid]) == view, rid
                n = s.scalar(select(func.count()).select_from(OutcomeRow).where(OutcomeRow.run_id == rid))
                assert done[rid][""] == n == N, rid
            assert by_status[ids["changed"]] != by_status[ids["base"]]  # the override is counted, not the base's row
    finally:
        store.dispose()


def test_the_overview_s_one_scan_gives_what_its_three_queries_gave(db_url: str) -> None:
    """The overview takes its filter values, matrix and status counts from one grouped scan
    (``run_cells``); each equals the query it replaced, for every filter the page takes."""
    ids = build(db_url, delta=True)
    store = open_store(db_url)
    try:
        with store.session() as s:
            for rid in ids.values():
                cells = queries.run_cells(s, rid)
                values = queries.filter_values(s, rid)
                assert queries.values_of(cells) == values
                assert queries.status_of(cells) == queries.run_dict(s, s.get(Run, rid))["status_counts"]
                picks = [{}, {"status": "fail"}, {"status": "ok,fail"}, {"platform": values["platform"][:2]},
                         {"dtype": values["dtype"][-1], "status": ""}, {"primitive": values["primitive"][0]},
                         {"catalog": values["catalog"][0], "platform": "cpu"}, {"status": "no_such_status"}]
                for by in ("primitive", "dtype"):
                    for f in picks:
                        assert queries.matrix_of(cells, by=by, **f) == queries.filtered_matrix(s, rid, by=by, **f), (by, f)
                assert queries.matrix_of(cells, status="fail") != queries.matrix_of(cells)  # the filter bites
    finally:
        store.dispose()
