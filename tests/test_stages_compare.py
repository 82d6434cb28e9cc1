"""How a numeric failure disagrees (farm.stages.compare.disagreement), recorded with every
failing comparison so its signature can say "NaN where a finite value is expected" or
"off by ~100 ULP on every element" (farm.analysis.signatures); and the hole it showed: a
comparison against an infinite expected value accepted any finite value or the other
infinity (the tolerance scales with |expected|)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from farm import reference as R
from farm.judge import jaxpr as J, tolerance as T
from farm.analysis.signatures import numeric_class, signature
from farm.judge import outputs as compare

BF16 = ml_dtypes.bfloat16


def run(got: list[float], want: list[float], dtype=np.float32, rtol: float = 1e-6, atol: float = 1e-6
        ) -> compare.Compared:
    return compare.compared([np.array(got, dtype)], [np.array(want)], platform="cpu", against="reference",
                       rtol=rtol, atol=atol, exact=False)


@pytest.mark.parametrize("got,want", [
    ([np.inf], [-np.inf]),      # the other infinity
    ([3e38], [np.inf]),         # a finite value where an infinity is expected
    ([np.inf], [1.0]),
    ([np.nan], [1.0]),
    ([1.0], [np.nan]),
])
def test_an_unmatched_nan_or_infinity_is_a_mismatch(got: list[float], want: list[float]) -> None:
    r = run(got, want)
    assert r.status == "fail" and r.facts["disagreement"]["bad"] == 1


def test_matching_nans_and_infinities_agree() -> None:
    assert run([np.nan, np.inf, -np.inf, 1.0], [np.nan, np.inf, -np.inf, 1.0]).status == "ok"
    assert "disagreement" not in run([1.0], [1.0]).facts


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16])
def test_counts_say_how_each_element_disagrees(dtype) -> None:
    tiny = float(ml_dtypes.finfo(dtype).tiny)
    got = [np.nan, 1.0, np.inf, -2.0, 0.0, 5.0, 7.0, 1.0]
    want = [1.0, np.nan, 4.0, 2.0, tiny / 4, 6.0, 7.0, 1.0]
    d = run(got, want, dtype, rtol=1e-2, atol=0.0).facts["disagreement"]
    assert d == {"elements": 8, "bad": 6, "nan": 1, "finite": 1, "inf": 1, "sign": 1, "flushed": 1}


def test_counts_sum_over_outputs_and_integers_are_exact() -> None:
    counts: dict[str, int] = {}
    status, _, m = compare.compare_outputs([np.array([1, 2, 3], np.int32), np.array([1.0, 2.0], np.float32)],
                                           [np.array([1, 2, 4]), np.array([1.0, np.nan])], 0.0, 0.0, False,
                                           counts=counts)
    assert status == "fail" and m["mismatches"] == 2
    assert counts == {"elements": 5, "bad": 2, "exact": 1, "finite": 1}


# --------------------------------------------------------------------------- through the jaxpr verdict
def judged(f, x, tamper):
    cj = jax.make_jaxpr(f)(x)
    outs = [np.asarray(o) for o in jax.jit(f)(x)] if isinstance(jax.eval_shape(f, x), tuple) \
        else [np.asarray(jax.jit(f)(x))]
    return J.judge_jaxpr(cj, [x], tamper(outs))


def record(v) -> dict:
    return {"stage": "compare", "platform": "cpu", "status": v.status, "error_type": "Mismatch", "error": v.error,
            "metrics": v.metrics, "facts": v.facts}


def test_the_verdict_records_the_class_of_a_disagreement() -> None:
    x = np.linspace(0.1, 2.0, 64, dtype=np.float32)

    def nan_one(outs):
        o = outs[0].copy()
        o[3] = np.nan
        return [o]

    def off_everywhere(outs):  # ~100 ULP on every element
        return [(outs[0].astype(np.float64) * (1 + 100 * 2.0 ** -23)).astype(np.float32)]

    v = judged(jnp.log1p, x, nan_one)
    assert v.status == "fail" and v.facts["disagreement"] == {"elements": 64, "bad": 1, "nan": 1}
    assert numeric_class(record(v)) == "nan/one"
    v = judged(jnp.log1p, x, off_everywhere)
    assert numeric_class(record(v)) == "ulp≤1k/all"
    assert judged(jnp.log1p, x, lambda outs: outs).facts.get("disagreement") is None
    a, b = (signature(record(judged(jnp.log1p, x, t)), primitives=["log1p"]) for t in (nan_one, off_everywhere))
    assert a.key != b.key
