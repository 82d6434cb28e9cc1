"""Stages with teeth: planted faults must be caught with the right status, a clean run
must show none of them, and the compare functions must see what they claim to."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from farm import catalog
from farm.pipeline import run_harness
from farm.results import Options
from farm.judge.outputs import compare_outputs
from farm.judge.outputs import errors

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PLANTED_SCRIPT = """
import json, sys
from farm import catalog
from farm import faults
from farm.pipeline import run_harness
faults.plant_from_env()
hs = catalog.select(catalog.Filters.parse(primitive=sys.argv[1], dtype=sys.argv[2]))
out = {}
for h in hs:
    o = run_harness(h)
    out[h.name] = {f"{r.stage}/{r.platform}": r.status for r in o.records}
print(json.dumps(out))
"""


def run_planted(plant: str, primitives: str, dtypes: str = "float32") -> dict[str, dict[str, str]]:
    env = {**os.environ, "FARM_PLANT": plant, "PYTHONPATH": ROOT}
    p = subprocess.run([sys.executable, "-c", PLANTED_SCRIPT, primitives, dtypes], env=env, capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def not_ok(statuses: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in statuses.items() if v != "ok"}


def test_clean_run_has_no_findings() -> None:
    hs = catalog.select(catalog.Filters.parse(primitive="sin,exp,add,tanh", dtype="float32,int32"))
    assert hs
    for h in hs:
        out = run_harness(h)
        assert not [r for r in out.records if r.status != "ok"], h.name


def test_wrong_lowering_rule_on_one_platform_is_caught_by_crossexec() -> None:
    res = run_planted("wrong_lowering:sin:tpu", "sin,cos")
    assert not_ok(res["sin_float32_3x4"]) == {"crossexec/tpu": "fail"}
    assert not_ok(res["cos_float32_3x4"]) == {}


def test_wrong_cpu_lowering_is_caught_against_the_reference() -> None:
    res = run_planted("wrong_lowering:exp:cpu", "exp")
    bad = not_ok(res["exp_float32_3x4"])
    assert bad["compare/cpu"] == "fail"
    # the other platforms' modules still compute exp: on CPU they now disagree with the CPU module
    assert bad["crossexec/tpu"] == "fail"


def test_dropped_dtype_is_a_lowering_error_for_that_dtype_only() -> None:
    res = run_planted("drop_dtype:exp:float16", "exp", "float16,float32")
    assert not_ok(res["exp_float32_3x4"]) == {}
    bad = not_ok(res["exp_float16_3x4"])
    assert {k: v for k, v in bad.items() if k.startswith("lower/")} == {
        f"lower/{p}": "error" for p in ("cpu", "cuda", "rocm", "tpu")}
    assert bad["compare/cpu"] == "skipped"


def test_chlo_leak_is_a_census_failure() -> None:
    res = run_planted("chlo_leak:tanh:cuda", "tanh")
    bad = not_ok(res["tanh_float32_3x4"])
    assert bad["census/cuda"] == "fail"
    assert "census/cpu" not in bad


def test_stale_limitation_is_unexpected_pass() -> None:
    h = catalog.define("test", "sin", __import__("jax").lax.sin, [catalog.RandArg((3,), "float32")],
                       dtype="float32", catalog="test_stale", reference=np.sin,
                       limitations=[catalog.Limitation("claims tpu cannot lower sin", platforms=("tpu",))])
    out = run_harness(h, Options(platforms=("cpu", "tpu")))
    statuses = {(r.stage, r.platform): r.status for r in out.records}
    assert statuses[("lower", "tpu")] == "unexpected_pass"
    assert statuses[("lower", "cpu")] == "ok"


def test_errors_exact_and_tolerant() -> None:
    a = np.array([1, 2, 3], np.int32)
    assert errors(a, np.array([1, 2, 3]), 0, 0)["mismatches"] == 0
    assert errors(a, np.array([1, 2, 4]), 0, 0)["mismatches"] == 1
    f = np.array([1.0, np.nan, np.inf], np.float32)
    assert errors(f, np.array([1.0, np.nan, np.inf]), 1e-6, 0)["mismatches"] == 0
    m = errors(np.array([1.001], np.float32), np.array([1.0]), 1e-5, 0)
    assert m["mismatches"] == 1 and m["max_rel_err"] == pytest.approx(1e-3, rel=1e-2)
    assert m["max_ulp_err"] > 1000


def test_output_dtype_must_match_what_tracing_promised() -> None:
    status, err, _ = compare_outputs([np.ones(3, np.float32)], [np.ones(3)], 1e-5, 0, False,
                                     promised=[{"dtype": "float16", "shape": [3]}])
    assert status == "fail" and "float16" in err


# ------------------------------------------------- limits of running foreign modules here
def _statuses(out) -> dict[tuple[str, str], str]:  # noqa: ANN001
    return {(r.stage, r.platform): r.status for r in out.records}


def _linalg(primitive: str, dtype: str = "float32") -> catalog.Harness:
    return catalog.select(catalog.Filters(family=("linalg",), primitive=(primitive,), dtype=(dtype,)))[0]


def test_missing_ffi_handler_is_not_runnable_here() -> None:
    from farm.stages.compile import not_runnable
    from farm.results import Record

    missing = Record("crossexec", "cuda", "error", error_type="XlaRuntimeError",
                     error="NOT_FOUND: No FFI handler registered for cusolver_potrf_ffi on a platform Host")
    rec = not_runnable(missing)
    assert rec.status == "not_runnable_here" and rec.facts["missing_handler"] == "cusolver_potrf_ffi"
    assert not_runnable(missing.with_status("error", error="INTERNAL: wrong answer")).status == "error"
    assert not_runnable(missing.with_status("fail")).status == "fail"


def test_crossexec_of_a_gpu_solver_on_the_host_is_not_runnable_here() -> None:
    """cuSOLVER's potrf has no host handler (jaxlib 0.10 says so when compiling)."""
    out = run_harness(_linalg("cholesky"), Options(platforms=("cpu", "cuda"), repeats=1))
    (rec,) = [r for r in out.records if r.stage == "crossexec"]
    assert (rec.platform, rec.status) == ("cuda", "not_runnable_here")
    assert rec.facts["missing_handler"] == "cusolver_potrf_ffi"
    assert _statuses(out)[("compare", "cpu")] == "ok"


