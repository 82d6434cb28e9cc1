"""The harness-level regression gate (farm.analysis.gate): a harness that crashes or times
out, a platform it lost, or a harness the candidate should have run and lacks is a status
regression; a harness removed from the catalog is not.

Before the gate, a crash (one record on platform "any") was a ``new_result`` and the
harness's other records ``missing``, so ``farm compare --fail-on status`` exited 0.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from farm import catalog
from farm.analysis import failing, render_text, report
from farm.analysis.gate import gate
from farm.analysis.report import FORMAT_VERSION
from farm.cli import main
from farm.results import Outcome
from farm.results import Record
from farm.store import open_store, writes

ENV = {"jax_version": "0.10.2", "jaxlib_version": "0.10.2", "python": "3.11.7", "host": "test",
       "device_kinds": ["cpu"], "xla_flags": "", "farm_commit": "abc"}
PLATFORMS = ["cpu", "cuda"]


# --------------------------------------------------------------------------- pure: rows in, findings out
def run(i: int, status: str = "finished", **kw: Any) -> dict[str, Any]:
    return {"id": i, "name": f"run-{i}", "kind": "sweep", "status": status, "platforms": PLATFORMS,
            "environment": {"fingerprint": "env"}, **kw}


def row(harness: str, platform: str, stage: str, status: str = "ok", error: str | None = None) -> dict[str, Any]:
    return {"harness": harness, "fingerprint": f"fp-{harness}", "primitive": harness.split("_")[0],
            "dtype": "float32", "platform": platform, "stage": stage, "status": status, "seconds": 0.001,
            "metrics": {}, "facts": {}, "error": error}


def ok_rows(harness: str, platforms: list[str] = PLATFORMS) -> list[dict[str, Any]]:
    rows = [row(harness, "any", "trace"), row(harness, "export", "export")]
    for p in platforms:
        rows.append(row(harness, p, "lower"))
    if "cpu" in platforms:
        rows += [row(harness, "cpu", "execute"), row(harness, "cpu", "compare")]
    return rows


def crashed(harness: str, status: str = "crashed") -> list[dict[str, Any]]:
    """What ``Outcome.failed`` stores: one record on platform "any", stage execute."""
    return [row(harness, "any", "execute", status, error="worker died (SIGABRT)")]


def regressions(rep: dict[str, Any]) -> dict[tuple[str, str], tuple[str | None, str | None]]:
    return {(f["harness"], f["platform"]): (f["base"], f["candidate"])
            for f in rep["findings"] if f["kind"] == "status" and f["regression"]}


def test_a_crash_regresses_every_platform_the_harness_had() -> None:
    base = ok_rows("sin_f32") + ok_rows("cos_f32")
    cand = crashed("sin_f32") + ok_rows("cos_f32")
    rep = report(run(1), base, run(2), cand)
    assert regressions(rep) == {("sin_f32", p): ("ok", "crashed") for p in ("any", "cpu", "cuda", "export")}
    assert failing(rep, ["status"]) == {"status": ["sin_f32"]}
    f = next(f for f in rep["findings"] if f["platform"] == "cpu")
    assert (f["change"], f["stage"], f["scope"], f["candidate_at"], f["error"]) == (
        "new_error", "*", "platform", "any/execute", "worker died (SIGABRT)")
    assert "sin_f32 cpu/*: ok -> crashed (from any/execute)" in render_text(rep)


@pytest.mark.parametrize("status,regressed", [("timeout", True), ("error", True), ("expected_fail", False),
                                               ("not_runnable_here", False)])
def test_whole_harness_statuses_by_severity(status: str, regressed: bool) -> None:
    """A known crash (``Limitation.crashes``: expected_fail) or a harness that cannot run
    here is not a regression; a timeout or a worker error is."""
    rep = report(run(1), ok_rows("sin_f32"), run(2), crashed("sin_f32", status))
    assert bool(failing(rep, ["status"])) is regressed


def test_was_bad_stays_bad_is_not_a_new_regression() -> None:
    base = ok_rows("sin_f32")[:-1] + [row("sin_f32", "cpu", "compare", "fail")]
    rep = report(run(1), base, run(2), crashed("sin_f32"))
    assert ("sin_f32", "cpu") not in regressions(rep)  # fail -> crashed: bad before, bad now
    assert ("sin_f32", "cuda") in regressions(rep)


def test_a_vanished_platform_is_a_regression_unless_the_candidate_was_not_asked_for_it() -> None:
    base, cand = ok_rows("sin_f32"), ok_rows("sin_f32", platforms=["cpu"])
    rep = report(run(1), base, run(2), cand)
    assert regressions(rep) == {("sin_f32", "cuda"): ("ok", None)}
    assert "vanished         sin_f32 cuda/*: ok -> absent" in render_text(rep)
    # a candidate run that lowered for cpu only: cuda is not compared
    rep = report(run(1), base, run(2, platforms=["cpu"]), cand)
    assert regressions(rep) == {} and rep["gate"]["skipped_platforms"] == ["cuda"]


def test_a_platform_only_a_stopping_any_record_explains_is_not_vanished() -> None:
    """Trace ok and no cuda records: cuda vanished. Trace failed: nothing ran after it."""
    rep = report(run(1), ok_rows("sin_f32"), run(2), [row("sin_f32", "any", "trace", "ok")])
    assert {p for _, p in regressions(rep)} == {"cpu", "cuda", "export"}
    assert {f["candidate"] for f in rep["findings"] if f["regression"]} == {None}
    rep = report(run(1), ok_rows("sin_f32"), run(2), [row("sin_f32", "any", "trace", "error")])
    assert set(regressions(rep).values()) == {("ok", "error")}


def test_stage_regressions_are_not_reported_twice() -> None:
    cand = ok_rows("sin_f32")[:-1] + [row("sin_f32", "cpu", "compare", "fail")]
    rep = report(run(1), ok_rows("sin_f32"), run(2), cand)
    found = [(f["platform"], f["stage"]) for f in rep["findings"] if f["regression"]]
    assert found == [("cpu", "compare")]


def test_absent_harnesses_vanished_or_removed_by_the_candidates_selection() -> None:
    base = ok_rows("sin_f32") + ok_rows("cos_f32") + ok_rows("old_f32")
    cand = ok_rows("sin_f32")
    selection = {"fp-sin_f32": "sin_f32", "fp-cos_f32": "cos_f32"}  # old_f32 left the catalog
    rep = report(run(1), base, run(2), cand, selection=selection)
    assert regressions(rep) == {("cos_f32", "*"): ("ok", None)}
    assert rep["harnesses"]["vanished"] == ["cos_f32"] and rep["harnesses"]["removed"] == ["old_f32"]
    assert next(f for f in rep["findings"] if f["regression"])["platforms"] == ["any", "cpu", "cuda", "export"]
    # matched by name too: cos_f32 redefined in the catalog since, still selected
    rep = report(run(1), base, run(2), cand, selection={"fp-sin_f32": "sin_f32", "fp-cos-v2": "cos_f32"})
    assert rep["harnesses"]["vanished"] == ["cos_f32"]
    # a candidate still running has not run them yet
    rep = report(run(1), base, run(2, status="running"), cand, selection=selection)
    assert regressions(rep) == {} and rep["harnesses"]["pending"] == ["cos_f32"]


def test_without_a_selection_the_candidates_own_count_decides() -> None:
    base, cand = ok_rows("sin_f32") + ok_rows("cos_f32"), ok_rows("sin_f32")
    complete = run(2, done=1, total=1)
    assert gate(run(1), base, complete, cand)["removed"] == ["cos_f32"]
    for short in (run(2, done=1, total=2), run(2, status="interrupted")):
        g = gate(run(1), base, short, cand)
        assert g["vanished"] == ["cos_f32"] and [f["change"] for f in g["findings"]] == ["vanished"]


def test_a_redefined_harness_is_not_vanished() -> None:
    base = ok_rows("sin_f32")
    cand = [r | {"fingerprint": "fp-sin-v2"} for r in ok_rows("sin_f32")]
    rep = report(run(1), base, run(2), cand, selection={"fp-sin-v2": "sin_f32"})
    assert regressions(rep) == {} and rep["harnesses"]["redefined"] == ["sin_f32"]


def test_flaky_crashes_are_findings_not_regressions() -> None:
    runs = [(run(i), ok_rows("sin_f32") if i % 2 else crashed("sin_f32")) for i in range(1, 7)]  # ok, crashed, ...
    rep = report(*runs[-2], *runs[-1], runs[:-2])
    gated = [f for f in rep["findings"] if f["stage"] == "*"]
    assert gated and all(f.get("flaky") and not f["regression"] for f in gated)
    assert failing(rep, ["status"]) == {}


# --------------------------------------------------------------------------- the store and the CLI
def ok_outcome(h: catalog.Harness, platforms: list[str] = PLATFORMS) -> Outcome:
    recs = [Record("trace", "any", "ok", 0.001), Record("export", "export", "ok", 0.01)]
    recs += [Record("lower", p, "ok", 0.01) for p in platforms]
    recs += [Record("execute", "cpu", "ok", 0.002, metrics={"execute_s": 0.001}),
             Record("compare", "cpu", "ok", 0.0, metrics={"max_abs_err": 0.0, "mismatches": 0.0},
                    facts={"against": "reference", "rtol": 1e-6, "atol": 1e-6})]
    return Outcome(h.fingerprint, h.name, recs)


GONE = {"fingerprint": "f" * 20, "name": "gone_float32_3x4", "catalog": "farm", "family": "elementwise_unary",
        "primitive": "gone", "group": "gone", "dtype": "float32", "shapes": [[3, 4]], "params": {}}


@pytest.fixture
def gate_db(sqlite_url: str) -> Iterator[dict[str, Any]]:
    """A base run of four catalog harnesses (sin, cos, exp, tanh) and one the catalog no
    longer has; a candidate where sin crashed (as the scheduler stores it), cos lost cuda,
    exp vanished (still in the catalog) and the removed harness is gone; a clean one."""
    filters = catalog.Filters.parse(group="sin,cos,exp,tanh", dtype="float32")
    hs = {h.primitive: h for h in catalog.select(filters)}
    store = open_store(sqlite_url)

    def add(name: str, outcomes: list[Outcome], extra: list[dict[str, Any]] = ()) -> None:
        with store.session() as s:
            run = writes.create_run(s, env=ENV, name=name, filters=filters.to_dict(), platforms=PLATFORMS,
                                    run_on=["cpu"], total=len(hs) + len(extra))
            hids = writes.harness_ids(s, [*hs.values(), *extra])
            writes.Writer(s, run, hids).write(outcomes)
            writes.finish_run(s, run, "finished")

    gone = Outcome(GONE["fingerprint"], GONE["name"], ok_outcome(hs["sin"]).records)
    add("base", [ok_outcome(h) for h in hs.values()] + [gone], [GONE])
    add("cand", [Outcome.failed(hs["sin"].fingerprint, hs["sin"].name, "crashed", "worker died (SIGABRT)"),
                 ok_outcome(hs["cos"], platforms=["cpu"]), ok_outcome(hs["tanh"])])
    add("clean", [ok_outcome(h) for h in hs.values()])
    yield {"url": sqlite_url, "names": {p: h.name for p, h in hs.items()}}
    store.dispose()


def compare(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(["compare", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_gate_fails_on_a_crash_a_lost_platform_and_a_vanished_harness(
        gate_db: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    n = gate_db["names"]
    rc, out, err = compare(capsys, "base", "cand", "--db", gate_db["url"], "--fail-on", "status")
    assert rc == 1, out
    assert f"status: {n['cos']}, {n['exp']}, {n['sin']}" in err and GONE["name"] not in err
    assert f"{n['sin']} cpu/*: ok -> crashed (from any/execute)" in out
    assert f"{n['cos']} cuda/*: ok -> absent" in out
    assert f"{n['exp']} */*: ok -> absent (platforms any, cpu, cuda, export)" in out
    assert f"removed: {GONE['name']}" in out and f"vanished: {n['exp']}" in out

    rc, out, _ = compare(capsys, "base", "cand", "--db", gate_db["url"], "--fail-on", "status", "--format", "json")
    rep = json.loads(out)
    assert rc == 1 and rep["format_version"] == FORMAT_VERSION
    assert rep["regressions"]["status"] == sorted([n["sin"], n["cos"], n["exp"]])
    assert (rep["harnesses"]["removed"], rep["harnesses"]["vanished"]) == ([GONE["name"]], [n["exp"]])
    assert rep["gate"]["selection"] == "catalog" and rep["gate"]["selected"] == 4
    got = {(f["harness"], f["platform"], f["base"], f["candidate"]) for f in rep["findings"] if f["regression"]}
    assert got == {*((n["sin"], p, "ok", "crashed") for p in ("any", "cpu", "cuda", "export")),
                   (n["cos"], "cuda", "ok", None), (n["exp"], "*", "ok", None)}


def test_cli_gate_passes_a_clean_pair_that_only_lost_a_removed_harness(
        gate_db: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = compare(capsys, "base", "clean", "--db", gate_db["url"], "--fail-on", "status")
    assert rc == 0, out + err
    assert "regressions: none" in out and f"removed: {GONE['name']}" in out


def test_dashboard_compare_page_shows_the_gate(gate_db: dict[str, Any]) -> None:
    from dashboards.app import create_app

    app = create_app(gate_db["url"])
    try:
        c, n = app.test_client(), gate_db["names"]
        d = c.get("/compare.json?base=base&head=cand").get_json()["report"]
        regressed = {(f["harness"], f["platform"], f["before"], f["after"]) for f in d["flips"]
                     if f["kind"] == "regression"}
        assert (n["sin"], "cpu", "ok", "crashed") in regressed and (n["exp"], "*", "ok", None) in regressed
        assert d["vanished"] == [n["exp"]] and d["gone"] == [GONE["name"]] and d["summary"]["regression"] == 6
        page = c.get("/compare?base=base&head=cand").get_data(as_text=True)
        assert 'id="vanished"' in page and n["exp"] in page and "worst of all" in page
    finally:
        app.config["STORE"].dispose()


def test_a_stored_report_is_recomputed_when_the_selection_changes(
        gate_db: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from farm.reports import comparison

    store = open_store(gate_db["url"])
    try:
        first = comparison.comparison(store, "base", "cand")
        assert first.stored and comparison.comparison(store, "base", "cand").from_store
        # exp leaves the catalog: the stored verdict (exp vanished) no longer holds
        real = comparison.selection
        monkeypatch.setattr(comparison, "selection", lambda run: {fp: n for fp, n in real(run).items()
                                                               if n != gate_db["names"]["exp"]})
        c = comparison.comparison(store, "base", "cand")
        assert not c.from_store and c.report["harnesses"]["vanished"] == []
        assert gate_db["names"]["exp"] in c.report["harnesses"]["removed"]
    finally:
        store.dispose()


def test_selection_of_a_run_whose_filter_values_left_the_catalog() -> None:
    from farm.reports.comparison import selection

    def sel(kind: str = "sweep", **filters: Any) -> dict[str, str] | None:
        return selection({"kind": kind, "catalog": "farm", "filters": {"catalog": "farm", **filters}})

    names = sorted(sel(primitive=["sin", "no_such_primitive"], dtype=["float32"]).values())
    assert names == sorted(sel(primitive=["sin"], dtype=["float32"]).values()) and names
    assert sel(primitive=["no_such_primitive"]) == {}
    assert sel("replay", primitive=["sin"]) is None  # a replay's filters name stored exports
    assert selection({"kind": "sweep", "catalog": "no-such-catalog", "filters": {}}) is None
