"""Failure signatures (farm.analysis.signatures): what varies by accident is dropped, what
tells causes apart is kept, and the key is the same wherever it is computed."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from farm.analysis.signatures import NO_SIGNATURE, Signature, normalize, numeric_class, signature, ulp_band
from farm.results import BAD, STATUSES


def rec(status: str = "error", error: str | None = "boom", error_type: str | None = "ValueError",
        stage: str = "lower", platform: str = "cpu", **kw: Any) -> dict[str, Any]:
    return {"stage": stage, "platform": platform, "status": status, "error_type": error_type, "error": error,
            "metrics": kw.pop("metrics", {}), "facts": kw.pop("facts", {}), **kw}


def mismatch(error: str = "output 0: 3 of 64 elements differ from the float64 reference", **kw: Any) -> dict[str, Any]:
    return rec("fail", error, "Mismatch", stage="compare", **kw)


@pytest.mark.parametrize("status", STATUSES)
def test_only_bad_statuses_have_a_signature(status: str) -> None:
    s = signature(rec(status), primitives=["exp"])
    assert (s is None) == (status in NO_SIGNATURE)
    assert (s is not None) == (status in BAD)


def test_accidents_are_dropped() -> None:
    a = rec(error="Cannot reshape f32[3,4] at 0x7f3a2b1c0 into (12, 1) in /usr/lib/python3/x.py:12 "
                  "for 'jit_exp_float32_3x4' (id 9f8e7d6c5b4a3921)")
    b = rec(error="Cannot reshape f32[8] at 0x55d1 into (2, 2, 2) in /home/u/site/y.py:301 "
                  "for 'jit_exp_float32_8' (id 0123456789abcdef)", platform="tpu")
    sa, sb = signature(a, primitives=["reshape"]), signature(b, primitives=["reshape"])
    assert sa == sb and sa.key == sb.key
    for gone in ("3,4", "0x7f3a", "python3", "jit_exp", "9f8e7d"):
        assert gone not in sa.message
    assert sa.message.startswith("Cannot reshape <dtype>[…]") and sa.error_type == "ValueError"


def test_one_cause_across_dtypes_is_one_signature() -> None:
    """The harnesses of a primitive differ mostly by dtype: the dtype is listed by the
    cluster (farm.analysis.clusters), not part of the signature."""
    a = rec(error="exp has no lowering for float32; output f32[3] vs bf16[3]")
    b = rec(error="exp has no lowering for bfloat16; output bf16[8] vs f32[8]")
    assert signature(a, primitives=["exp"]).key == signature(b, primitives=["exp"]).key


@pytest.mark.parametrize("change", [
    {"error_type": "TypeError"},                      # the error type is kept
    {"error": "Cannot broadcast f32[3,4]"},           # the words are the message
    {"stage": "compile"},
    {"status": "crashed"},
])
def test_causes_stay_apart(change: dict[str, Any]) -> None:
    base = rec(error="Cannot reshape f32[3,4]")
    assert signature(base, primitives=["x"]).key != signature({**base, **change}, primitives=["x"]).key


def test_primitives_are_part_of_the_key_and_their_order_is_not() -> None:
    r = rec()
    assert signature(r, primitives=["a", "b"]).key == signature(r, primitives=["b", "a", "a"]).key
    assert signature(r, primitives=["a"]).key != signature(r, primitives=["b"]).key
    # a result row of the store carries its harness's primitive
    assert signature({**r, "primitive": "sin"}).primitives == ("sin",)


def test_platform_is_not_part_of_the_key_unless_the_error_names_it() -> None:
    cpu, tpu = rec(platform="cpu"), rec(platform="tpu")
    assert signature(cpu).key == signature(tpu).key
    said = [rec(error=f"no lowering rule for platform {p}", platform=p) for p in ("cuda", "tpu")]
    assert signature(said[0]).key != signature(said[1]).key


def test_key_is_short_hex_and_the_same_in_another_process() -> None:
    s = signature(mismatch(metrics={"max_ulp_err": 113.0, "mismatches": 3.0}), primitives=["log1p"])
    assert len(s.key) == 12 and int(s.key, 16) >= 0
    code = ("import json,sys; from farm.analysis.signatures import Signature; "
            "print(Signature.from_dict(json.loads(sys.argv[1])).key)")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code, json.dumps(s.to_dict())], env=env, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == s.key
    assert Signature.from_dict(s.to_dict()) == s


def test_normalize_keeps_words_and_error_lines_only() -> None:
    assert normalize(None) == "" and normalize("") == ""
    assert normalize("first line 12\nsecond line") == "first line N"
    assert normalize("got nan, want 1.5e-3 at index -4") == "got N, want N at index N"
    assert normalize("output 0 is float32[3], tracing promised float64[3]") == (
        "output N is <dtype>[…], tracing promised <dtype>[…]")
    assert normalize("x64 and float8_e4m3fn, int4 and uint32") == "x64 and <dtype>, <dtype> and <dtype>"
    assert normalize("x" * 1000) == "x" * 240


# --------------------------------------------------------------------------- numeric classes
@pytest.mark.parametrize("counts,kind", [
    ({"nan": 2, "inf": 1}, "nan"),          # the worst kind wins
    ({"finite": 1}, "finite"),
    ({"inf": 3, "sign": 1}, "inf"),
    ({"sign": 4}, "sign"),
    ({"flushed": 4}, "flushed"),
])
def test_numeric_kind_from_recorded_counts(counts: dict[str, int], kind: str) -> None:
    r = mismatch(metrics={"max_ulp_err": 1e9, "mismatches": 4.0}, facts={"disagreement": {
        "elements": 64, "bad": 4, **counts}})
    assert numeric_class(r) == f"{kind}/few"


@pytest.mark.parametrize("ulp,band", [(9.0, "ulp≤16"), (113.0, "ulp≤1k"), (1024.0, "ulp≤1k"),
                                      (3000.0, "ulp≤1M"), (1e7, "ulp>1M")])
def test_ulp_bands(ulp: float, band: str) -> None:
    assert ulp_band(ulp) == band
    r = mismatch(metrics={"max_ulp_err": ulp, "mismatches": 64.0}, facts={"disagreement": {"elements": 64, "bad": 64}})
    assert numeric_class(r) == f"{band}/all"


@pytest.mark.parametrize("bad,elements,extent", [(1, 64, "one"), (6, 64, "few"), (7, 64, "most"),
                                                 (64, 64, "all"), (1, 1, "all")])
def test_extent(bad: int, elements: int, extent: str) -> None:
    r = mismatch(metrics={"max_ulp_err": 20.0}, facts={"disagreement": {"elements": elements, "bad": bad}})
    assert numeric_class(r) == f"ulp≤1k/{extent}"


def test_the_class_separates_signatures() -> None:
    few = mismatch(metrics={"max_ulp_err": 20.0, "mismatches": 3.0})
    nan = mismatch(metrics={"max_ulp_err": 20.0, "mismatches": 3.0}, facts={"disagreement": {"nan": 3, "bad": 3}})
    assert signature(few, primitives=["exp"]).key != signature(nan, primitives=["exp"]).key


def test_older_records_without_counts_get_what_can_be_known() -> None:
    # no facts["disagreement"]: ULP band from the metrics, the extent from the error line
    assert numeric_class(mismatch(metrics={"max_ulp_err": 113.0, "mismatches": 64.0},
                                  error="output 0: 64 of 64 elements differ")) == "ulp≤1k/all"
    assert numeric_class(mismatch(metrics={"max_ulp_err": "inf", "mismatches": 2.0}, error="2 differ")) == "nonfinite"
    assert numeric_class(mismatch(metrics={}, error="4 elements differ")) == ""
    exact = rec("fail", "3 elements differ", "Mismatch", stage="crossexec",
                metrics={"max_ulp_err": "inf", "mismatches": 3.0}, facts={"exact": True})
    assert numeric_class(exact) == "exact"
    inv = rec("fail", "invariant error 0.3", "Mismatch", stage="compare", metrics={"invariant_err": 0.3},
              facts={"against": "invariant"})
    assert numeric_class(inv) == "invariant"
    # the jaxpr verdict's invariant failure also has the (agreeing) elements' metrics
    inv2 = rec("fail", "invariant ||A V - U diag(s)|| / ||A|| = 0.1 > 1e-5", "Mismatch", stage="crossexec",
               metrics={"invariant_err": 3.0, "max_ulp_err": 12.0, "mismatches": 0.0})
    assert numeric_class(inv2) == "invariant"


def test_errors_that_are_not_disagreements_have_no_class() -> None:
    assert numeric_class(rec("error", metrics={"max_ulp_err": 5.0})) == ""
    assert numeric_class(rec("fail", "expected error; got ok", "UnexpectedFailure")) == ""
    assert signature(rec()).numeric == ""


def test_an_xhost_record_is_classed_by_the_comparison_its_error_names() -> None:
    r = rec("fail", "vs cpu host: 3 elements differ; max abs err inf", "Mismatch", stage="xhost",
            metrics={"reference_max_ulp_err": 2.0, "reference_mismatches": 0.0, "cpu_host_max_ulp_err": "inf",
                     "cpu_host_mismatches": 3.0},
            facts={"vs_reference": "ok", "vs_cpu_host": "fail",
                   "cpu_host_disagreement": {"elements": 3, "bad": 3, "exact": 1}})
    assert numeric_class(r) == "exact/all"
    older = {**r, "facts": {"vs_cpu_host": "fail"}}  # stored before the counts were
    assert numeric_class(older) == "nonfinite"


def test_an_older_integer_record_is_exact_not_nonfinite() -> None:
    r = mismatch(metrics={"max_ulp_err": "inf", "mismatches": 2.0}, error="2 differ", dtype="int32")
    assert numeric_class(r) == "exact"
