"""Delta runs: a run identical to an earlier one stores (almost) nothing, reads exactly like a
fully stored run through every reader, and any change in any field is stored."""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
from typing import Any

import pytest
from sqlalchemy import func, select

from farm.results import Artifact, Outcome, Record
from farm.store import deltas, open_store, queries, writes
from farm.store.models import OutcomeRow, ResultRow, Run, StoredOutcomeRow, StoredResultRow

ENV = {"jax_version": "0.10.2", "jaxlib_version": "0.10.2", "python": "3.11.7", "host": "test",
       "device_kinds": ["cpu"], "xla_flags": "", "farm_commit": "abc"}
OTHER_ENV = {**ENV, "xla_flags": "--xla_cpu_enable_fast_math=true"}
N = 40
PRIMS = ("sin", "cos", "add", "dot_general")


def harness_desc(i: int) -> dict[str, Any]:
    p = PRIMS[i % len(PRIMS)]
    return {"fingerprint": f"fp{i:04d}", "name": f"{p}_{i}", "catalog": "farm", "family": "fam", "primitive": p,
            "group": p, "dtype": ("float32", "bfloat16")[i % 2], "shapes": [[3, i % 5 + 1]], "params": {}}


def outcome(i: int) -> Outcome:
    """A varied outcome: several platforms and stages, failures with errors, metrics, facts, artifacts."""
    blob = f"module {i}".encode()
    sha = hashlib.sha256(blob).hexdigest()
    status = ("ok", "fail", "error", "expected_fail", "ok", "ok")[i % 6]
    err = {"error_type": "RuntimeError", "error": f"boom {i}", "detail": f"Traceback\nboom {i}"} if status == "error" else {}
    recs = [Record("trace", "any", "ok", 0.001 * i, facts={"n_eqns": i % 7}),
            Record("lower", "cpu", "ok", 0.002, facts={"module_sha256": sha}),
            Record("serialize", "export", "ok", artifact=sha),
            Record("execute", "cpu", "ok" if status != "error" else "error", 0.01 + i / 1000,
                   metrics={"execute_s": 0.01 + i / 1000, "execute_min_s": 0.009}, **err),
            Record("compare", "cpu", "ok" if status == "error" else status, 0.0,
                   metrics={"max_abs_err": float("inf") if status == "fail" else 1e-7 * i, "max_ulp": i % 3},
                   facts={"verdict": "reference"}),
            Record("lower", "cuda", "not_runnable_here" if i % 3 else "ok", 0.0)]
    return Outcome(f"fp{i:04d}", harness_desc(i)["name"], tuple(recs), (Artifact(sha, "export", blob, {"jax_version": "0.10.2"}),),
                   seconds=0.5 + i / 100, worker="ray:n1:42", result_key=f"rk{i}", downstream_key=f"dk{i}")


def write_run(store: Any, name: str, outcomes: list[Outcome], *, delta: bool = True, env: dict[str, Any] = ENV,
              max_fraction: float = deltas.MAX_FRACTION, n: int = N) -> int:
    with store.session() as s:
        run = writes.create_run(s, env=env, name=name, platforms=["cpu", "cuda"], run_on=["cpu"], total=n)
        hids = writes.harness_ids(s, [harness_desc(i) for i in range(n)])
        writes.Writer(s, run, hids).write(outcomes)
        writes.finish_run(s, run, "finished", {"counts": {}}, delta=delta, max_fraction=max_fraction)
        return run.id


def stored(store: Any, run_id: int) -> tuple[int, int]:
    with store.session() as s:
        return (s.scalar(select(func.count()).select_from(StoredOutcomeRow).where(StoredOutcomeRow.run_id == run_id)),
                s.scalar(select(func.count()).select_from(StoredResultRow).where(StoredResultRow.run_id == run_id)))


def base_of(store: Any, run_id: int) -> int | None:
    with store.session() as s:
        return s.get(Run, run_id).base_run_id


def effective(store: Any, run_id: int) -> list[dict[str, Any]]:
    with store.session() as s:
        return queries.results(s, run_id, detail=True)


