"""Known upstream issues (farm/catalog/known.py): one place, every catalog. A known gap
explains only its own failure, never flags a pass, and a new one is still a ``fail``."""
from __future__ import annotations

import numpy as np
import pytest
from jax import lax

from farm import catalog
from farm.catalog import Limitation, known
from farm.pipeline import run_harness
from farm.results import Options

_CENSUS = ("CensusViolation", "crosses the plugin boundary: chlo.lgamma")


def _statuses(h: catalog.Harness) -> dict[tuple[str, str], tuple[str, dict]]:
    out = run_harness(h, Options(platforms=("cpu", "tpu")))
    return {(r.stage, r.platform): (r.status, r.facts) for r in out.records}


def test_a_harness_with_no_limitation_of_its_own_gets_the_known_chlo_leak_as_expected() -> None:
    """JAX's own catalog declares no chlo leaks: its erf census was a ``fail`` in every clean sweep
    (erf: a leak on every jax measured; lgamma's float32 one is gone at 0.12)."""
    h = catalog.define("test", "erf", lax.erf, [catalog.RandArg((3,), "float32")], dtype="float32",
                       catalog="test_known", compare="none")
    got = _statuses(h)
    for platform in ("cpu", "tpu"):
        status, facts = got[("census", platform)]
        assert status == "expected_fail", got
        assert facts["known_issue"] == known.CHLO_URL and "chlo.erf" in facts["limitation"]
    assert got[("lower", "cpu")][0] == "ok"  # nothing else is touched


def test_a_known_op_from_another_primitive_or_an_unknown_op_is_still_a_fail() -> None:
    assert known.explaining("lgamma", "census", "fail", *_CENSUS) is not None
    assert known.explaining("igamma", "census", "fail", *_CENSUS) is not None  # igamma lowers through lgamma
    assert known.explaining("tanh", "census", "fail", *_CENSUS) is None  # planted: tanh never leaked
    assert known.explaining("lgamma", "census", "fail", "CensusViolation",
                            "crosses the plugin boundary: chlo.lgamma, chlo.zeta") is None  # a new op beside it
    assert known.explaining("lgamma", "census", "fail", "CensusViolation",
                            "crosses the plugin boundary: chlo.lgamma, my_unguaranteed_target") is None
    assert known.explaining("lgamma", "lower", "fail", *_CENSUS) is None  # another stage
    assert known.explaining("lgamma", "census", "error", *_CENSUS) is None  # the census itself broke


def test_a_known_issue_never_flags_a_pass() -> None:
    """sin lowers to stablehlo.sine: a known issue for sin (planted here) would not make its census
    an unexpected_pass, as a harness's own stale limitation does."""
    h = catalog.define("test", "sin", lax.sin, [catalog.RandArg((3,), "float32")], dtype="float32",
                       catalog="test_known_pass", compare="none")
    issue = known._chlo("sin", frozenset({"sine"}))
    saved = known.KNOWN_ISSUES
    known.KNOWN_ISSUES = saved + (issue,)
    try:
        got = _statuses(h)
    finally:
        known.KNOWN_ISSUES = saved
    assert got[("census", "cpu")][0] == "ok" and got[("census", "tpu")][0] == "ok"


def test_every_declared_chlo_leak_is_a_known_one() -> None:
    assert {lim.stage for lim in catalog.chlo_leak("lgamma")} == {"census"}
    with pytest.raises(ValueError, match="not a known chlo leak"):
        catalog.chlo_leak("hypot")


def test_a_leak_a_newer_jax_dropped_holds_only_before_it(monkeypatch) -> None:  # noqa: ANN001
    """0.12 lowers real asin on cpu and tpu without chlo.asin: there the limitation holds only
    before 0.12 (a pass on 0.12 is a pass, one on 0.10 a stale limitation); cuda and rocm, and
    complex asin everywhere, keep it on every version."""
    def covered(dtype: str, version: str) -> set[str]:
        monkeypatch.setattr(known, "running_jax", lambda: version)
        h = next(h for h in catalog.select(catalog.Filters.parse(primitive="asin", dtype=dtype))
                 if h.family == "elementwise_unary")
        return {p for p in ("cpu", "cuda", "rocm", "tpu") if h.limitation(p, "census")}

    assert covered("float32", "0.10.2") == {"cpu", "cuda", "rocm", "tpu"}
    assert covered("float32", "0.12.0.1") == {"cuda", "rocm"}
    assert covered("float32", "0.11.0") == {"cpu", "cuda", "rocm", "tpu"}  # not measured: still claimed
    assert covered("complex64", "0.12.0.1") == {"cpu", "cuda", "rocm", "tpu"}
    lg = {v: [lim for lim in catalog.chlo_leak("lgamma", "float32") if lim.applies("cpu", "float32")]
          for v in ("0.10.2", "0.12.0.1") if not monkeypatch.setattr(known, "running_jax", lambda v=v: v)}
    assert lg["0.10.2"] and not lg["0.12.0.1"]
    monkeypatch.setattr(known, "running_jax", lambda: "0.12.0.1")
    assert [lim for lim in catalog.chlo_leak("lgamma", "float64") if lim.applies("cpu", "float64")]


