"""Failure clusters (farm.analysis.clusters, farm.store.triage, farm.reports.triage,
`farm triage`): failing records grouped by cause across harnesses, platforms, runs and configurations; new or not;
acknowledged clusters do not fail `farm compare`'s gate but a change in them is reported;
bad input is one line and exit 2; the acknowledgements table migrates a database made by
the schema before it."""
from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import select, text

from farm.analysis.clusters import clusters, diff
from farm.cli import main
from farm.results import Record
from farm.store import open_store, writes
from farm.store.models import AcknowledgementRow, Run

from tests.helpers.triage import ENV, HARNESSES, PLATFORMS, fill, outcome, reshape_error


def farm(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def triage_json(capsys: pytest.CaptureFixture[str], url: str, run: str) -> dict[str, Any]:
    rc, out, err = farm(capsys, "triage", run, "--db", url, "--format", "json")
    assert rc == 0, err
    return json.loads(out)


def by_primitive(rep: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["signature"]["primitives"][0]: c for c in rep["clusters"]}


def test_one_cause_is_one_cluster_across_harnesses_platforms_and_configurations(
        triage_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    rep = triage_json(capsys, triage_db, "n")  # the configuration sweep: n@x64=off and n@x64=on
    assert [r["name"] for r in rep["runs"]] == ["n@x64=off", "n@x64=on"]
    c = by_primitive(rep)
    assert set(c) == {"reshape", "log1p", "sin"}
    assert (c["reshape"]["records"], c["reshape"]["harnesses"], c["reshape"]["platforms"]) == (
        8, ["reshape_a", "reshape_b"], ["cpu", "tpu"])
    assert c["reshape"]["signature"]["error_type"] == "ValueError"
    assert c["log1p"]["signature"]["numeric"] == "ulp≤1k/all"
    assert rep["clusters"][0]["signature"]["status"] == "crashed"  # worst first
    assert all(x["new"] for x in rep["clusters"])  # no run before these
    assert c["sin"]["first_seen"]["name"] == "n@x64=on" and c["reshape"]["first_seen"]["name"] == "n@x64=off"
    assert rep["failing_records"] == 8 + 2 + 1


def test_history_first_and_last_seen_and_new(triage_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    rep = triage_json(capsys, triage_db, "later")
    [log1p] = rep["clusters"]
    assert not log1p["new"] and log1p["first_seen"]["name"] == "n@x64=off" and log1p["last_seen"]["name"] == "later"
    rc, out, _ = farm(capsys, "triage", "later", "--db", triage_db)
    assert rc == 0 and log1p["key"] in out and "farm repro log1p_f64 --run later --platform cpu" in out
    assert "1 failing records in 1 clusters (0 new, 0 acknowledged)" in out


def test_acknowledged_cluster_does_not_fail_the_gate_and_its_changes_are_reported(
        triage_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = farm(capsys, "compare", "n@x64=off", "n@x64=on", "--db", triage_db, "--fail-on", "status")
    assert rc == 1 and "sin_f32" in err
    assert "clusters: 2 -> 3; 1 new, 0 gone, 0 spread" in out
    crash = by_primitive(triage_json(capsys, triage_db, "n@x64=on"))["sin"]["key"]

    rc, out, err = farm(capsys, "triage", "ack", crash, "--note", "XLA CPU abort", "--url", "https://x/1",
                        "--db", triage_db)
    assert rc == 0, err
    with open_store(triage_db).session() as s:
        a = s.scalar(select(AcknowledgementRow))
        assert (a.cluster, a.note, a.url, a.harnesses, a.platforms) == (crash, "XLA CPU abort", "https://x/1",
                                                                        ["sin_f32"], ["any"])
    rc, out, err = farm(capsys, "compare", "n@x64=off", "n@x64=on", "--db", triage_db, "--fail-on", "status")
    assert rc == 0, out + err
    assert f"acknowledged cluster {crash} appeared" in out
    assert "in acknowledged clusters, not failing the gate (status: sin_f32)" in err
    rep = triage_json(capsys, triage_db, "n@x64=on")
    assert by_primitive(rep)["sin"]["acknowledged"]["note"] == "XLA CPU abort"
    assert rep["clusters"][-1]["key"] == crash  # acknowledged: listed after the others
    # the cluster is gone in a later run: still reported, as probably fixed
    assert [a["cluster"] for a in triage_json(capsys, triage_db, "later")["acknowledged_gone"]] == [crash]
    assert triage_json(capsys, triage_db, "n@x64=off")["acknowledged_gone"] == []  # not there yet: not "fixed"
    rc, out, _ = farm(capsys, "compare", "n@x64=on", "later", "--db", triage_db, "--fail-on", "status")
    assert f"acknowledged cluster {crash} gone (probably fixed)" in out and "2 gone" in out

    rc, _, _ = farm(capsys, "triage", "ack", crash, "--remove", "--db", triage_db)
    assert rc == 0
    rc, _, _ = farm(capsys, "compare", "n@x64=off", "n@x64=on", "--db", triage_db, "--fail-on", "status")
    assert rc == 1


def test_a_cluster_that_spreads_after_it_was_acknowledged_says_so() -> None:
    row = {"stage": "lower", "status": "error", "error_type": "E", "error": "x", "primitive": "p", "dtype": "f",
           "fingerprint": "f"}
    base = [{**row, "run_id": 1, "harness": "a", "platform": "cpu"}]
    cand = base + [{**row, "run_id": 1, "harness": "b", "platform": "tpu"}]
    [c] = clusters(cand, {1: {"name": "r"}}, [1], acks={})
    [acked] = clusters(cand, {1: {"name": "r"}}, [1], acks={c.key: {"harnesses": ["a"], "platforms": ["cpu"]}})
    assert acked.since_ack == {"new_harnesses": ["b"], "new_platforms": ["tpu"]}
    d = diff(base, cand)
    assert [e["key"] for e in d["spread"]] == [c.key] and d["spread"][0]["new_platforms"] == ["tpu"]
    assert diff(cand, cand)["spread"] == []


@pytest.mark.parametrize("args,says", [
    (["triage", "nosuchrun"], "no run 'nosuchrun'"),
    (["triage", "ack", "0123456789ab", "--note", "x"], "no cluster '0123456789ab'"),
    (["triage", "ack", "zz", "--note", "x"], "is not a cluster key"),
    (["triage", "ack", "0123456789ab"], "needs --note"),
    (["triage", "ack", "0123456789ab", "--remove"], "is not acknowledged"),
    (["triage", "later", "--note", "x"], "go with 'farm triage ack"),
])
def test_bad_input_is_one_line_and_exit_2(triage_db: str, capsys: pytest.CaptureFixture[str], args: list[str],
                                          says: str) -> None:
    rc, out, err = farm(capsys, *args, "--db", triage_db)
    assert rc == 2 and says in err and len(err.strip().splitlines()) == 1 and not out


def test_the_migration_upgrades_a_database_made_by_the_schema_before_it(db_url: str) -> None:
    store = open_store(db_url, upgrade=False)
    store.upgrade("0004")  # the schema before acknowledgements
    assert "acknowledgements" not in store.tables()
    with store.session() as s:  # rows as that schema's code wrote them (today's writer needs today's schema)
        o = outcome("reshape_a", *reshape_error("reshape_a", "3", "0x1"))
        s.execute(text("INSERT INTO environments (id, fingerprint, jax_version, jaxlib_version, python, host, "
                       "device_kinds, xla_flags, farm_commit, created_at) VALUES (1, 'envfp', '0.10.2', '0.10.2', "
                       "'3.11.7', 'test', '[\"cpu\"]', '', 'abc', '2026-01-01')"))
        h = HARNESSES[0]
        s.execute(text("INSERT INTO harnesses (id, fingerprint, name, catalog, family, primitive, grp, dtype, shapes, "
                       "params, definition) VALUES (1, :fp, :name, 'farm', 'fam', 'reshape', 'reshape', 'float32', "
                       "'[[3]]', '{}', '{}')"), {"fp": h["fingerprint"], "name": h["name"]})
        s.execute(text("INSERT INTO runs (id, name, kind, status, started_at, catalog, filters, platforms, run_on, "
                       "total, environment_id, stats) VALUES (1, 'old', 'sweep', 'finished', '2026-01-01', 'farm', "
                       "'{}', '[]', '[]', 1, 1, '{}')"))
        for r in o.records:
            s.execute(text("INSERT INTO results (run_id, harness_id, platform, stage, status, seconds, error_type, "
                           "error, metrics, facts, comparable) VALUES (1, 1, :p, :st, :status, 0, :et, :e, '{}', "
                           "'{}', 'c')"), {"p": r.platform, "st": r.stage, "status": r.status, "et": r.error_type,
                                           "e": r.error})
        s.execute(text("INSERT INTO harness_outcomes (run_id, harness_id, environment_id, worst, seconds, worker) "
                       "VALUES (1, 1, 1, 'error', 0, 'w')"))
    store.upgrade()
    assert "acknowledgements" in store.tables()
    with store.session() as s:
        assert s.scalar(select(Run.name)) == "old"
        assert s.execute(text("SELECT count(*) FROM results WHERE status = 'error'")).scalar() == 2
        from farm.reports import triage

        key = triage.triage(s, "old")["clusters"][0]["key"]
        triage.acknowledge(s, key, "seen")
    with store.session() as s:
        assert triage.acknowledgements(s)[key]["note"] == "seen"
    store.dispose()


def test_the_sweep_summary_says_which_clusters_are_new_and_gone(triage_db: str) -> None:
    from farm.reports import triage

    store = open_store(triage_db)
    with store.session() as s:
        ids = {r.name: r.id for r in s.scalars(select(Run))}
        assert triage.sweep_lines(s, ids["n@x64=off"]) == [
            "clusters: 2 (2 new, 0 acknowledged; `farm triage n@x64=off`)"]
        assert triage.sweep_lines(s, ids["n@x64=on"])[1] == "clusters since n@x64=off: 1 appeared, 0 gone, 0 spread"
        key = triage.triage(s, "n@x64=on")["clusters"][0]["key"]  # the crash
        triage.acknowledge(s, key, "known")
        lines = triage.sweep_lines(s, ids["later"])
    assert lines[:2] == ["clusters: 1 (0 new, 0 acknowledged; `farm triage later`)",
                         "clusters since n@x64=on: 0 appeared, 2 gone, 0 spread"]
    assert lines[2].startswith(f"acknowledged cluster {key} gone (probably fixed): execute crashed [sin]")
    store.dispose()


def test_one_error_across_primitives_is_rolled_up_as_one_cause() -> None:
    from farm.analysis.clusters import causes

    row = {"stage": "xhost", "status": "error", "error_type": "XlaRuntimeError", "platform": "cpu", "dtype": "f",
           "error": "INVALID_ARGUMENT: Failed to deserialize StableHLO", "run_id": 1}
    rows = [{**row, "primitive": p, "harness": f"{p}_{i}", "fingerprint": f"{p}{i}"}
            for p in ("acos", "asin", "erf") for i in range(3)]
    rows.append({**row, "primitive": "exp", "harness": "exp_0", "fingerprint": "e", "error": "another error"})
    found = clusters(rows, {1: {"name": "r"}}, [1])
    assert len(found) == 4  # the primitive is part of a signature
    [cause] = causes(found)
    assert (cause["primitives"], cause["harnesses"], len(cause["clusters"])) == (["acos", "asin", "erf"], 9, 3)


def test_expected_failures_are_clustered_only_when_asked(triage_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    store = open_store(triage_db)
    with store.session() as s:
        run = writes.create_run(s, env=ENV, name="known", platforms=PLATFORMS, run_on=["cpu"], total=1)
        writes.Writer(s, run, writes.harness_ids(s, HARNESSES)).write([outcome("sin_f32", Record(
            "compare", "cpu", "expected_fail", error_type="Mismatch", error="output 0: 1 of 8 elements differ",
            metrics={"max_ulp_err": 1e6, "mismatches": 1.0},
            facts={"limitation": "XLA CPU sin", "disagreement": {"elements": 8, "bad": 1, "sign": 1}}))])
        writes.finish_run(s, run, "finished")
    store.dispose()
    assert triage_json(capsys, triage_db, "known")["clusters"] == []
    rc, out, _ = farm(capsys, "triage", "known", "--expected", "--format", "json", "--db", triage_db)
    [c] = json.loads(out)["clusters"]
    assert (c["signature"]["status"], c["signature"]["numeric"]) == ("expected_fail", "sign/one")


def test_a_cluster_whose_harnesses_the_candidate_did_not_run_is_not_gone() -> None:
    row = {"stage": "lower", "status": "error", "error_type": "E", "error": "x", "primitive": "p", "dtype": "f",
           "platform": "cpu", "run_id": 1}
    base = [{**row, "harness": "a", "fingerprint": "fa"}]
    assert diff(base, [], ran=["fb"])["gone"] == []  # a smaller selection: a's cluster is unknown, not fixed
    assert [e["harnesses"] for e in diff(base, [], ran=["fa"])["gone"]] == [1]
    ok = {**row, "status": "ok", "harness": "a", "fingerprint": "fa"}
    assert len(diff(base, [ok])["gone"]) == 1  # all the candidate's rows: it ran a, which passed


def test_a_platform_that_vanished_behind_an_acknowledged_failure_does_not_fail_the_gate() -> None:
    """A lowering error on every platform leaves no export record: the gate's 'vanished'
    finding on the export platform belongs to the lowering error's cluster."""
    from farm.analysis import failing, report

    def rows(status: str) -> list[dict[str, Any]]:
        base = {"harness": "exp_f32", "fingerprint": "fe", "primitive": "exp", "dtype": "float32", "seconds": 0.0,
                "metrics": {}, "facts": {}, "error_type": None, "error": None}
        out = [{**base, "platform": "any", "stage": "trace", "status": "ok"}]
        out += [{**base, "platform": p, "stage": "lower", "status": status,
                 **({"error_type": "NotImplementedError", "error": "no lowering"} if status != "ok" else {})}
                for p in PLATFORMS]
        return out + ([{**base, "platform": "export", "stage": "export", "status": "ok"}] if status == "ok" else [])

    run = lambda i: {"id": i, "name": f"r{i}", "kind": "sweep", "status": "finished",  # noqa: E731
                     "platforms": PLATFORMS, "environment": {"fingerprint": "e"}}
    rep = report(run(1), rows("ok"), run(2), rows("error"))
    assert failing(rep, ["status"]) == {"status": ["exp_f32"]}
    [key] = {f["cluster"] for f in rep["findings"] if f["regression"]}
    assert any(f["platform"] == "export" and f["cluster"] == key for f in rep["findings"] if f["regression"])
    assert failing(rep, ["status"], acknowledged={key}) == {}


def test_triage_ack_and_the_gate_on_postgresql(pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    for url in fill(pg_url):
        rep = triage_json(capsys, url, "n")
        assert len(rep["clusters"]) == 3 and rep["failing_records"] == 11
        crash = by_primitive(rep)["sin"]["key"]
        assert farm(capsys, "compare", "n@x64=off", "n@x64=on", "--db", url, "--fail-on", "status")[0] == 1
        assert farm(capsys, "triage", "ack", crash, "--note", "known", "--db", url)[0] == 0
        assert farm(capsys, "compare", "n@x64=off", "n@x64=on", "--db", url, "--fail-on", "status")[0] == 0
        assert by_primitive(triage_json(capsys, url, "later"))["log1p"]["first_seen"]["name"] == "n@x64=off"
