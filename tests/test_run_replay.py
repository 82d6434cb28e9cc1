"""farm.run.replay: stored exports from another jax version, corrupt and unknown-version
artifacts, JAX's back-compat data, invariants for non-unique outputs, coverage."""
from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import zlib
from collections import Counter

import numpy as np
import pytest

from farm.run import replay
from farm.results import Artifact, Outcome
from farm.results import Record

TODAY = dt.date(2026, 11, 22)
OLD_JAX = "0.9.0"


@pytest.fixture
def store(tmp_path):
    from farm.store import open_store

    s = open_store(f"sqlite:///{tmp_path / 'farm.db'}")
    yield s
    s.dispose()


def _env(jax_version: str = OLD_JAX) -> dict:
    return {"jax_version": jax_version, "jaxlib_version": jax_version, "python": "3.11.0", "host": "old-host",
            "device_kinds": ["cpu"], "xla_flags": "", "farm_commit": "old"}


def _harness(name: str, primitive: str = "sin", dtype: str = "float32") -> dict:
    fp = hashlib.sha256(name.encode()).hexdigest()[:20]
    return {"name": name, "fingerprint": fp, "catalog": "farm", "family": "test", "primitive": primitive,
            "group": primitive, "dtype": dtype, "shapes": [[3]], "params": {}}


def _outcome(name: str, *, cc: int | None = None, wrong_outputs: bool = False) -> tuple[dict, Outcome]:
    """What a sweep under jax 0.9.0 would have stored: the export, its io, the records linking them."""
    import jax
    import jax.numpy as jnp

    x = np.linspace(-1, 1, 3, dtype=np.float32)
    exp = jax.export.export(jax.jit(lambda v: jnp.sin(v) * 2))(x)
    native = np.asarray(exp.call(x))
    if cc is not None:
        exp = dataclasses.replace(exp, calling_convention_version=cc)
    blob = bytes(exp.serialize())
    out = [native + np.float32(1 if wrong_outputs else 0)]
    sha = hashlib.sha256(blob).hexdigest()
    io_sha, io_data = replay.io_blob([x], out)
    h = _harness(name)
    meta = {"platforms": ["cpu"], "calling_convention_version": exp.calling_convention_version,
            "jax_version": OLD_JAX, "format": "jax.export.serialize"}
    o = Outcome(h["fingerprint"], name, [
        Record("serialize", "export", "ok", artifact=sha),
        Record("execute", "cpu", "ok", artifact=io_sha),
    ], [Artifact(sha, "export", blob, meta), Artifact(io_sha, "io", io_data, {"inputs": 1, "outputs": 1})])
    return h, o


def _sweep(store, outcomes: list[tuple[dict, Outcome]], name: str = "old-sweep") -> str:
    from farm.store import writes

    with store.session() as s:
        run = writes.create_run(s, env=_env(), name=name, kind="sweep", platforms=["cpu"], run_on=["cpu"])
        hids = writes.harness_ids(s, [h for h, _ in outcomes])
        writes.Writer(s, run, hids).write([o for _, o in outcomes])
        writes.finish_run(s, run, "finished")
    return name


def _pipeline_sweep(store, h, name: str) -> str:
    """A sweep of one catalog harness as farm.pipeline stores it, its io linked on execute;
    the io artifact's sha256."""
    from farm import pipeline

    o = pipeline.run_harness(h, pipeline.Options(platforms=("cpu",), crossexec=False, repeats=1))
    io_sha = next(a.sha256 for a in o.artifacts if a.kind == "io")
    o = o.replace(records=[r.with_status(r.status, artifact=io_sha) if (r.stage, r.platform) == ("execute", "cpu")
                           else r for r in o.records])
    _sweep(store, [(h.describe(), o)], name=name)
    return io_sha


def _replay(store, items_of, **kw):
    from farm.store.environments import describe

    with store.session() as s:
        items = items_of(s)
        return replay.replay(s, items, env=describe(), today=TODAY, **kw)


def _by_name(report) -> dict:
    return {it.harness["name"]: rec for it, rec in report.items}