def test_a_leak_a_newer_jax_brought_explains_only_there(monkeypatch) -> None:  # noqa: ANN001
    """abs of a complex crosses through chlo.square from 0.12 on: the census failure is the known
    issue there, and a fail on 0.10.2 (where it would be new)."""
    args = ("abs", "census", "fail", "CensusViolation", "crosses the plugin boundary: chlo.square")
    monkeypatch.setattr(known, "running_jax", lambda: "0.12.0.1")
    assert known.explaining(*args) is not None
    monkeypatch.setattr(known, "running_jax", lambda: "0.10.2")
    assert known.explaining(*args) is None
    with pytest.raises(Exception):
        catalog.Limitation("x", jax="not a specifier")


def test_stale_upstream_limitations_are_dropped_and_the_others_kept() -> None:
    hs = catalog.select(catalog.Filters(catalog="upstream", primitive=("clamp",)))
    by_dtype: dict[str, list[str]] = {}
    for h in hs:
        by_dtype.setdefault(h.dtype, []).extend(lim.description for lim in h.limitations)
    assert hs and "complex64" in by_dtype and "bool" in by_dtype
    assert "upstream: unimplemented" not in by_dtype["complex64"] + by_dtype["bool"]
    assert known.stale_upstream("clamp", "clamp_complex64_x", "upstream: unimplemented")
    assert known.stale_upstream("clamp", "clamp_float32_x", "upstream: unimplemented") is None
    assert known.stale_upstream("clamp", "clamp_bool_x", "upstream: something else") is None


def test_a_crash_known_on_a_newer_jax_is_expected_only_there(monkeypatch) -> None:  # noqa: ANN001
    """jax >= 0.11.2 lowers a forward cumsum for cuda to chlo.scan, which aborts XLA:CPU. A reverse
    cumsum's derivative (--vjp) is such a forward cumsum, run in the worker: its worker's death
    is the expected failure there, and still a crash on 0.10.2, where the same modules run. A
    forward cumsum's crossexec runs apart, so its worker dying is news on every jax, except in a
    --vjp 2 sweep, whose second derivative is a forward cumsum again; and a reverse one's dying
    without --vjp is news too."""
    from farm.judge.limitations import judge_crash
    from farm.results import Outcome, Record

    hs = catalog.select(catalog.Filters.parse(primitive="cumsum", dtype="float32", family="cumulative"))
    assert len(hs) == 3  # axis 0 and 1 forward, axis 1 reverse
    for h in hs:
        crashed = Outcome(h.fingerprint, h.name, [Record("execute", "any", "crashed", error="exit code -6")], [], 1.0)
        monkeypatch.setattr(known, "running_jax", lambda: "0.12.0.1")
        reverse = "reverse=True" in h.name
        assert [judge_crash(h, crashed, ("cpu",), vjp).records[0].status for vjp in (0, 1, 2)] == \
            (["crashed", "expected_fail", "expected_fail"] if reverse else ["crashed", "crashed", "expected_fail"]), h.name
        monkeypatch.setattr(known, "running_jax", lambda: "0.10.2")
        assert judge_crash(h, crashed, ("cpu",), 2).records[0].status == "crashed", h.name