def test_missing_ffi_handler_found_at_run_time_is_not_runnable_here(monkeypatch) -> None:  # noqa: ANN001
    """Some XLA versions compile such a module and fail when it first runs."""
    from jax import lax

    from farm.stages import execute

    real = execute.run

    def run(compiled, dyn, **kw):  # noqa: ANN001, ANN202
        if kw.get("stage") != "crossexec_run":
            return real(compiled, dyn, **kw)
        return execute.Executed("crossexec_run", compiled.platform, "error", error_type="XlaRuntimeError",
                                error="NOT_FOUND: No FFI handler registered for tpu_only_ffi on a platform Host")

    monkeypatch.setattr(execute, "run", run)  # farm.pipeline.compile_cache calls execute.run
    out = run_harness(_sin_or(lax.cos, None), Options(platforms=("cpu", "tpu"), repeats=1))
    (rec,) = [r for r in out.records if r.stage == "crossexec"]
    assert (rec.platform, rec.status, rec.facts["missing_handler"]) == ("tpu", "not_runnable_here", "tpu_only_ffi")


def _sin_or(default, invariant):  # noqa: ANN001, ANN202
    """sin on cpu, ``default`` on every other platform's module."""
    from jax import lax

    return catalog.define("test_only", "sin", lambda x: lax.platform_dependent(x, cpu=lax.sin, default=default),
                          [catalog.RandArg((8,), "float32")], dtype="float32", catalog="test_crossexec",
                          invariant=invariant)


def test_crossexec_judges_non_unique_results_by_the_invariant() -> None:
    """A result defined up to sign (like an SVD's vectors): the tpu module returns -sin,
    which the invariant accepts; a tpu module returning cos fails it."""
    from jax import lax

    up_to_sign = lambda x, y: np.abs(np.abs(y) - np.abs(np.sin(x))).max()  # noqa: E731
    opts = Options(platforms=("cpu", "tpu"), repeats=1)
    flipped = run_harness(_sin_or(lambda x: -lax.sin(x), up_to_sign), opts)
    wrong = run_harness(_sin_or(lax.cos, up_to_sign), opts)
    (ok,) = [r for r in flipped.records if r.stage == "crossexec"]
    (bad,) = [r for r in wrong.records if r.stage == "crossexec"]
    assert (ok.status, ok.facts["against"]) == ("ok", "invariant")
    assert (bad.status, bad.facts["against"]) == ("fail", "invariant")
    assert bad.metrics["invariant_err"] > 0.1