# ---------------------------------------------------------------- stored under another jax
def test_replays_exports_stored_under_another_jax_version(store):
    run = _sweep(store, [_outcome("sin_f32")])
    report = _replay(store, lambda s: replay.from_run(s, run))
    rec = _by_name(report)["sin_f32"]
    assert rec.status == "ok", rec.error
    assert rec.facts["judged"] == "exact"
    assert rec.facts["jax_version"] == OLD_JAX
    assert rec.facts["cc_supported"] is True
    assert rec.facts["outside_window"] is False  # stored today
    assert [(r.stage, r.platform) for r in rec.outcome.records] == [
        ("serialize", "export"), ("compile", "cpu"), ("execute", "cpu"), ("compare", "cpu")]
    assert rec.platform == "cpu"


def test_replay_results_are_a_replay_run_in_the_store(store):
    from farm.store import queries

    run = _sweep(store, [_outcome("sin_f32")])
    report = _replay(store, lambda s: replay.from_run(s, run), name="replay-1")
    with store.session() as s:
        info = queries.run_dict(s, queries.resolve_run(s, "replay-1"))
        rows = queries.results(s, report.run_id)
    assert info["kind"] == "replay" and info["status"] == "finished"
    assert [(r["stage"], r["platform"], r["status"]) for r in rows] == [
        ("serialize", "export", "ok"), ("compile", "cpu", "ok"), ("execute", "cpu", "ok"), ("compare", "cpu", "ok")]
    assert rows[0]["artifact"] == report.items[0][0].export_sha


def test_corrupt_artifact_is_a_clear_error_not_a_crash(store):
    from farm.store.models import ArtifactRow

    h, o = _outcome("sin_f32")
    run = _sweep(store, [(h, o)])
    export_sha = o.artifacts[0].sha256
    with store.session() as s:
        s.get(ArtifactRow, export_sha).data = zlib.compress(b"not what was stored")
    rec = _by_name(_replay(store, lambda s: replay.from_run(s, run)))["sin_f32"]
    assert rec.status == "error"
    assert rec.error_type == "ArtifactCorrupt"
    assert "corrupt" in rec.error and export_sha[:12] in rec.error
    assert rec.facts["reason"] == "corrupt"


def test_unknown_calling_convention_version_is_a_clear_error(store):
    run = _sweep(store, [_outcome("sin_cc99", cc=99)])
    rec = _by_name(_replay(store, lambda s: replay.from_run(s, run)))["sin_cc99"]
    assert rec.status == "error"
    assert rec.error_type == "UnknownFormatVersion"
    assert "calling-convention version 99" in rec.error
    assert rec.facts["reason"] == "calling_convention"


def test_changed_outputs_are_a_failure(store):
    run = _sweep(store, [_outcome("sin_wrong", wrong_outputs=True)])
    rec = _by_name(_replay(store, lambda s: replay.from_run(s, run)))["sin_wrong"]
    assert rec.status == "fail" and rec.facts["reason"] == "mismatch"
    assert rec.metrics["mismatches"] == 3


def test_export_without_linked_io_is_skipped_with_a_reason(store):
    h, o = _outcome("sin_noio")
    o = Outcome(o.fingerprint, o.name, [o.records[0]], o.artifacts)
    run = _sweep(store, [(h, o)])
    rec = _by_name(_replay(store, lambda s: replay.from_run(s, run)))["sin_noio"]
    assert rec.status == "skipped" and rec.facts["reason"] == "no_io"


def test_since_finds_stored_exports_and_filters(store):
    _sweep(store, [_outcome("sin_a"), _outcome("sin_b", wrong_outputs=True)])
    with store.session() as s:
        found = replay.since(s, TODAY - dt.timedelta(days=1))
        assert found and {it.harness["name"] for it in found} <= {"sin_a", "sin_b"}
        assert all(it.io_sha and it.source_run == "old-sweep" for it in found)
        assert replay.since(s, dt.date(2100, 1, 1)) == []
        assert replay.select_exports(found, primitive=("exp",)) == []


def test_other_platform_export_is_not_runnable_here(store):
    import jax
    import jax.numpy as jnp

    x = np.ones(3, np.float32)
    blob = bytes(jax.export.export(jax.jit(jnp.cos), platforms=("tpu",))(x).serialize())
    sha = hashlib.sha256(blob).hexdigest()
    io_sha, io_data = replay.io_blob([x], [np.cos(x)])
    h = _harness("cos_tpu")
    o = Outcome(h["fingerprint"], "cos_tpu", [Record("serialize", "export", "ok", artifact=sha),
                                               Record("execute", "cpu", "ok", artifact=io_sha)],
                [Artifact(sha, "export", blob, {"platforms": ["tpu"], "calling_convention_version": 10,
                                                "jax_version": OLD_JAX}),
                 Artifact(io_sha, "io", io_data, {})])
    run = _sweep(store, [(h, o)])
    rec = _by_name(_replay(store, lambda s: replay.from_run(s, run)))["cos_tpu"]
    assert rec.status == "not_runnable_here" and rec.facts["reason"] == "platform"