CHANGED = 6  # the harness the head run changes (ok before, fails after)
CHANGED_FP = f"fp{CHANGED:04d}"


def build(url: str, *, delta: bool) -> dict[str, int]:
    """base (full), same (identical to base), changed (one harness differs), again (identical to changed)."""
    store = open_store(url)
    base = [outcome(i) for i in range(N)]
    changed = list(base)
    changed[CHANGED] = mutate_record(changed[CHANGED], 4, status="fail", metrics={"max_abs_err": 1.0, "max_ulp": 9})
    ids = {"base": write_run(store, "base", base, delta=delta),
           "same": write_run(store, "same", base, delta=delta),
           "changed": write_run(store, "changed", changed, delta=delta, max_fraction=0.05),
           "again": write_run(store, "again", changed, delta=delta, max_fraction=0.05)}
    store.dispose()
    return ids


def mutate_record(o: Outcome, idx: int, **kw: Any) -> Outcome:
    recs = list(o.records)
    recs[idx] = dataclasses.replace(recs[idx], **kw)
    return o.replace(records=tuple(recs))


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

RECORD_CHANGES = {
    "status": (4, {"status": "fail"}),
    "seconds": (3, {"seconds": 0.0123456}),
    "error_type": (3, {"error_type": "ValueError"}),
    "error": (3, {"error": "a different message"}),
    "detail": (3, {"detail": "another traceback"}),
    "metrics_value": (4, {"metrics": {"max_abs_err": 1e-7 * 5 + 1e-16, "max_ulp": 5 % 3}}),
    "metrics_key": (4, {"metrics": {"max_abs_err": 1e-7 * 5, "max_ulp": 5 % 3, "extra": 1.0}}),
    "facts": (0, {"facts": {"n_eqns": 99}}),
    "artifact": (2, {"artifact": hashlib.sha256(b"other").hexdigest()}),
    "platform_status": (5, {"status": "skipped"}),
}


def _outcomes_with(change: str) -> list[Outcome]:
    outs = [outcome(i) for i in range(N)]
    i = 5
    if change in RECORD_CHANGES:
        idx, kw = RECORD_CHANGES[change]
        o = mutate_record(outs[i], idx, **kw)
        if change == "artifact":
            o = o.replace(artifacts=o.artifacts + (Artifact(kw["artifact"], "export", b"other", {}),))
        outs[i] = o
    elif change == "missing_stage":
        outs[i] = outs[i].replace(records=outs[i].records[:-1])
    elif change == "extra_stage":
        outs[i] = outs[i].replace(records=outs[i].records + (Record("compile", "cpu", "ok", 0.1),))
    elif change in ("worst_seconds", "worker", "result_key", "downstream_key"):
        attr = {"worst_seconds": "seconds"}.get(change, change)
        outs[i] = outs[i].replace(**{attr: 7.5 if attr == "seconds" else "changed"})
    else:
        raise AssertionError(change)
    return outs


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
    from farm.store import reports, search, triage, trends, verdicts, workers

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
                "harness_results": queries.harness_results(s, hid, rid),
                "coverage": queries.coverage(s, rid),
                "boundary": queries.boundary(s, rid),
                "stage_counts": queries.stage_counts(s, rid),
                "census": queries.census_facts(s, rid),
                "comparison_rows": _unordered(queries.comparison_rows(s, rid)),
                "trend": trends.compute(s, rid),
                "triage": triage.triage(s, str(rid)),
                "search": search.harnesses(s, "sin", run_id=rid),
                "by_env": workers.results_by_environment(s, run),
                "verdicts": [_unordered(x) for x in verdicts.verdict_records(s, rid)],
            }
        out["history"] = queries.harness_history(s, CHANGED_FP)
        out["harness_runs"] = queries.harness_runs(s, writes.harness_ids(s, [harness_desc(CHANGED)])[CHANGED_FP])
        out["outcomes_by_env"] = workers.outcomes_by_environment(s, list(ids.values()))
    for a, b in (("base", "same"), ("same", "changed"), ("changed", "again"), ("base", "again")):
        out[f"compare {a} {b}"] = reports.comparison(store, ids[a], ids[b]).report
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