def test_crossexec_of_svd_on_tpu_passes_by_invariant_where_raw_values_differ() -> None:
    h = _linalg("svd")
    out = run_harness(h, Options(platforms=("cpu", "tpu"), repeats=1))
    (rec,) = [r for r in out.records if r.stage == "crossexec"]
    assert (rec.platform, rec.status, rec.facts["against"]) == ("tpu", "ok", "invariant")


# --------------------------------------------------------------------- export limits
def test_export_refused_for_one_platform_is_redone_without_it() -> None:
    """cuda's eig is a custom call without a compatibility guarantee: the cuda part is its
    own record (expected_fail by the harness's limitation), the artifact has the rest."""
    out = run_harness(_linalg("eig"), Options(platforms=("cpu", "cuda"), repeats=1, crossexec=False))
    st = _statuses(out)
    assert st[("export", "cuda")] == "expected_fail"
    assert st[("export", "export")] == "ok" and st[("serialize", "export")] == "ok"
    recs = {(r.stage, r.platform): r for r in out.records}
    assert recs[("export", "cuda")].facts["unguaranteed"] == ["cuhybrid_eig_real"]
    assert recs[("export", "export")].facts["dropped_platforms"] == ["cuda"]
    assert [a.meta["platforms"] for a in out.artifacts if a.kind == "export"] == [["cpu"]]


def test_undeclared_export_refusal_is_an_error() -> None:
    from dataclasses import replace

    h = replace(_linalg("eig"), limitations=(), catalog="test_export")
    out = run_harness(h, Options(platforms=("cpu", "rocm"), run_on=(), repeats=1))
    assert _statuses(out)[("export", "rocm")] == "error"
    (rec,) = [r for r in out.records if (r.stage, r.platform) == ("export", "rocm")]
    assert "hiphybrid_eig_real" in rec.error and rec.error_type == "UnguaranteedCustomCall"


def test_stale_export_limitation_is_unexpected_pass() -> None:
    from jax import lax

    stale = catalog.Limitation("claims sin cannot be exported for cuda", platforms=("cuda",), stage="export")
    h = catalog.define("test_only", "sin", lax.sin, [catalog.RandArg((3,), "float32")], dtype="float32",
                       catalog="test_stale", reference=np.sin, limitations=[stale])
    out = run_harness(h, Options(platforms=("cpu", "cuda"), run_on=(), repeats=1))
    (rec,) = [r for r in out.records if r.stage == "export"]
    assert (rec.platform, rec.status) == ("export", "unexpected_pass")
    assert "limitation no longer holds" in rec.error