# ---------------------------------------------------------------- JAX's back-compat data
@pytest.fixture(scope="module")
def entries():
    return replay.backcompat_entries()


def test_backcompat_import_counts(entries):
    assert len(entries) == 142
    assert Counter(e.platform for e in entries) == {"cpu": 48, "cuda": 40, "rocm": 36, "tpu": 18}
    assert len({e.name for e in entries}) == len(entries)
    assert min(e.serialized_date for e in entries).year == 2023


def test_backcompat_entries_are_stored_as_linked_artifacts(store, entries):
    from farm.store import artifacts
    from farm.store.models import ArtifactRow

    with store.session() as s:
        items = replay.import_backcompat(s, entries)
        again = replay.import_backcompat(s, entries)  # idempotent
        assert [i.export_sha for i in items] == [i.export_sha for i in again]
        assert s.query(ArtifactRow).filter(ArtifactRow.kind == "export").count() == len({i.export_sha for i in items})
        row, _ = artifacts.get(s, items[0].export_sha)
        assert row.meta["io"] == items[0].io_sha and row.meta["format"] == replay.FORMAT_STABLEHLO
    poly = [e for e in entries if e.platform == "cpu" and replay.poly_specs(e.module_text, e.inputs)]
    assert {e.name.split(".")[0] for e in poly} >= {"stablehlo_dynamic_top_k", "stablehlo_dynamic_approx_top_k"}


def test_primitive_of_module_names():
    assert replay.primitive_of("cpu_eig_lapack_geev") == "eig"
    assert replay.primitive_of("cpu_triangular_solve_blas_trsm") == "triangular_solve"
    assert replay.primitive_of("cuda_lu_pivots_to_permutation") == "lu_pivots_to_permutation"
    assert replay.primitive_of("stablehlo_dynamic_top_k") == "dynamic_top_k"


def test_backcompat_replay_of_non_unique_and_polymorphic_entries(store, entries):
    wanted = [e for e in entries if e.platform == "cpu"
              and e.name.split(".")[0] in ("cpu_eigh_lapack_syev", "stablehlo_dynamic_top_k")]
    report = _replay(store, lambda s: replay.import_backcompat(s, wanted), catalog=replay.BACKCOMPAT_CATALOG)
    recs = _by_name(report)
    eigh = [r for n, r in recs.items() if "eigh" in n]
    assert len(eigh) == 4 and all(r.status == "ok" for r in eigh)
    # eigenvectors differ from the stored ones (signs, degenerate eigenspace): not a silent pass
    assert all(r.facts["judged"] == "invariant" and r.facts["reason"] == "non_unique" for r in eigh)
    top_k = [r for n, r in recs.items() if "top_k" in n]
    assert top_k and all(r.status == "ok" for r in top_k)
    old = [r for r in top_k if r.facts["calling_convention_version"] < 9]
    assert old and all(r.facts["cc_supported"] is False and r.facts["outside_window"] for r in old)
    assert all(c["guaranteed"] for r in recs.values() for c in r.facts["custom_calls"])
    assert report.summary()["ok_invariant"] == 4


