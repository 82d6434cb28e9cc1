"""The api catalog's edge-value variants judged against their SciPy twin (``compare="edges"``,
``farm.judge.edges.twin_at_edges``): what the jaxpr's float64 evaluation cannot see (it computes
JAX's own algorithm) is caught; a device's flushed subnormal inputs, NaN in → NaN out and the
conventions of ``farm.catalog.known.API_EDGE_VALUES`` are accepted element by element, and
nothing else; a finding is the expected failure only where its own elements fail."""
from __future__ import annotations

import jax
import numpy as np
import pytest

from farm import catalog
from farm.catalog import known
from farm.judge.edges import twin_at_edges
from farm.judge.harness import Job, jaxpr_verdict
from farm.reference.handwritten import reference_outputs
from farm.results import Record


def _edge(name: str) -> catalog.Harness:
    hs = [h for h in catalog.select(catalog.Filters(catalog="api", group=("scipy.special",)))
          if h.name.startswith(f"scipy.special.{name}_") and h.compare == "edges"]
    assert hs, name
    return hs[0]


def _judge(h: catalog.Harness, plant=None) -> tuple[Record, list[np.ndarray], list[np.ndarray]]:  # noqa: ANN001
    args = h.make_args()
    outs = [np.asarray(jax.jit(h.fun)(*args))]
    if plant is not None:
        outs = [plant(outs[0].copy(), args)]
    ref = reference_outputs(h, args)
    return twin_at_edges(h, args, "cpu", outs, ref, 2e-5, 1e-6, False, None), args, outs


def _without(monkeypatch: pytest.MonkeyPatch, key: str, finding: bool | None = None) -> None:
    monkeypatch.setattr(known, "API_EDGE_VALUES", tuple(
        e for e in known.API_EDGE_VALUES if not (e.primitive == key and (finding is None or e.finding == finding))))


def test_edge_variants_of_scipy_special_are_judged_against_the_twin() -> None:
    hs = [h for h in catalog.select(catalog.Filters(catalog="api", group=("scipy.special",))) if "_edge=" in h.name]
    twin = {h.primitive for h in hs if h.compare == "edges"}
    assert {"beta", "gammainc", "hyp1f1", "comb", "erf", "expi"} <= twin and len(twin) >= 35
    hyp2f1 = {h.name.rsplit("_edge=", 1)[1] for h in hs if h.primitive == "hyp2f1"}
    assert hyp2f1 == {"x3"}  # the other cases hang (docs/repros/hyp2f1_huge_parameter_hangs.py)


def test_the_twin_catches_what_the_jaxpr_reference_agrees_with(monkeypatch: pytest.MonkeyPatch) -> None:
    """hyp1f1(NaN, b, x) is 1 in JAX by its algorithm (the series stops at once): its own jaxpr in
    float64 says 1 too, so that judge passes it; against SciPy (NaN) it fails once the finding's
    data is gone."""
    h = _edge("hyp1f1")
    rec, _, _ = _judge(h)
    assert rec.status == "expected_fail" and "NaN a or b" in rec.facts["limitation"]
    args = [np.array([np.nan], np.float32), np.array([0.25], np.float32), np.array([0.25], np.float32)]
    outs = [np.asarray(jax.jit(h.fun)(*args))]
    assert outs[0][0] == 1.0
    traced = jax.jit(h.fun).trace(*args).jaxpr
    v = jaxpr_verdict(Job(h, None, args, args, None, traced), "cpu", outs)
    assert v.status == "ok", v.error
    _without(monkeypatch, "scipy.special.hyp1f1", finding=True)
    rec = twin_at_edges(h, args, "cpu", outs, reference_outputs(h, args), 2e-5, 1e-6, False, None)
    assert rec.status == "fail" and rec.metrics["mismatches"] == 1


def test_flushed_subnormal_inputs_are_accepted_and_a_wrong_value_there_is_not() -> None:
    h = _edge("erfc")  # erfc(±1.4e-45) is 1 either way; ndtri/log-like poles differ
    assert _judge(h)[0].status == "ok"
    h = _edge("log_ndtr")
    rec, args, outs = _judge(h)
    assert rec.status in ("ok", "expected_fail")
    x = np.asarray(args[0])
    sub = (x != 0) & (np.abs(x) < np.finfo(np.float32).tiny)
    assert sub.any()

    def wrong_at_subnormal(o: np.ndarray, a: list) -> np.ndarray:  # neither f(x) nor f(0)
        o[sub] = o[sub] + 0.5
        return o
    rec, _, _ = _judge(h, wrong_at_subnormal)
    assert rec.status == "fail" and rec.metrics["mismatches"] == sub.sum()


