"""Derivatives of serialized artifacts (``farm sweep --vjp``: farm.stages.gradients,
farm.pipeline.gradients, farm.judge.gradients): a harness's export serialized with its vjp
modules, read back, every platform's vjp run on the CPU and judged against ``jax.vjp`` and
finite differences of the float64 reference. A wrong derivative rule (planted) is caught by
the finite differences alone, while the same run without it is clean."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from farm import catalog
from farm.cache import key as digest
from farm.pipeline.gradients import run_gradients
from farm.results import Options, Record
from farm.stages import trace
from tests.helpers.fresh import run_json

ROOT = Path(__file__).resolve().parents[1]


def _one(name: str) -> catalog.Harness:
    return catalog.select(catalog.Filters.parse(name=name))[0]


def _gradients(h: catalog.Harness, order: int = 1, platforms: tuple[str, ...] = ("cpu", "tpu")) -> dict:
    """{(stage, platform): record} of ``h``'s vjp stages, run here as the pipeline runs them."""
    from farm.stages import export

    tr = trace.run(h, h.make_args())
    ex = export.run(tr, platforms)
    recs = run_gradients(h, tr.handle.jitted, tr.handle.dyn, tr.handle.traced.jaxpr,
                         ex.handle.exported if ex.ok else None, order)
    return {(r.stage, r.platform): r for r in recs}


_SIN = ("import json\nfrom farm.faults import plant_from_env\nplant_from_env()\n"
        "from farm import catalog\nfrom farm.pipeline import run_harness\nfrom farm.results import Options\n"
        "h = catalog.select(catalog.Filters.parse(name='sin_float32_3x4'))[0]\n"
        "o = run_harness(h, Options(platforms=('cpu', 'tpu'), repeats=1, vjp=2))\n"
        "print(json.dumps([[r.stage, r.platform, r.status, r.error or '', r.facts.get('against_jax')]\n"
        "                  for r in o.records]))\n")


def test_a_wrong_derivative_rule_is_caught_by_finite_differences_alone() -> None:
    clean = run_json(_SIN)
    planted = run_json(_SIN, "wrong_jvp:sin")
    grads = lambda rows: {(s, p): (st, err, aj) for s, p, st, err, aj in rows if s in ("vjp", "vjp2")}  # noqa: E731
    assert all(st == "ok" for s, p, st, _, _ in clean), [r for r in clean if r[2] != "ok"]
    assert set(grads(clean)) == {("vjp", "export"), ("vjp", "cpu"), ("vjp", "tpu"), ("vjp2", "cpu"), ("vjp2", "tpu")}
    # planted: every value is still right (trace to compare and crossexec pass) ...
    assert all(st == "ok" for s, p, st, _, _ in planted if s not in ("vjp", "vjp2"))
    for where, (st, err, against_jax) in grads(planted).items():
        if where == ("vjp", "export"):
            assert st == "ok"
            continue
        # ... the artifact's vjp agrees with jax.vjp (the same wrong rule); finite differences disagree
        assert st == "fail", where
        assert "finite differences" in err and "jax.vjp" not in err, err
        assert against_jax["max_abs_err"] <= against_jax["atol"]


def test_integer_inputs_and_outputs_take_float0_cotangents() -> None:
    by = _gradients(_one("dynamic_slice_float32_2x3x4_starts=inside"), order=2)  # int start indices
    for p in ("cpu", "tpu"):
        assert by[("vjp", p)].status == "ok", by[("vjp", p)].error
        assert by[("vjp", p)].facts["float0_inputs"] == [1, 2, 3]
        assert by[("vjp2", p)].status == "ok", by[("vjp2", p)].error
    by = _gradients(_one("top_k_float32_3x6_k=3"))  # values and int32 indices
    rec = by[("vjp", "cpu")]
    assert rec.status == "ok", rec.error
    assert rec.facts["float0_outputs"] == [1]
    assert [c["what"] for c in rec.facts["finite_differences"]] == ["u·Jᵀct"]


@pytest.mark.parametrize("name, reason", [("argmax_float32_3x4x5_axis=0", "no floating-point output"),
                                          ("add_int32_3x4", "no floating-point input"),
                                          ("sin_complex64_3x4", "complex values")])