def test_a_stage_known_to_abort_runs_apart_and_the_harness_keeps_its_other_records() -> None:
    """The cumsum's cuda and rocm modules run on XLA:CPU in a process of their own
    (``farm.pipeline.apart``): where jax lowers them to chlo.scan (0.11.2 and later) that process
    dies, the record says how and is the expected failure; the harness's compare and its tpu
    crossexec stand beside it. On an older jax the same modules run and agree."""
    from farm.catalog.known import holds_on

    h = catalog.select(catalog.Filters.parse(name="cumsum_float32_4x6_axis=0_reverse=False"))[0]
    by = {(r.stage, r.platform): r for r in run_harness(h, Options(repeats=1)).records}
    assert by[("compare", "cpu")].status == "ok" and by[("crossexec", "tpu")].status == "ok"
    for platform in ("cuda", "rocm"):
        cx = by[("crossexec", platform)]
        if holds_on(">=0.11.2"):
            assert cx.status == "expected_fail" and cx.facts["apart"], cx
            assert "signal 6" in cx.error and "operand_maps.size" in cx.error
            assert by[("census", platform)].status == "expected_fail"  # chlo.scan crosses the boundary
        else:
            assert cx.status == "ok", cx


def test_a_stage_run_apart_that_no_longer_dies_is_an_unexpected_pass() -> None:
    """A crash limitation on a module that runs fine: run apart, agreeing, the limitation is stale."""
    import dataclasses

    h = catalog.select(catalog.Filters.parse(name="triangular_solve_float32_4x4_4x3"))[0]  # tpu's module is its own
    stale = Limitation("planted: tpu's triangular_solve module aborts XLA:CPU", platforms=("tpu",),
                       stage="crossexec", crashes=True, status="crashed")
    h = dataclasses.replace(h, limitations=(*h.limitations, stale))
    by = {(r.stage, r.platform): r for r in run_harness(h, Options(repeats=1)).records}
    assert by[("crossexec", "tpu")].status == "unexpected_pass", by[("crossexec", "tpu")]
    assert by[("crossexec", "tpu")].facts["apart"]
    assert by[("crossexec", "cuda")].status == "ok"  # run in the worker as always


def test_bfloat16_inputs_and_outputs_cross_to_the_separate_process_and_back_as_bfloat16() -> None:
    """NumPy's npz keeps an ml_dtypes array as raw bytes (``|V2``): the separate process gets the
    harness's bfloat16 inputs, and the parent its outputs, through ``farm.formats.iofile``."""
    import jax

    from farm.pipeline import apart

    h = catalog.select(catalog.Filters.parse(name="sin_bfloat16_3x4"))[0]
    dyn = h.make_args()
    c, e, arrays = apart.run(h, "tpu", dyn, Options(repeats=1))
    assert c.status == "ok" and e is not None and e.status == "ok", (c, e)
    here = np.asarray(jax.jit(h.fun)(*dyn))
    assert arrays is not None and arrays[0].dtype == here.dtype == jax.numpy.bfloat16
    np.testing.assert_array_equal(arrays[0].astype(np.float32), here.astype(np.float32))


def test_a_leak_a_newer_jax_brought_holds_only_from_it(monkeypatch) -> None:  # noqa: ANN001
    """jax 0.8.1 lowers square through chlo.square; 0.5.3 multiplies (its census passed: 24
    unexpected passes). The farm catalog's limitation and the known issue both hold from 0.8.1."""
    def covered(version: str) -> tuple[set[str], bool]:
        monkeypatch.setattr(known, "running_jax", lambda: version)
        h = next(h for h in catalog.select(catalog.Filters.parse(primitive="square", dtype="float32"))
                 if h.family == "elementwise_unary")
        issue = known.explaining("square", "census", "fail", "CensusViolation",
                                 "crosses the plugin boundary: chlo.square")
        return {p for p in ("cpu", "cuda", "rocm", "tpu") if h.limitation(p, "census")}, issue is not None

    assert covered("0.5.3") == (set(), False)
    assert covered("0.8.0") == (set(), False)
    assert covered("0.8.1") == ({"cpu", "cuda", "rocm", "tpu"}, True)
    assert covered("0.12.0.1") == ({"cpu", "cuda", "rocm", "tpu"}, True)
    assert known.explaining("var", "census", "fail", "CensusViolation",
                            "crosses the plugin boundary: chlo.square") is not None  # var squares too


