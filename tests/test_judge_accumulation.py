"""The summation error model (farm.judge.accumulation): a sum accumulated at the operand's
precision in any tree order passes, even with the wrong sign; a dropped or doubled term
larger than the band still fails."""
from __future__ import annotations

import math

import pytest

import jax
import ml_dtypes
import numpy as np
from jax import lax

from farm.judge import accumulation
from farm.judge.jaxpr import judge_jaxpr
from farm.reference.evaluator import Tap

BF16 = ml_dtypes.bfloat16


def _sum(x: np.ndarray, axes: tuple[int, ...]):  # noqa: ANN202
    f = lambda v: lax.reduce_sum_p.bind(v, axes=axes)  # noqa: E731
    return f, jax.make_jaxpr(f)(x)


def test_a_bfloat16_sum_off_in_sign_but_within_its_rounding_passes_and_says_why() -> None:
    # the fuzz false alarm: 31x31x34 normal bfloat16 values, summed at bfloat16 precision
    x = np.random.default_rng(3).standard_normal((31, 31, 34)).astype(BF16)
    _, cj = _sum(x, (0, 1, 2))
    ref = float(np.sum(x.astype(np.float64)))
    mag = float(np.sum(np.abs(x.astype(np.float64))))
    band = (math.ceil(math.log2(x.size)) + 1) * 2.0 ** -8 * mag
    wrong_sign = np.array(-ref - 20.0 * np.sign(ref), BF16)  # about 2|ref| + 20 off: far past the old tolerance
    assert abs(float(wrong_sign) - ref) < band
    v = judge_jaxpr(cj, [x], [wrong_sign])
    assert v.status == "ok", v.error
    acc = v.facts["accumulation"]["0"]
    assert acc["primitive"] == "reduce_sum" and acc["terms"] == x.size and acc["accepted"] == 1
    assert acc["max_band"] == pytest.approx(band, rel=1e-6)
    # past the band it fails, whatever the sign
    assert judge_jaxpr(cj, [x], [np.array(ref + 1.5 * band, np.float32).astype(BF16)]).status == "fail"


def test_xla_cpu_sums_of_every_float_dtype_pass() -> None:
    rng = np.random.default_rng(0)
    for shape, axes in (((31, 31, 34), (0, 1, 2)), ((32674,), (0,)), ((200, 41), (1,)), ((5000,), (0,))):
        for dt in (BF16, np.float16, np.float32):
            x = rng.standard_normal(shape).astype(dt)
            f, cj = _sum(x, axes)
            v = judge_jaxpr(cj, [x], [np.asarray(jax.jit(f)(x))])
            assert v.status == "ok", (shape, np.dtype(dt).name, v.error)


def test_a_dropped_or_doubled_term_still_fails_where_it_is_larger_than_the_band() -> None:
    rng = np.random.default_rng(1)
    for dt, n in ((np.float32, 39), (np.float32, 5001), (np.float16, 41)):
        x = rng.standard_normal((7, n)).astype(dt)
        x[:, -1] = np.asarray(3.0, dt)  # a term well above the band of these sums
        f, cj = _sum(x, (1,))
        dropped = np.asarray(jax.jit(f)(x[:, :-1]))
        doubled = np.asarray(jax.jit(f)(np.concatenate([x, x[:, -1:]], axis=1)))
        assert judge_jaxpr(cj, [x], [dropped]).status == "fail", (np.dtype(dt).name, n)
        assert judge_jaxpr(cj, [x], [doubled]).status == "fail", (np.dtype(dt).name, n)


def test_the_band_of_a_contraction_is_over_the_products_magnitudes() -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 50)).astype(np.float32)
    b = rng.standard_normal((50, 4)).astype(np.float32)
    cj = jax.make_jaxpr(lambda a, b: jax.jit(lambda p, q: p @ q)(a, b))(a, b)  # through a pjit
    [(i, eqn)] = accumulation.producers(cj.jaxpr).items()
    assert i == 0 and eqn.primitive.name == "dot_general"
    tap = Tap("dot_general", (a.astype(np.float64), b.astype(np.float64)), (), dict(eqn.params))
    band = accumulation.band(eqn, tap)
    assert band.terms == 50
    want = (math.ceil(math.log2(50)) + 1) * 2.0 ** -24 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    np.testing.assert_allclose(band.band, want, rtol=1e-12)