def test_what_cannot_be_differentiated_is_skipped_with_its_reason(name: str, reason: str) -> None:
    recs = list(_gradients(_one(name)).values())
    assert [(r.stage, r.platform, r.status) for r in recs] == [("vjp", "any", "skipped")]
    assert recs[0].facts["reason"].startswith(reason)


def test_jax_refusing_reverse_mode_is_a_known_gap() -> None:
    by = _gradients(_one("while_loop_float32_3x4"))
    rec = by[("vjp", "export")]
    assert rec.status == "expected_fail" and "while_loop" in rec.facts["limitation"]


def test_a_module_without_a_platform_branch_is_run_once() -> None:
    by = _gradients(_one("exp_float32_3x4"), platforms=("cpu", "cuda", "rocm", "tpu"))
    assert by[("vjp", "export")].facts["branches"] == {"1": False}
    assert by[("vjp", "cpu")].status == "ok"
    for p in ("cuda", "rocm", "tpu"):
        assert by[("vjp", p)].status == "ok" and by[("vjp", p)].facts["same_module_as"] == "cpu"


def test_the_result_key_changes_with_vjp_and_not_without_it() -> None:
    assert "vjp" not in Options().to_dict()
    assert Options.from_dict(Options(vjp=2).to_dict()).vjp == 2
    # the options digest of a run without --vjp (or --pallas-targets, --check-determinism,
    # --compositions, --edges) is the one a farm without those fields computed
    before = dataclasses.make_dataclass("Options", [(f.name, f.type, dataclasses.field(default=f.default))
                                                    for f in dataclasses.fields(Options)
                                                    if f.name not in ("vjp", "pallas_targets", "determinism",
                                                                      "compositions", "edges")],
                                        frozen=True)
    assert digest.options_digest(Options()) == digest.options_digest(before())
    assert digest.options_digest(Options(vjp=1)) != digest.options_digest(Options())
    assert digest.options_digest(Options(vjp=2)) != digest.options_digest(Options(vjp=1))
    assert digest.options_digest(Options(pallas_targets=("tpu:v5e",))) != digest.options_digest(Options())
    with pytest.raises(ValueError):
        Options(vjp=3)