def test_serialize_compares_the_calling_convention() -> None:
    """What the format carries must survive; an output aval's mesh, which it does not
    carry, is a fact, not a failure."""
    import dataclasses

    import jax
    from jax import lax
    from jax.sharding import PartitionSpec as P

    from farm.stages import export

    def psum(x):  # noqa: ANN001, ANN202
        mesh = jax.make_mesh((1,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
        return jax.shard_map(lambda b: lax.psum(b, "x"), mesh=mesh, in_specs=P("x"), out_specs=P())(x)

    exp = jax.export.export(jax.jit(psum), platforms=("cpu", "tpu"))(np.ones((2, 3), np.float32))
    back = jax.export.deserialize(exp.serialize())
    changed, not_carried = export.differences(exp, back)
    assert changed == [] and list(not_carried) == ["out_avals[0].sharding"]
    other = dataclasses.replace(back, platforms=("cpu",), out_avals=(back.out_avals[0].update(dtype=np.int32),))
    assert export.differences(exp, other)[0] == ["out_avals[0]", "platforms"]


def _run_limited(ref, lim: catalog.Limitation, platforms=("cpu", "tpu")):  # noqa: ANN001, ANN202
    h = catalog.define("test", "sin", __import__("jax").lax.sin, [catalog.RandArg((3,), "float32")],
                       dtype="float32", catalog="test_run_lim", reference=ref, limitations=[lim])
    out = run_harness(h, Options(platforms=platforms))
    return {(r.stage, r.platform): r.status for r in out.records}


def test_run_limitation_expects_whichever_native_stage_fails() -> None:
    """JAX's "unimplemented on this device": the native compare fails → expected, nothing else moves."""
    st = _run_limited(np.cos, catalog.Limitation("wrong on cpu", platforms=("cpu",), stage="run"))
    assert st[("compare", "cpu")] == "expected_fail"
    assert st[("lower", "cpu")] == st[("execute", "cpu")] == "ok"


def test_run_limitation_that_no_longer_holds_is_one_unexpected_pass() -> None:
    st = _run_limited(np.sin, catalog.Limitation("claims cpu cannot run sin", platforms=("cpu",), stage="run"))
    assert [k for k, v in st.items() if v == "unexpected_pass"] == [("compare", "cpu")]
    # a platform only lowered here (not run natively) cannot show the limitation is stale
    st = _run_limited(np.sin, catalog.Limitation("claims tpu cannot run sin", platforms=("tpu",), stage="run"))
    assert "unexpected_pass" not in st.values()


def test_too_few_devices_is_not_runnable_here(monkeypatch) -> None:  # noqa: ANN001
    """A multi-device harness on a host with one GPU: said, not an error."""
    h = catalog.select(catalog.Filters.parse(family="collective"))[0]
    assert h.devices > 1
    monkeypatch.setattr("farm.pipeline.harness._device_count", lambda: 1)
    out = run_harness(h, Options(platforms=("cpu",)))
    (rec,) = out.records
    assert (rec.stage, rec.status, rec.error_type) == ("trace", "not_runnable_here", "TooFewDevices")


def test_known_crash_is_expected_only_where_declared() -> None:
    """JAX's skip_run ("this crashes"): a crash there is expected; elsewhere it is a finding."""
    from farm.judge.limitations import judge_crash
    from farm.results import Outcome

    def harness(crashes: bool) -> catalog.Harness:
        lim = catalog.Limitation("internal XLA error", platforms=("cuda",), stage="run", crashes=crashes)
        return catalog.define("test", "sin", __import__("jax").lax.sin, [catalog.RandArg((3,), "float32")],
                              dtype="float32", catalog="test_crash", limitations=[lim])

    def crashed(h: catalog.Harness) -> Outcome:
        return Outcome.failed(h.fingerprint, h.name, "crashed", "worker process died")

    h = harness(True)
    assert judge_crash(h, crashed(h), ("gpu",)).worst == "expected_fail"
    assert judge_crash(h, crashed(h), ("cpu",)).worst == "crashed"
    h = harness(False)
    assert judge_crash(h, crashed(h), ("gpu",)).worst == "crashed"


class _Fails:
    """A lowering whose compile raises what XLA says of a custom call it has no handler for."""

    def compile(self) -> None:
        raise RuntimeError("UNIMPLEMENTED: No FFI handler registered for lapack_sgetrf_ffi on a platform Host")


def test_a_missing_handler_in_a_native_cpu_compile_is_an_error_not_cannot_run_here() -> None:
    """A CPU module on the CPU backend that cannot find its custom call's handler is a bug
    (e.g. a broken jaxlib), never a green ``not_runnable_here``; another platform's module
    compiled here (crossexec) legitimately cannot run."""
    from farm.stages import compile as compile_stage
    from farm.stages.lower import Lowered, LoweredModule

    lo = Lowered("lower", "cpu", "ok", handle=LoweredModule(_Fails(), None, ""))
    native = compile_stage.run(lo, "compile")
    assert native.status == "error" and "lapack_sgetrf_ffi" in native.error
    foreign = compile_stage.run(Lowered("lower", "cuda", "ok", handle=LoweredModule(_Fails(), None, "")), "crossexec")
    assert foreign.status == "not_runnable_here" and foreign.facts["missing_handler"] == "lapack_sgetrf_ffi"


def test_checked_calls_share_an_executable_only_for_the_same_module() -> None:
    import jax.numpy as jnp

    from farm.stages import compile as compile_stage

    compile_stage.clear_checked()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    twice = lambda a: a * 2  # noqa: E731
    np.testing.assert_array_equal(compile_stage.checked_call(twice, x), x * 2)
    np.testing.assert_array_equal(compile_stage.checked_call(twice, x + 1), (x + 1) * 2)  # the same module
    assert len(compile_stage._CHECKED) == 1
    # a constant, a dtype, a shape of difference: another module, never the cached executable
    np.testing.assert_array_equal(compile_stage.checked_call(lambda a: a * 3, x), x * 3)
    np.testing.assert_array_equal(compile_stage.checked_call(twice, x.astype(np.int32)), x.astype(np.int32) * 2)
    np.testing.assert_array_equal(compile_stage.checked_call(lambda a: jnp.sum(a * 2), x), np.sum(x * 2))
    assert len(compile_stage._CHECKED) == 4
    # an argument the module does not use is pruned from its text, not from the executable's signature
    unused = lambda a, b: a * 2  # noqa: E731
    np.testing.assert_array_equal(compile_stage.checked_call(unused, x, np.int32(1)), x * 2)
    np.testing.assert_array_equal(compile_stage.checked_call(unused, x, 1), x * 2)  # a weakly typed int
    np.testing.assert_array_equal(compile_stage.checked_call(unused, x, np.float32(1)), x * 2)
    assert len(compile_stage._CHECKED) == 7
    compile_stage.clear_checked()
    assert not compile_stage._CHECKED


def test_checked_calls_never_put_lapack_calls_side_by_side_in_one_program(monkeypatch: pytest.MonkeyPatch) -> None:
    """jaxlib 0.10.2's batched LAPACK kernels block an XLA:CPU pool thread while their pieces run
    on the same pool: two side by side on a 2-thread pool hang (docs/findings.md). A module
    whose LAPACK calls jaxlib splits gets a program per size; any other module's share one."""
    import jax
    import jax.numpy as jnp

    from farm.stages import compile as compile_stage

    texts: list[str] = []  # the programs run
    made = compile_stage._executable

    class Recording:
        def __init__(self, lowered: Any, text: bytes) -> None:
            self.exe, self.text = made(lowered, text), lowered.as_text()

        def as_text(self) -> str:
            return self.exe.as_text()

        def __call__(self, *args: object) -> object:
            texts.append(self.text)
            return self.exe(*args)

    recording = Recording

    monkeypatch.setattr(compile_stage, "_executable", recording)
    rng = np.random.default_rng(0)
    qr = lambda a: jnp.linalg.qr(a)[1]  # noqa: E731
    lapack = lambda t: len(compile_stage.LAPACK_CALL.findall(t))  # noqa: E731
    for shape, programs in (((6, 4), 1), ((60, 60), 3)):  # a batch of 2 60x60 QRs: jaxlib splits it
        mats = [rng.standard_normal((b, *shape)).astype(np.float32) for b in (1, 2, 3)]
        one = lapack(jax.jit(qr).lower(mats[0]).as_text())  # geqrf (and orgqr)
        texts.clear()
        got = compile_stage.checked_calls(qr, [[m] for m in mats])
        assert one and len(texts) == programs and sum(map(lapack, texts)) == 3 * one
        for m, r in zip(mats, got):
            np.testing.assert_allclose(np.abs(r), np.abs(np.linalg.qr(m)[1]), rtol=1e-3, atol=1e-4)
        texts.clear()  # the same with a second function of the same arguments beside it
        pairs = compile_stage.checked_calls(qr, [[m] for m in mats[1:]], lambda a: qr(a * 2))
        assert len(texts) == (1 if programs == 1 else 4)  # one program, or one per function and size
        for r, r2 in pairs:
            np.testing.assert_allclose(np.abs(r2), 2 * np.abs(r), rtol=1e-4, atol=1e-4)
    big = jax.jit(qr).lower(jax.ShapeDtypeStruct((2, 60, 60), np.float32))
    assert not compile_stage.side_by_side_safe(big.as_text())
    assert not compile_stage.side_by_side_safe(big.compile().as_text())  # the HLO's shapes
    assert compile_stage.side_by_side_safe(jax.jit(jnp.sin).lower(mats[0]).as_text())
    assert not compile_stage.side_by_side_safe("stablehlo.custom_call @lapack_sgeqrf_ffi(%0) : (tensor<?x6x4xf32>) -> ...")


def test_checked_calls_give_each_call_its_own_result_and_raise_where_one_does() -> None:
    import jax.numpy as jnp

    from farm.stages import compile as compile_stage

    sizes = [np.arange(n, dtype=np.float32) for n in (1, 3, 7)]
    got = compile_stage.checked_calls(lambda a: (jnp.cumsum(a), a.sum()), [[a] for a in sizes])
    for a, (c, s) in zip(sizes, got):
        np.testing.assert_allclose(c, np.cumsum(a))
        np.testing.assert_allclose(s, a.sum())
    with pytest.raises(TypeError):  # one argument list the function refuses: the whole batch raises
        compile_stage.checked_calls(lambda a: jnp.dot(a, a), [[np.ones(3, np.float32)], [np.ones((2, 3), np.float32)]])