def test_an_integer_sum_has_no_band() -> None:
    x = np.arange(40, dtype=np.int32).reshape(4, 10)
    f, cj = _sum(x, (1,))
    [(_, eqn)] = accumulation.producers(cj.jaxpr).items()
    tap = Tap("reduce_sum", (x,), (), dict(eqn.params))
    assert accumulation.band(eqn, tap) is None
    assert judge_jaxpr(cj, [x], [np.asarray(jax.jit(f)(x)) + np.array([0, 0, 0, 1], np.int32)]).status == "fail"


def _prod(x: np.ndarray, axes: tuple[int, ...]):  # noqa: ANN202
    f = lambda v: lax.reduce_prod_p.bind(v, axes=axes)  # noqa: E731
    return f, jax.make_jaxpr(f)(x)


def test_a_product_whose_partial_products_over_and_underflow_depends_on_its_order() -> None:
    # 200 factors of 2.5 and 200 of 0.1 in float16: one order overflows, another underflows, inf * 0 is NaN
    x = np.concatenate([np.full(200, 2.5), np.full(200, 0.1)]).astype(np.float16)
    _, cj = _prod(x, (0,))
    assert judge_jaxpr(cj, [x], [np.asarray(np.float16(0.0))]).status == "ok"  # the exact product, rounded
    for got in (np.float16(np.nan), np.float16(np.inf)):
        v = judge_jaxpr(cj, [x], [np.asarray(got)])
        assert v.status == "ok", (got, v.error)
        assert v.facts["accumulation"]["0"]["order_dependent"] == 1
    assert judge_jaxpr(cj, [x], [np.asarray(np.float16(1.0))]).status == "fail"  # a finite value is no overflow


def test_a_product_that_cannot_overflow_is_held_to_its_value() -> None:
    x = np.full(10, 2.0, np.float16)
    _, cj = _prod(x, (0,))
    assert judge_jaxpr(cj, [x], [np.asarray(np.float16(np.nan))]).status == "fail"
    assert judge_jaxpr(cj, [x], [np.asarray(np.float16(1024.0))]).status == "ok"
    y = np.random.default_rng(4).uniform(0.9, 1.1, (3, 40)).astype(np.float32)
    f, cj = _prod(y, (1,))
    dropped = np.asarray(jax.jit(f)(y[:, :-1] * np.float32(1.0))) * np.float32(1.0)
    dropped = dropped * np.asarray(1.0 / 1.05, np.float32)  # a factor of ~1.05 too few
    assert judge_jaxpr(cj, [y], [dropped.astype(np.float32)]).status == "fail"


def test_a_partial_sum_or_product_that_overflows_in_some_order_is_no_failure() -> None:
    """max + max - max is inf in float32 summed in that order, max in float64: a sum whose terms'
    magnitudes pass the largest finite value, or a product whose large factors alone overflow, may
    be inf on a device (``--edges`` on reduce_sum/reduce_prod over two axes flagged both); a wrong
    finite value there still fails, and so does anything but inf where a factor is infinite."""
    top = np.finfo(np.float32).max
    x = np.array([top, top, -top, 1.0], np.float32)
    f = lambda v: lax.reduce_sum_p.bind(v, axes=(0,), out_sharding=None)  # noqa: E731
    cj = jax.make_jaxpr(f)(x)
    assert judge_jaxpr(cj, [x], [np.asarray(np.float32(top))]).status == "ok"
    v = judge_jaxpr(cj, [x], [np.asarray(np.float32(np.inf))])
    assert v.status == "ok" and v.facts["accumulation"]["0"]["order_dependent"] == 1, v.error
    assert judge_jaxpr(cj, [x], [np.asarray(np.float32(-np.inf))]).status == "ok"
    y = np.array([top, 2.5, 2.5, 1e-7, 0.5], np.float32)  # exact: 3.8e32, finite; max * 2.5 first is inf
    _, pj = _prod(y, (0,))
    assert judge_jaxpr(pj, [y], [np.asarray(np.float32(np.inf))]).status == "ok"
    assert judge_jaxpr(pj, [y], [np.asarray(np.float32(1.0))]).status == "fail"
    z = np.array([np.inf, 2.0, 0.5], np.float32)  # inf in every order
    _, zj = _prod(z, (0,))
    assert judge_jaxpr(zj, [z], [np.asarray(np.float32(0.0))]).status == "fail"