@pytest.mark.parametrize("order", ["3", "-1", "two"])
def test_an_order_the_farm_does_not_judge_is_one_line_and_nothing_is_stored(order: str, tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    res = subprocess.run([sys.executable, "-m", "farm", "sweep", "--primitive", "sin", "--vjp", order,
                          "--db", f"sqlite:///{db}"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"farm: error: --vjp {order}:"), lines
    assert not db.exists()


def test_a_module_branches_only_where_a_platform_computes_differently() -> None:
    from farm.stages.parts import branched

    case = ('func.func public @main(%arg0: tensor<i32>, %arg1: tensor<f32>) -> tensor<f32> {\n'
            '  %0 = "stablehlo.case"(%arg0) ({\n    stablehlo.return %c : tensor<i32>\n  }, {\n'
            '    stablehlo.return %c_0 : tensor<i32>\n  }) : (tensor<i32>) -> tensor<i32>\n'
            '  %1 = "stablehlo.case"(%0) ({\n    %2 = stablehlo.sine %arg1 : tensor<f32> loc(#loc3)\n'
            '    stablehlo.return %2 : tensor<f32>\n  }, {\n    %2 = stablehlo.sine %arg1 : tensor<f32> loc(#loc9)\n'
            '    stablehlo.return %2 : tensor<f32>\n  }) : (tensor<i32>) -> tensor<f32>\n  return %1 : tensor<f32>\n}')
    assert not branched(case)  # the same ops in every branch (jax's rule map aside)
    assert branched(case.replace("%2 = stablehlo.sine %arg1 : tensor<f32> loc(#loc9)",
                                 "%2 = stablehlo.cosine %arg1 : tensor<f32> loc(#loc9)"))
    assert branched(case.replace("return %1", "return %0"))  # the rule map's result used as a value
    assert branched(case.replace("%1 = ", "%1:2 = ").replace('"stablehlo.case"(%0) ({', "stablehlo.case(%0) ({"))
    by = _gradients(_one("eigh_float32_4x4"), platforms=("cpu", "cuda", "rocm", "tpu"))  # LAPACK, cuSOLVER...
    assert by[("vjp", "export")].facts["branches"] == {"1": True}
    assert "same_module_as" not in by[("vjp", "cuda")].facts


def test_what_finite_differences_cannot_judge_is_said_and_judged_against_jax_alone() -> None:
    rec = _gradients(_one("reduce_precision_float32_3x4_format=bf16"))[("vjp", "cpu")]  # a staircase in float64
    assert rec.status == "ok", rec.error
    assert rec.facts["finite_differences"].startswith("not judged: reduce_precision rounds to a float grid")
    assert rec.facts["against_jax"]["agrees"]


def test_where_float64_is_not_the_dtype_the_compiled_jax_vjp_has_the_last_word() -> None:
    from farm.pipeline.gradients import COMPILED

    # infinities, subnormals and overflowing intermediates: the float64 jax.vjp differs from the
    # float16 one, which agrees with the artifact's
    rec = _gradients(_one("special_values.div_float16_361_361"))[("vjp", "cpu")]
    assert rec.status == "ok", rec.error
    assert rec.facts["against_jax"]["how"] == COMPILED


def test_where_nothing_here_runs_the_derivative_it_is_not_runnable_here_not_an_error() -> None:
    # float16 lu: the CPU's LAPACK has no float16 kernel (jax.vjp does not compile here) and the
    # artifact's vjp modules call the other platforms' solvers: nothing here to judge
    h = _one("lu_float16_4x4")
    if not trace.run(h, h.make_args()).ok:  # jax 0.12 refuses half-precision linalg when tracing
        from farm.judge.limitations import judge_record

        rec = judge_record(h, trace.run(h, h.make_args()))
        assert rec.status == "expected_fail" and "does not accept dtype" in rec.facts["limitation"], rec
        pytest.skip("this jax does not trace float16 lu (HALF_REFUSED): no derivative to leave unrun")
    by = _gradients(h, order=2, platforms=("cuda", "rocm", "tpu"))
    assert not [k for k, r in by.items() if r.status in ("error", "fail")], \
        {k: r.error for k, r in by.items() if r.status in ("error", "fail")}
    rec = by[("vjp2", "expected")]
    assert rec.status == "not_runnable_here" and "Unsupported dtype float16" in rec.error


def test_where_a_pullback_ran_a_jax_vjp_that_raises_stays_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from farm.judge import gradients as judge
    from farm.stages import compile as compile_stage, gradients

    def broken(*args: object) -> None:
        raise RuntimeError("jax.vjp broke")

    monkeypatch.setattr(judge, "expected", broken)
    monkeypatch.setattr(gradients, "expected", broken)
    by = _gradients(_one("sin_float32_3x4"))
    assert by[("vjp", "expected")].status == "error" and "jax.vjp broke" in by[("vjp", "expected")].error
    cpu = by[("vjp", "cpu")]  # still judged by finite differences, and compiled as every pullback is
    assert cpu.status == "ok" and cpu.facts["finite_differences"]
    assert cpu.facts["compiler_options"] == compile_stage.check_options()


def _bare_assert_in_kernel_jvp() -> Exception:
    """jax.jvp of a Pallas kernel that calls program_id: the bare assertion of jax-ml/jax#37521."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):  # noqa: ANN001, ANN202
        o_ref[...] = x_ref[...] * 2.0 + pl.program_id(0).astype(jnp.float32)

    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    f = pl.pallas_call(kernel, grid=(2,), in_specs=[spec], out_specs=spec,
                       out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32), interpret=True)
    x = jnp.ones((16, 128), jnp.float32)
    try:
        jax.vjp(f, x)
    except Exception as e:  # noqa: BLE001
        return e
    raise AssertionError("jax.vjp of the kernel succeeded: jax-ml/jax#37521 is fixed in this jax")


def test_a_bare_exception_is_matched_by_where_it_was_raised() -> None:
    """A known gap that names a bare assertion by the function raising it explains that one,
    and not the same bare AssertionError raised anywhere else."""
    from farm.judge.gradients import known_gap, raised_in
    from farm.stages.record import failure

    try:
        e = _bare_assert_in_kernel_jvp()
    except AssertionError as fixed:
        pytest.skip(str(fixed))
    rec = failure(Record, "vjp", "export", e, 0.0)
    assert rec.error == "AssertionError"
    assert raised_in(rec) == "AssertionError (raised in jax/_src/pallas/core.py:axis_frame)"
    judged = known_gap(rec)
    assert judged.status == "expected_fail" and "37521" in judged.facts["limitation"]

    def elsewhere() -> None:
        raise AssertionError  # bare, as jax's assertion (pytest rewrites an assert statement's message)

    try:
        elsewhere()
    except AssertionError as other:
        rec2 = failure(Record, "vjp", "export", other, 0.0)
    assert raised_in(rec2).endswith(":elsewhere)")
    assert known_gap(rec2).status == "error"
    with_message = Record("vjp", "export", "error", error_type="AssertionError", error="shapes differ", detail=rec.detail)
    assert raised_in(with_message) == "shapes differ" and known_gap(with_message).status == "error"


def test_a_known_gap_of_an_older_jax_holds_only_there(monkeypatch) -> None:  # noqa: ANN001
    """jax 0.5.3's Exported.vjp of a variadic reduce with an integer output hands jax.vjp a float0
    Zero (a version sweep's 4 errors): expected there, and the same error on another jax stays
    an ``error``."""
    from farm.catalog import known
    from farm.judge.gradients import known_gap

    rec = Record("vjp", "export", "error", error_type="TypeError",
                 error="Argument 'Zero(ShapedArray(float0[3,4,5]))' of type '<class 'jax._src.ad_util.Zero'>' "
                       "is not a valid JAX type")
    monkeypatch.setattr(known, "running_jax", lambda: "0.5.3")
    assert known_gap(rec).status == "expected_fail"
    monkeypatch.setattr(known, "running_jax", lambda: "0.12.0.1")
    assert known_gap(rec).status == "error"


def test_a_saturated_derivative_that_came_out_zero_is_seen_element_by_element() -> None:
    """tanh in float32 at |x| in 5..30: JAX's derivative (1 - ans**2) is 0 from |x| = 9, where the
    true one (6e-8) is representable. The directional check alone sums it away beside x = 5's 2e-4;
    held element by element, relatively, it is a fail, explained by TANH_GRAD; atan at the same
    inputs agrees everywhere."""
    tanh = _gradients(_one("saturating.tanh_float32_12"))[("vjp", "cpu")]
    per = next(c for c in tanh.facts["finite_differences"] if c["what"] == "per element")
    assert tanh.status == "fail" and "per element" in tanh.error, tanh.error
    lim = next(lim for lim in _one("saturating.tanh_float32_12").limitations if lim.stage == "vjp")
    assert lim.applies("cpu", "float32") and lim.expects(tanh.status, tanh.error_type, tanh.error)
    assert per["wrong"] >= 2 and per["judged"] > per["wrong"]  # x = ±9 at least; ±5 judged and right
    atan = _gradients(_one("saturating.atan_float32_12"))[("vjp", "cpu")]
    assert atan.status == "ok", atan.error
    assert next(c for c in atan.facts["finite_differences"] if c["what"] == "per element")["wrong"] == 0


def test_the_per_element_check_judges_only_what_the_reference_resolves() -> None:
    import numpy as np

    from farm.judge.gradients import _elements_wrong, _per_element

    x = np.array([1.0, 9.0, 30.0], np.float32)
    ct = np.ones(3)
    true = 1 / np.cosh(x.astype(np.float64)) ** 2
    right = _per_element(true.astype(np.float32), x, ct, np.tanh)
    assert right["judged"].tolist() == [True, True, False]  # tanh'(30) = 3.5e-26: under float64's resolution of tanh
    assert _elements_wrong(right, 2e-3)[0] is None
    zero = _per_element(np.array([true[0], 0.0, 0.0], np.float32), x, ct, np.tanh)
    why, facts = _elements_wrong(zero, 2e-3)
    assert facts["wrong"] == 1 and "x=9" in why