def test_a_harness_calling_what_this_jax_lacks_is_skipped_with_the_reason(monkeypatch) -> None:  # noqa: ANN001
    """The collective family's all_gather uses ``to='invarying'``, new in jax 0.10: on 0.9.2 it
    was the farm's own ValueError at trace. A harness names what it needs, with the versions that
    have it; elsewhere it is ``skipped`` saying so, and where the versions hold it runs."""
    h = next(h for h in catalog.select(catalog.Filters.parse(family="collective", primitive="all_gather")))
    assert h.needs == (("jax.shard_map", ">=0.6.1"), ("lax.all_gather(to='invarying')", ">=0.10"))
    monkeypatch.setattr(known, "running_jax", lambda: "0.5.3")
    assert known.lacking(h.needs) == "jax 0.5.3 lacks jax.shard_map (jax>=0.6.1 has it)"
    monkeypatch.setattr(known, "running_jax", lambda: "0.9.2")
    out = run_harness(h, Options(platforms=("cpu",)))
    assert [(r.stage, r.status, r.error_type) for r in out.records] == [("trace", "skipped", "NotInThisJax")]
    assert out.records[0].error == "jax 0.9.2 lacks lax.all_gather(to='invarying') (jax>=0.10 has it)"
    monkeypatch.setattr(known, "running_jax", lambda: "0.10.2")
    assert known.lacking(h.needs) is None
    with pytest.raises(Exception, match="nvalid"):  # a bad specifier fails where the harness is defined
        catalog.define("test", "sin", lax.sin, [catalog.RandArg((3,), "float32")], dtype="float32",
                       catalog="test_needs", needs={"lax.sin": "0.10"})


def test_jax_s_catalog_carries_the_scan_crash_and_svd_s_new_leak(monkeypatch) -> None:  # noqa: ANN001
    """A clean sweep of JAX's catalog on 0.12.0.1 had 22 workers die on forward real cumsums (the
    farm catalog's chlo.scan finding) and 20 tpu svd census fails naming chlo.conj and chlo.square:
    both are known data in one place now, the crash run apart, the leak only where it holds."""
    from farm.catalog import SCAN_ABORTS_CPU

    hs = catalog.select(catalog.Filters(catalog="upstream", primitive=("cumsum",)))
    apart = {h.name for h in hs if SCAN_ABORTS_CPU in h.limitations}
    assert apart and all(n.endswith("_reverse=False") and "complex" not in n for n in apart)
    assert {h.name for h in hs} - apart  # complex and reverse cumsums run with the others
    both = ("CensusViolation", "crosses the plugin boundary: chlo.conj, chlo.square")
    monkeypatch.setattr(known, "running_jax", lambda: "0.12.0.1")
    assert known.explaining("svd", "census", "fail", *both) is not None
    monkeypatch.setattr(known, "running_jax", lambda: "0.10.2")
    assert known.explaining("svd", "census", "fail", *both) is None  # not known there: a finding
    assert known.explaining("svd", "census", "fail", "CensusViolation", "crosses the plugin boundary: chlo.conj")


def test_a_known_issue_of_some_platforms_explains_only_their_records() -> None:
    """JAX's tpu eigh and svd lowerings refuse symbolic matrix dimensions (the api catalog's linalg
    functions under --shapes symbolic): the tpu's record, or the four-platform export that names
    tpu as the one that sank it, is explained; the same words on another platform, or another
    failure of the tpu, are not."""
    from farm.catalog import known

    words = ("ValueError", "Shape polymorphism for native lowering for eigh is implemented only for the batch "
             "dimensions: (b, d4, d4)")
    assert known.explaining("eigvalsh", "symbolic_export", "error", *words, ("tpu",)) is known.TPU_EIGH_SYMBOLIC
    assert known.explaining("eigvalsh", "symbolic_export", "error", *words, ("export", "tpu")) is known.TPU_EIGH_SYMBOLIC
    assert known.explaining("eigvalsh", "symbolic_export", "error", *words, ("cpu",)) is None
    assert known.explaining("eigvalsh", "symbolic_export", "error", *words) is None  # no platform named: not explained
    assert known.explaining("sin", "symbolic_export", "error", *words, ("tpu",)) is None
    svd = ("TracerBoolConversionError", "Abstract tracer value encountered where concrete value is expected: x")
    assert known.explaining("pinv", "symbolic_export", "error", *svd, ("tpu",)) is known.TPU_SVD_SYMBOLIC
    assert known.explaining("pinv", "symbolic_export", "fail", *svd, ("tpu",)) is None  # a wrong number is not it
