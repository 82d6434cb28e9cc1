"""The one comparison kernel (farm.judge.kernel): what agreeing means, said once, and the
judge's comparisons that ask it."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from farm.judge import accumulation, outputs, tolerance
from farm.judge.kernel import EXACT, Allowed, disagree

NAN, INF = float("nan"), float("inf")


def test_nan_matches_nan_and_an_infinity_only_itself() -> None:
    got = np.array([NAN, INF, -INF, INF, 1.0, NAN], np.float32)
    ref = np.array([NAN, INF, -INF, -INF, INF, 1.0])
    assert disagree(got, ref, Allowed(1.0, 1.0)).tolist() == [False, False, False, True, True, True]


def test_finite_elements_within_atol_plus_rtol_of_the_reference() -> None:
    ref = np.array([100.0, 100.0, 0.0, 0.0])
    got = np.array([101.0, 102.5, 1e-3, 2e-3])
    assert disagree(got, ref, Allowed(rtol=0.01, atol=1e-3)).tolist() == [False, True, False, True]
    assert disagree(got, ref, Allowed(atol=np.array([1.0, 3.0, 0.0, 1.0]))).tolist() == [False, False, True, False]
    assert disagree(got, ref).tolist() == [True] * 4  # EXACT: equal or not


def test_integers_and_bools_are_compared_exactly_in_the_dtype() -> None:
    big = np.array([2**62 + 1], np.int64)
    assert disagree(big, np.array([2**62], np.int64), Allowed(1.0, 1.0)).tolist() == [True]  # not in float64
    assert disagree(np.array([True, False]), np.array([1, 1])).tolist() == [False, True]
    assert disagree(np.array([3.0]), np.array([3.4]), dtype=np.int32).tolist() == [False]  # compared as int32


def test_signed_zeros_only_where_asked() -> None:
    got, ref = np.array([-0.0, 0.0]), np.array([0.0, 0.0])
    assert disagree(got, ref).tolist() == [False, False]
    assert disagree(got, ref, Allowed(signed_zeros=True)).tolist() == [True, False]


def test_a_reference_whose_magnitude_overflows_accepts_nothing_by_accident() -> None:
    """|ref| of a complex128 past float64's range is inf: an infinite result is still no match
    for a finite reference, and with no relative part the absolute one alone decides."""
    big = np.array([1.7e308 - 1.7e308j])
    assert disagree(np.array([INF + 0j]), big, Allowed(rtol=1e-6)).tolist() == [True]
    assert disagree(np.array([1.6e308 - 1.6e308j]), big, EXACT).tolist() == [True]
    assert disagree(big, big, EXACT).tolist() == [False]


def test_the_judges_comparisons_are_the_kernel() -> None:
    rng = np.random.default_rng(0)
    ref = rng.normal(size=64)
    ref[:4] = [NAN, INF, 0.0, 1e-40]
    got = (ref * (1 + rng.choice([0, 1e-7, 1e-3], 64))).astype(np.float32)
    got[4] = NAN
    _, bad = outputs.errors_with_mask(got, ref, 1e-5, 1e-6)
    assert bad.tolist() == disagree(got, ref, Allowed(1e-5, 1e-6)).tolist() and bad.any()
    rounded = ref.astype(np.float32).astype(np.float64)
    rtol = tolerance.allowed(tolerance.Computation(np.float32)).rtol
    tiny = float(ml_dtypes.finfo(np.float32).tiny)
    want = disagree(got.astype(np.float64), rounded, Allowed(rtol, tiny, signed_zeros=True))
    assert tolerance.bad_elements(ref, got, tolerance.Computation(np.float32)).tolist() == want.tolist()
    band = accumulation.Band("reduce_sum", 8, np.full(64, 1e-4))
    assert (~accumulation.within(got, ref, band)).tolist() == disagree(got, ref, Allowed(atol=band.band)).tolist()