def test_cli_backcompat_json_with_coverage(store, entries, capsys):
    from farm.cli import main
    from farm.store import writes

    h = _harness("lu_census", "lu")
    census = Record("census", "cpu", "ok", facts={"custom_calls": ["lapack_sgetrf_ffi", "lapack_sgeqrf_ffi"]})
    with store.session() as s:
        run = writes.create_run(s, env=_env(), name="census-sweep")
        writes.Writer(s, run, writes.harness_ids(s, [h])).write([Outcome(h["fingerprint"], h["name"], [census])])
    rc = main(["replay", "--jax-backcompat", "--primitive", "lu", "--dtype", "float32", "--today", "2026-11-22",
               "--db", store.url, "--format", "json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    cpu = [a for a in out["artifacts"] if a["harness"].startswith("cpu/")]
    assert [a["status"] for a in cpu] == ["ok"] and cpu[0]["outside_window"] is True
    assert cpu[0]["age_days"] == (TODAY - dt.date(2024, 5, 31)).days
    assert out["coverage"]["uncovered"] == ["lapack_sgeqrf_ffi"]  # qr entries were filtered out
    assert out["coverage"]["covered"] == ["lapack_sgetrf_ffi"]


def test_cli_errors_are_one_line(store, capsys):
    from farm.cli import main

    assert main(["replay", "--since", "yesterday", "--db", store.url]) == 2
    assert "--since must be a date" in capsys.readouterr().err
    assert main(["replay", "--from", "nope", "--db", store.url]) == 2


# ---------------------------------------------------------------- pure judging
def test_judge_non_unique_eigenvectors_by_invariant():
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    w = np.array([1.0, 2.0, 3.0, 4.0])
    flipped = q * np.array([1, -1, 1, -1])
    status, judged, reason, _, m = replay.judge([flipped, w], [q, w], "eigh")
    assert (status, judged, reason) == ("ok", "invariant", "non_unique")
    other, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    status, judged, reason, err, _ = replay.judge([other, w], [q, w], "eigh")
    assert (status, reason) == ("fail", "non_unique_mismatch") and "invariant error" in err
    assert replay.judge([flipped, w], [q, w], "exp")[2] == "mismatch"


def test_judge_exact_and_tolerance():
    a = np.array([1.0, 2.0], np.float32)
    assert replay.judge([a], [a], "sin")[:2] == ("ok", "exact")
    assert replay.judge([a], [a + np.float32(1e-6)], "sin")[:3] == ("ok", "tolerance", "within_tolerance")
    assert replay.judge([a], [a.astype(np.float64)], "sin")[2] == "signature"


def test_coverage_is_pure():
    cov = replay.coverage({"a", "b", "c"}, [(("a",), "ok"), (("b",), "error")])
    assert cov == {"seen": ["a", "b", "c"], "covered": ["a"], "uncovered": ["b", "c"], "uncovered_but_tested": ["b"]}


# ---------------------------------------------------------------- a real pipeline's artifacts
def test_pipeline_artifacts_replay_and_compare_with_today(store):
    """Artifacts as farm.pipeline stores them (io linked on the execute record), replayed and
    compared with today's jit of the same catalog harness."""
    import jax.numpy as jnp

    from farm import catalog
    from farm.store.environments import describe

    h = catalog.define("test", "tanh", lambda x: jnp.tanh(x), [catalog.RandArg((5,), "float32")],
                       dtype="float32", catalog="replaytest")
    io_sha = _pipeline_sweep(store, h, "pipeline-sweep")
    with store.session() as s:
        items = replay.from_run(s, "pipeline-sweep")
        report = replay.replay(s, items, env=describe(), today=TODAY, today_lowering=True)
    (item, rec), = report.items
    assert item.io_sha == io_sha and rec.status == "ok" and rec.facts["judged"] == "exact"
    assert rec.facts["custom_calls"] == []
    from farm.store import queries

    with store.session() as s:
        rows = {r["stage"]: r for r in queries.results(s, report.run_id)}
    assert rows["xhost"]["status"] == "ok" and rows["xhost"]["facts"]["vs_native"] == "ok"


def _linked(h):
    """One catalog harness run by the pipeline, its io linked on execute (as a sweep stores it)."""
    from farm import pipeline

    o = pipeline.run_harness(h, pipeline.Options(platforms=("cpu",), crossexec=False, repeats=1))
    io_sha = next(a.sha256 for a in o.artifacts if a.kind == "io")
    return h.describe(), o.replace(records=[r.with_status(r.status, artifact=io_sha)
                                            if (r.stage, r.platform) == ("execute", "cpu") else r for r in o.records])


def test_replay_jobs_run_on_the_sweeps_workers_with_their_isolation(store):
    """Replay hands artifact jobs to the sweep's scheduler: on Ray workers the records are the
    in-process ones, and a job that kills its worker (today's jit of sin aborts: a planted
    fault in the workers only) is retried alone, then ``crashed``, while the others finish."""
    from farm import catalog
    from farm.run.progress import SweepConfig
    from farm.store import queries
    from farm.store.environments import describe

    by_name = {h.name: h for h in catalog.load("farm")}
    _sweep(store, [_linked(by_name["sin_float32_3x4"]), _linked(by_name["cos_float32_3x4"])], name="two")
    inproc = _replay(store, lambda s: replay.from_run(s, "two"), today_lowering=True, name="in-process")
    config = SweepConfig(timeout_s=120, progress=False, env={"FARM_PLANT": "abort:sin"})
    with store.session() as s:
        ray_report = replay.replay(s, replay.from_run(s, "two"), env=describe(), today=TODAY, today_lowering=True,
                                   name="on-ray", workers=1, config=config)
    here, there = _by_name(inproc), _by_name(ray_report)
    assert here["sin_float32_3x4"].status == here["cos_float32_3x4"].status == "ok"
    stages = lambda rec: [(r.stage, r.platform, r.status) for r in rec.outcome.records]  # noqa: E731
    assert stages(there["cos_float32_3x4"]) == stages(here["cos_float32_3x4"])
    assert there["cos_float32_3x4"].outcome.records[-1].stage == "xhost"
    assert there["sin_float32_3x4"].status == "crashed", there["sin_float32_3x4"].error
    with store.session() as s:
        info = queries.run_dict(s, queries.resolve_run(s, "on-ray"))
        rows = queries.results(s, ray_report.run_id)
    assert info["status"] == "finished"
    assert {r["status"] for r in rows if r["harness"] == "sin_float32_3x4"} == {"crashed"}


def test_catalog_harness_limitations_judge_the_replay(store):
    """A replayed harness still in the catalog is judged by the pipeline's limitation judge:
    a limitation on a stage that now passes is stale; a compare limitation (about the
    float64 reference) is not judged by a comparison with stored outputs."""
    import jax.numpy as jnp

    from farm import catalog

    h = catalog.define("test", "sinh", lambda x: jnp.sinh(x), [catalog.RandArg((4,), "float32")],
                       dtype="float32", catalog="replaytest-limits",
                       limitations=[catalog.Limitation("execute fails on cpu", platforms=("cpu",), stage="execute"),
                                    catalog.Limitation("differs from numpy", platforms=("cpu",), stage="compare")])
    _pipeline_sweep(store, h, "limits-sweep")
    (_, rec), = _replay(store, lambda s: replay.from_run(s, "limits-sweep")).items
    by_stage = {r.stage: r for r in rec.outcome.records}
    assert by_stage["execute"].status == "unexpected_pass"
    assert by_stage["execute"].facts["limitation"] == "execute fails on cpu"
    assert by_stage["compare"].status == "ok" and "limitation" not in by_stage["compare"].facts
    assert rec.status == "unexpected_pass"


def test_missing_handler_for_the_artifacts_own_platform_is_a_breakage(store, monkeypatch):
    """The compile stage calls a module with no handler for a custom call not runnable here
    (right for another platform's module); for an artifact exported for this platform it
    is a breakage, and the exit code must see it."""
    from farm.stages import compile as compile_stage

    def no_handler(lowered, stage="compile"):
        return compile_stage.Compiled(stage, lowered.platform, "not_runnable_here",
                                      error="No FFI handler registered for lapack_sgetrf_ffi",
                                      facts={"missing_handler": "lapack_sgetrf_ffi"})

    run = _sweep(store, [_outcome("sin_f32")])
    monkeypatch.setattr(compile_stage, "run", no_handler)
    report = _replay(store, lambda s: replay.from_run(s, run))
    rec = _by_name(report)["sin_f32"]
    assert (rec.status, rec.facts["reason"], rec.verdict.stage) == ("error", "custom_call", "compile")
    assert report.summary() == {"error_breakage": 1}


def test_a_replay_run_replays_the_same_export_and_io(store):
    run = _sweep(store, [_outcome("sin_f32")])
    first = _replay(store, lambda s: replay.from_run(s, run), name="replay-a")
    second = _replay(store, lambda s: replay.from_run(s, "replay-a"))
    (a, _), = first.items
    (b, rec), = second.items
    assert (b.export_sha, b.io_sha, b.source_run) == (a.export_sha, a.io_sha, "replay-a")
    assert rec.status == "ok" and rec.facts["judged"] == "exact"
    with store.session() as s:
        assert replay.since(s, TODAY - dt.timedelta(days=1))[0].source_run == run  # replay runs are not sources