def test_nan_in_nan_out_is_accepted_but_a_number_for_nan_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    h = _edge("erf")
    rec, args, outs = _judge(h)
    assert rec.status == "ok" and np.isnan(outs[0][np.isnan(np.asarray(args[0]))]).all()
    h = _edge("hyp2f1")  # 2F1(a, b, c, NaN) is 1 (docs/repros/hyp2f1_nan_z.py)
    assert _judge(h)[0].status == "expected_fail"
    _without(monkeypatch, "scipy.special.hyp2f1")
    rec = _judge(h)[0]
    assert rec.status == "fail" and rec.metrics["mismatches"] == 1


def test_a_convention_excuses_its_elements_and_nothing_else(monkeypatch: pytest.MonkeyPatch) -> None:
    h = _edge("loggamma")  # NaN at x <= 0 where SciPy gives inf: a convention
    rec, args, _ = _judge(h)
    assert rec.status == "ok" and rec.facts["excused"] >= 3
    x = np.asarray(args[0])
    off = np.flatnonzero((x > 1) & (x < 1e3))[:1]

    def wrong_elsewhere(o: np.ndarray, a: list) -> np.ndarray:
        o.reshape(-1)[off] *= 1.01
        return o
    rec = _judge(h, wrong_elsewhere)[0]
    assert rec.status == "fail" and rec.metrics["mismatches"] == 1
    _without(monkeypatch, "scipy.special.loggamma")
    assert _judge(h)[0].status == "fail"


def test_a_finding_is_expected_only_where_its_own_elements_fail() -> None:
    h = _edge("comb")  # comb(N, k) loses N's digits for N > 500 (docs/repros/comb_large_n.py)
    rec, args, _ = _judge(h)
    assert rec.status == "expected_fail" and "comb(N, k)" in rec.facts["limitation"]
    n = np.asarray(args[0])
    small = np.flatnonzero((n >= 2) & (n <= 100))[:1]
    assert small.size

    def wrong_small_n(o: np.ndarray, a: list) -> np.ndarray:
        o.reshape(-1)[small] += 1.0
        return o
    rec = _judge(h, wrong_small_n)[0]
    assert rec.status == "fail" and "without the" in rec.error


def test_other_operands_may_hold_values_of_their_own_domain() -> None:
    """``edge_others="domain"``: while one operand is at its edges, the others hold values drawn
    from their own domains (a probability in [0, 1]) instead of generic ones, under another
    fingerprint name."""
    from farm.catalog import special

    half = ("p", lambda n: np.full(n, 0.5, np.float32))
    plain = dict(special.operand_sets(["float32", "float32"]))
    own = dict(special.operand_sets(["float32", "float32"], others=[None, half]))
    x0 = own["x0"][1].make(None)
    assert (x0 == 0.5).all() and not (plain["x0"][1].make(None) == 0.5).all()
    assert own["x0"][1].name != plain["x0"][1].name  # another input, another fingerprint
    assert np.array_equal(own["x1"][0].make(None), plain["x1"][0].make(None))  # no domain given: as before


def test_a_value_where_the_function_hangs_is_withheld_and_every_other_edge_is_drawn() -> None:
    """jnp.gcd(x, INT_MIN) never returns (docs/repros/gcd_int_min_hangs.py): gcd's and lcm's edge
    variants hold every other int32 special value, in each operand and in pairs, and not INT_MIN;
    a withheld value names other arguments (another harness key), and NaN can be withheld."""
    from farm.catalog import special

    lo = np.iinfo(np.int32).min
    every = set(special.values("int32").tolist())
    for name in ("gcd", "lcm"):
        hs = {dict(h.key.params).get("edge"): h for h in catalog.select(catalog.Filters(catalog="api", primitive=(name,)))}
        hs.pop(None)
        assert sorted(hs) == ["all", "x0", "x1"]
        for case, h in hs.items():
            held = [np.asarray(a) for a in h.make_args()]
            assert not any((a == lo).any() for a in held), h.name
            at_edges = np.concatenate(held) if case == "all" else held[int(case[1])]
            assert set(at_edges.tolist()) == every - {lo}, h.name
    plain = special.operand_sets(["int32", "int32"])
    kept = special.operand_sets(["int32", "int32"], withheld=(float(lo),))
    assert [a.name for a in plain[0][1]] != [a.name for a in kept[0][1]]
    assert lo in plain[0][1][0].make(np.random.default_rng(0))
    assert special.kept(np.array([np.nan, 1.0, 2.0], np.float32), (np.nan, 2.0)).tolist() == [1.0]


def test_jnp_modf_at_infinity_is_the_finding_against_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """jnp.modf(±inf)'s fractional part is NaN (docs/repros/modf_inf.py): its jaxpr computes the same
    x - trunc(x), so modf's edges are judged against NumPy; the finding's elements fail and nothing
    else does; without the finding's data the variant fails, and a fixed modf is no longer the finding."""
    (h,) = [h for h in catalog.select(catalog.Filters(catalog="api", group=("jnp",), primitive=("modf",),
                                                       dtype=("float32",))) if h.compare == "edges+jaxpr"]
    args = h.make_args()
    outs = [np.asarray(o) for o in jax.jit(h.fun)(*args)]
    ref = reference_outputs(h, args)
    judge = lambda o: twin_at_edges(h, args, "cpu", o, ref, 2e-5, 1e-6, False, None)  # noqa: E731
    rec = judge(outs)
    assert rec.status == "expected_fail" and "modf(±inf)" in rec.facts["limitation"]
    fixed = [np.where(np.isinf(args[0]), np.copysign(0.0, args[0]), outs[0]).astype(np.float32), outs[1]]
    assert judge(fixed).status != "expected_fail"
    _without(monkeypatch, "jnp.modf", finding=True)
    assert judge(outs).status == "fail"


def test_an_integer_floor_division_by_zero_is_the_known_upstream_bug_against_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """jnp.floor_divide(x, 0) is -2 for int32 (jax-ml/jax#11990, open): the divisor's edge variant is
    the expected failure on exactly the zero divisors; without that data it fails."""
    (h,) = [h for h in catalog.select(catalog.Filters(catalog="api", group=("jnp",), primitive=("floor_divide",),
                                                       dtype=("int32",))) if h.name.endswith("_edge=x1_v=int")]
    args = h.make_args()
    outs = [np.asarray(jax.jit(h.fun)(*args))]
    judge = lambda o: twin_at_edges(h, args, "cpu", o, reference_outputs(h, args), 0.0, 0.0, True, None)  # noqa: E731
    rec = judge(outs)
    assert rec.status == "expected_fail" and "11990" in rec.facts["limitation"] and rec.metrics["mismatches"] == 1
    assert judge([np.where(args[1] == 0, 0, outs[0]).astype(np.int32)]).status != "expected_fail"
    _without(monkeypatch, "jnp.floor_divide", finding=True)
    assert judge(outs).status == "fail"


def test_jnp_edges_are_judged_both_ways_and_the_worse_verdict_stands() -> None:
    """cbrt of a subnormal (-5.6e-16) is inside the twin's absolute band and only the jaxpr's policy
    sees it; an integer x // 0 agrees with the jaxpr (JAX's own algorithm) and only NumPy sees it:
    judged both ways, each is its finding's expected failure, by the judge that saw it; a judge with
    no answer leaves the verdict to the other."""
    from farm.judge.harness import both
    from farm.pipeline import run_harness
    from farm.results import Options

    def compare(name: str, dtype: str, case: str) -> Record:
        (h,) = [h for h in catalog.select(catalog.Filters(catalog="api", group=("jnp",), primitive=(name,),
                                                           dtype=(dtype,))) if h.name.endswith(case)]
        assert h.compare == "edges+jaxpr"
        return next(r for r in run_harness(h, Options(platforms=("cpu",), run_on=("cpu",), repeats=1)).records
                    if r.stage == "compare")
    cbrt = compare("cbrt", "float32", "_edge=x0")
    assert cbrt.status == "expected_fail" and cbrt.facts["judged_by"] == "jaxpr" and cbrt.facts["other"]["status"] == "ok"
    div = compare("floor_divide", "int32", "_edge=x1_v=int")
    assert div.status == "expected_fail" and div.facts["judged_by"] == "twin" and div.facts["other"]["status"] == "ok"
    ok, skipped = Record("compare", "cpu", "ok"), Record("compare", "cpu", "skipped", error="no rule")
    failed = Record("compare", "cpu", "fail", error="wrong")
    assert both(ok, skipped).status == "ok" and both(skipped, ok).status == "ok"
    assert both(ok, failed).status == "fail" and both(failed, ok).status == "fail"
    names = {h.primitive for h in catalog.select(catalog.Filters(catalog="api", group=("jnp",))) if "_edge=" in h.name
             and h.compare != "edges+jaxpr"}
    assert {"nextafter", "nan_to_num"} <= names  # their float64 twin is another function


def _stats_edge(dist: str, fn: str, case: str) -> catalog.Harness:
    name = f"scipy.stats.{dist}.{fn}_float32_"
    hs = [h for h in catalog.select(catalog.Filters(catalog="api", group=(f"scipy.stats.{dist}",)))
          if h.name.startswith(name) and h.name.endswith(f"_edge={case}")]
    assert len(hs) == 1, (dist, fn, case)
    return hs[0]


def _without_stats(monkeypatch: pytest.MonkeyPatch, key: str, text: str) -> None:
    monkeypatch.setattr(known, "STATS_EDGE_VALUES", tuple(
        e for e in known.STATS_EDGE_VALUES if not (e.primitive == key and text in e.description)))


@pytest.mark.skipif(not known.holds_on(">=0.12"), reason="the shape-parameter edge variants are triaged on jax 0.12+")
def test_stats_shape_parameters_at_edges_each_class_is_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The distributions with shape parameters at edge values: a parameter outside its domain is
    unspecified (SciPy's own ``_argcheck``) and excused; geom.pmf at a non-integer k is the finding;
    without either piece of data the same variant fails, and a wrong value the data does not
    cover fails with it."""
    h = _stats_edge("geom", "pmf", "all")
    rec, args, outs = _judge(h)
    assert rec.status == "expected_fail" and "non-integer k" in rec.facts["limitation"], rec
    assert rec.facts["excused"] > 0
    with monkeypatch.context() as m:
        _without_stats(m, "scipy.stats.geom.pmf", "non-integer k")
        assert _judge(h)[0].status == "fail"
    with monkeypatch.context() as m:
        _without_stats(m, "scipy.stats.geom.pmf", "outside the distribution's domain")
        assert _judge(h)[0].status == "fail"
    k, p = (np.asarray(a, np.float64) for a in args)
    plain = (k == np.floor(k)) & (k >= 1) & (k < 1e30) & (p > 0.1) & (p < 1)  # integer k, p in the domain
    assert plain.any()

    def wrong_where_nothing_is_known(o: np.ndarray, a: list) -> np.ndarray:
        o[plain] = o[plain] * 1.01
        return o
    assert _judge(h, wrong_where_nothing_is_known)[0].status == "fail"


@pytest.mark.skipif(not known.holds_on(">=0.12"), reason="the shape-parameter edge variants are triaged on jax 0.12+")
def test_stats_log_of_an_underflowed_probability_is_the_finding_by_scipy_s_value() -> None:
    """The log-underflow class is where SciPy's own probability is below float32's smallest normal:
    chi2.logcdf(2.62, 100) is covered (cdf 6e-60), chi2.logcdf(2.62, 3) is not (cdf 0.55)."""
    e = next(e for e in known.STATS_EDGE_VALUES if e.primitive == "scipy.stats.chi2.logcdf" and "log of a" in e.description)
    got = e.where(np.array([2.62, 2.62]), np.array([100.0, 3.0]))
    assert got.tolist() == [True, False]


def _fft_rows(name: str) -> catalog.Harness:
    hs = [h for h in catalog.select(catalog.Filters(catalog="api", group=("jnp.fft",)))
          if h.primitive == name and dict(h.key.params).get("edge") == "rows"]
    assert len(hs) == 1, name
    return hs[0]


def test_fft_edge_rows_take_any_non_finite_answer_where_numpy_s_is_not_finite_and_nothing_else() -> None:
    """jnp.fft's edge rows: one special value a row; where numpy.fft's answer is not finite any
    non-finite one agrees (which of inf and NaN is the algorithm's), a finite answer there fails,
    and so does a wrong finite value in a row of ordinary values."""
    h = _fft_rows("fft")
    rec, args, outs = _judge(h)
    assert rec.status == "ok" and rec.facts["excused"] > 0, rec
    x = np.asarray(args[0])
    inf_row = int(np.flatnonzero(np.isinf(x[:, 0]))[0])
    plain_row = int(np.flatnonzero(x[:, 0] == 1.0)[0])

    def finite_where_inf(o: np.ndarray, a: list) -> np.ndarray:
        o[inf_row] = 0.0
        return o
    assert _judge(h, finite_where_inf)[0].status == "fail"

    def nan_for_inf(o: np.ndarray, a: list) -> np.ndarray:  # non-finite stays non-finite: the algorithm's choice
        o[inf_row] = np.where(np.isfinite(o[inf_row]), o[inf_row], np.nan)
        return o
    assert _judge(h, nan_for_inf)[0].status == "ok"

    def off_in_a_plain_row(o: np.ndarray, a: list) -> np.ndarray:
        o[plain_row, 1] = o[plain_row, 1] * 1.01 + 0.01
        return o
    assert _judge(h, off_in_a_plain_row)[0].status == "fail"


def test_the_n_dimensional_transforms_have_no_edge_rows() -> None:
    """fftn and its kin transform every axis by default: a row would not be a test of its own."""
    hs = [h for h in catalog.select(catalog.Filters(catalog="api", group=("jnp.fft",)))
          if dict(h.key.params).get("edge") == "rows"]
    assert {h.primitive for h in hs} >= {"fft", "ifft", "rfft", "irfft", "fft2", "irfft2", "hfft", "ihfft"}
    assert not {h.primitive for h in hs} & {"fftn", "ifftn", "rfftn", "irfftn"}


def test_another_platform_s_module_agrees_on_non_finite_rows_only_where_both_are_non_finite() -> None:
    from farm.judge.edges import nonfinite_alike
    h = _fft_rows("irfft2")
    outs = [np.array([np.nan, np.inf, 1.0, np.inf], np.float32)]
    native = [np.array([np.inf, -np.inf, 1.0, 2.0], np.float32)]
    got = nonfinite_alike(h, outs, native)[0]
    assert np.isnan(got[0]) and got[1] == np.inf and got[2] == 1.0 and got[3] == 2.0  # inf vs 2.0 still differs
    assert nonfinite_alike(_stats_edge("geom", "pmf", "all"), outs, native)[0] is native[0]  # only edge rows


def test_mpmath_decides_where_scipy_is_the_one_that_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """laplace.logpdf(±3.4e38): SciPy takes the log of its underflowed pdf (-inf); JAX's
    -log 2 - |x| is right, and mpmath says so: the variant passes by mpmath's values, and fails
    against SciPy alone. A wrong value where mpmath agrees with SciPy still fails."""
    from farm.reference import exact
    h = _stats_edge("laplace", "logpdf", "x0")
    rec, _, _ = _judge(h)
    assert rec.status == "ok" and rec.facts["mpmath"] >= 2, rec
    with monkeypatch.context() as m:
        m.setattr(exact, "EXACT", {})
        assert _judge(h)[0].status == "fail"

    def off_where_finite(o: np.ndarray, a: list) -> np.ndarray:
        i = int(np.flatnonzero(np.asarray(a[0]) == 1.0)[0])
        o[i] = o[i] + 0.5
        return o
    assert _judge(h, off_where_finite)[0].status == "fail"


def test_mpmath_is_not_asked_at_a_pole_nor_for_a_slow_series_and_nan_is_no_answer() -> None:
    from farm.reference import exact
    assert exact.value("scipy.special.beta", [0.0, -1.0]) is None  # a pole: one side's limit is not truth
    assert exact.value("scipy.special.hyp1f1", [3e38, 1.0, 1.0]) is None  # the series would not end
    assert exact.value("scipy.special.erf", [float("nan")]) is None
    assert exact.value("scipy.special.boxcox", [0.0, 1.1754943508222875e-38]) == pytest.approx(-8.507059e37, rel=1e-6)


# ---- jnp.linalg and scipy.linalg at edge matrices --------------------------------------------

def _matrices(label: str, name: str) -> catalog.Harness:
    hs = [h for h in catalog.select(catalog.Filters(catalog="api", group=(label,)))
          if h.primitive == name and dict(h.key.params).get("edge") == "matrices"]
    assert hs, name
    return hs[0]


def test_an_edge_batch_holds_each_edge_in_a_matrix_of_its_own() -> None:
    """A special value at [0, 0] of each matrix (the rest the operand's domain), then a zero, a
    singular (two equal rows and columns), a 2**66- and a 2**-66-scaled matrix; the SVDs with
    vectors withhold ±inf (they never return), and the withheld values are in the harness's
    identity (a cached result of the full batch cannot stand for the smaller one)."""
    from farm.catalog.api import edge_matrix_names
    from farm.catalog.special import values
    h = _matrices("jnp.linalg", "inv")
    x = np.asarray(h.make_args()[0])
    names = edge_matrix_names("float32")
    assert x.shape == (len(names), 4, 4) and names[-4:] == ["zero", "singular", "huge", "tiny"]
    v = values("float32")
    np.testing.assert_array_equal(x[:len(v), 0, 0], v)
    assert not x[-4].any() and np.array_equal(x[-3][0], x[-3][1]) and np.array_equal(x[-3][:, 0], x[-3][:, 1])
    rest = x[0].ravel()[1:]  # every matrix shares the domain's values off [0, 0]
    assert all(np.array_equal(m.ravel()[1:], rest) for m in x[1:len(v)])
    np.testing.assert_array_equal(x[-2].ravel()[1:], rest * np.float32(2.0 ** 66))
    np.testing.assert_array_equal(x[-1].ravel()[1:], rest * np.float32(2.0 ** -66))
    assert float(x[-2, 0, 0]) * 2.0 ** -66 == float(x[-1, 0, 0]) * 2.0 ** 66
    p = _matrices("jnp.linalg", "pinv")
    y = np.asarray(p.make_args()[0])
    assert not np.isinf(y).any() and y.shape[0] == len(names) - 2
    assert "withheld=inf,-inf" in p.args[0].name and "withheld" not in h.args[0].name
    c = [k for k in catalog.select(catalog.Filters(catalog="api", group=("jnp.linalg",), dtype=("complex64",)))
         if k.primitive == "inv" and dict(k.key.params).get("edge") == "matrices"][0]
    z = np.asarray(c.make_args()[0])  # complex: each value in the real part, then in the imaginary part
    assert z.shape[0] == 2 * len(v) + 4
    np.testing.assert_array_equal(z[:len(v), 0, 0].real, v)
    np.testing.assert_array_equal(z[len(v):2 * len(v), 0, 0].imag, v)
    assert not z[len(v):2 * len(v), 0, 0].real.any()


def test_edge_matrices_are_held_normwise_per_matrix_not_by_the_absolute_band() -> None:
    """inv at its edges: ok; an element of an ordinary matrix 0.1% off fails, and so does an
    error of 1e-21 in the inverse of the 2**66-scaled matrix (entries near 1e-20), which the
    harness's absolute band (1e-6) would have let through."""
    h = _matrices("jnp.linalg", "inv")
    rec, args, outs = _judge(h)
    assert rec.status == "ok", rec.error

    def off(o: np.ndarray, a: list) -> np.ndarray:
        o[11, 1, 1] *= 1.001
        return o
    assert _judge(h, off)[0].status == "fail"

    def off_in_the_small_inverse(o: np.ndarray, a: list) -> np.ndarray:
        assert np.abs(o[-2]).max() < 1e-18
        o[-2, 2, 2] += np.float32(3e-20)
        return o
    rec = _judge(h, off_in_the_small_inverse)[0]
    assert rec.status == "fail" and rec.facts["atol"] == 0.0


def test_a_matrix_numpy_refuses_must_give_some_nan_and_a_non_finite_one_any_answer() -> None:
    """cholesky of the singular matrix: NumPy raises LinAlgError, JAX gives NaN (its documented
    contract): ok; a finite answer there fails. A matrix holding inf that the twin refuses (SciPy's
    check_finite) has no unique answer: any finite value JAX gives there stands (where NumPy
    answers a non-finite matrix in part, JAX is held to those numbers as to any other)."""
    h = _matrices("jnp.linalg", "cholesky")
    assert _judge(h)[0].status in ("ok", "expected_fail")

    def finite_for_singular(o: np.ndarray, a: list) -> np.ndarray:
        o[-3] = np.nan_to_num(o[-3])
        return o
    assert _judge(h, finite_for_singular)[0].status == "fail"

    def garbage_for_inf(o: np.ndarray, a: list) -> np.ndarray:
        o[1] = 7.0  # matrix 1 holds inf at [0, 0]
        return o
    i = _matrices("scipy.linalg", "inv")  # SciPy refuses a non-finite matrix (check_finite): all NaN
    args = i.make_args()
    assert np.isinf(np.asarray(args[0])[1, 0, 0]) and np.isnan(reference_outputs(i, args)[0][1]).all()
    assert _judge(i, garbage_for_inf)[0].status == "ok"

    def finite_for_singular_inv(o: np.ndarray, a: list) -> np.ndarray:
        o[-3] = 7.0  # the singular matrix, finite: NumPy's LinAlgError must show as inf or NaN
        return o
    assert _judge(i, finite_for_singular_inv)[0].status == "fail"


def test_a_matrix_finding_covers_its_matrices_and_is_expected_only_there(monkeypatch: pytest.MonkeyPatch) -> None:
    """eigvalsh's symmetrize_input overflow at float32's largest value is a finding: expected_fail
    with its data, fail without it; a wrong eigenvalue of another matrix still fails beside it."""
    h = _matrices("jnp.linalg", "eigvalsh")
    rec = _judge(h)[0]
    assert rec.status == "expected_fail" and "symmetrize_input" in rec.facts["limitation"]

    def off(o: np.ndarray, a: list) -> np.ndarray:
        o[11, 0] *= 1.01
        return o
    assert _judge(h, off)[0].status == "fail"
    monkeypatch.setattr(known, "MATRIX_EDGE_VALUES", tuple(
        e for e in known.MATRIX_EDGE_VALUES if e.primitive != "jnp.linalg.eigvalsh"))
    assert _judge(h)[0].status == "fail"


def test_another_platform_s_matrices_agree_where_the_answer_is_not_unique_only() -> None:
    """crossexec at edge matrices: a matrix holding inf or an overflowing entry, or a singular one,
    has each algorithm's own answer; an ordinary matrix's wrong value still differs."""
    from farm.judge.edges import nonfinite_alike
    h = _matrices("jnp.linalg", "pinv")
    args = h.make_args()
    x = np.asarray(args[0])
    native = np.asarray(jax.jit(h.fun)(*args))
    other = native.copy()
    wild = [i for i in range(len(x)) if not np.isfinite(x[i]).all() or np.abs(x[i]).max() > 1.8e19]
    other[wild] += 5.0
    other[-3] += 5.0  # the singular matrix
    got = nonfinite_alike(h, [other], [native], args, 2e-5, 1e-6)[0]
    np.testing.assert_array_equal(got[wild], other[wild])
    np.testing.assert_array_equal(got[-3], other[-3])
    other[11, 0, 0] += 1.0
    assert nonfinite_alike(h, [other], [native], args, 2e-5, 1e-6)[0][11, 0, 0] == native[11, 0, 0]


def test_the_twin_answers_matrix_by_matrix_and_a_refusal_is_nan() -> None:
    from farm.catalog.api import _stacked
    ok = (np.ones(2), np.zeros((2, 2), np.int32))
    out = _stacked([ok, None, ok])
    assert out[0].shape == (3, 2) and np.isnan(out[0][1]).all() and out[1].shape == (3, 2, 2)
    assert np.isnan(out[1][1]).all() and out[1][0].tolist() == [[0, 0], [0, 0]]
    with pytest.raises(np.linalg.LinAlgError):
        _stacked([None, None])
