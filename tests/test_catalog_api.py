"""The api catalog (farm.catalog.api, harnesses/api_*.py): introspection, specs, references,
coverage, filters, the samplers' goodness-of-fit judge and a few harnesses through the pipeline."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from farm import catalog
from farm.catalog import api

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def harnesses() -> list[catalog.Harness]:
    return catalog.load("api")


def _one(harnesses, name: str) -> catalog.Harness:
    return next(h for h in harnesses if h.name == name)


def test_public_is_callables_not_classes_modules_or_constants() -> None:
    import jax.numpy as jnp

    names = api.public(jnp)
    assert {"sin", "add", "cumsum", "where"} <= set(names)  # add is a jnp.ufunc object: callable, public
    assert not {"float32", "ndarray", "dtype", "pi", "linalg", "_src"} & set(names)


def test_a_new_function_in_a_newer_jax_shows_up_as_not_in_the_catalog(harnesses) -> None:
    import jax.numpy.fft as jfft

    fake = types.ModuleType("jax.numpy.fft")
    for n in api.public(jfft):
        setattr(fake, n, getattr(jfft, n))
    fake.fft_from_the_future = lambda x: x
    (row,) = api.coverage(harnesses, modules={"jnp.fft": fake})
    assert "fft_from_the_future" in row.public
    assert dict(row.missing)["fft_from_the_future"] == api.NOT_IN_CATALOG
    assert len(row.covered) == len(row.public) - 1


def test_coverage_is_at_least_90_percent_per_module_and_every_gap_has_a_reason(harnesses) -> None:
    rows = api.coverage(harnesses)
    assert {r.label for r in rows} >= set(api.MODULES)
    for r in rows:
        assert r.percent >= 90.0, (r.label, r.missing)
        assert all(why != api.NOT_IN_CATALOG for _, why in r.missing), (r.label, r.missing)


def test_every_reason_names_a_public_callable_without_a_harness(harnesses) -> None:
    from farm.catalog.known import holds_on

    rows = {r.label: r for r in api.coverage(harnesses)}
    for label, reasons in api.WITHOUT.items():
        for name in reasons:
            if name not in rows[label].public and not holds_on(api.CHLO_MEASURED):
                continue  # an older jax than the catalog's lacks it (jnp.minmax before 0.12): nothing to cover
            assert name in rows[label].public, f"{label}.{name} is not a public callable"
            assert name not in rows[label].covered, f"{label}.{name} has harnesses and a reason not to"


def test_every_reference_exists_and_a_missing_twin_is_refused(harnesses, monkeypatch) -> None:  # noqa: ANN001
    import importlib

    for h in harnesses:
        assert h.catalog == "api" and h.family == h.group
        assert callable(getattr(importlib.import_module(api.labels()[h.family]), h.primitive))
        edge = "edge" in dict(h.key.params)
        assert h.reference is not None or h.invariant is not None or edge or h.family == "random" \
            or h.primitive == "roots", h.name
    import jax.numpy as jnp

    # a jnp function with no NumPy twin (as jnp.minmax on 0.12, which 0.10.2 lacks): the spec must name one
    monkeypatch.setattr(jnp, "farm_no_twin", jnp.sin, raising=False)
    with pytest.raises(ValueError, match="numpy has no farm_no_twin"):
        api.declare("jnp", [api.spec("farm_no_twin")])


def test_a_spec_without_reference_or_invariant_must_say_why() -> None:
    with pytest.raises(ValueError, match="says why"):
        api.spec("sin", reference=None)
    with pytest.raises(ValueError, match="unknown operand domain"):
        api.spec("sin", "reals")


def test_shapes_include_empty_size_one_non_power_of_two_and_broadcasting(harnesses) -> None:
    adds = [h for h in harnesses if h.primitive == "add" and h.dtype == "float32" and "edge" not in dict(h.key.params)]
    shapes = {h.key.shapes for h in adds}
    assert ((7, 3), (7, 3)) in shapes and ((0,), (0,)) in shapes and ((), ()) in shapes
    assert ((7, 1), (3,)) in shapes


def test_edge_values_cover_each_operand_alone_and_all_together(harnesses) -> None:
    cases = {dict(h.key.params)["edge"] for h in harnesses
             if h.primitive == "arctan2" and h.dtype == "float32" and "edge" in dict(h.key.params)}
    assert cases == {"x0", "x1", "all"}
    h = next(h for h in harnesses if h.primitive == "log" and dict(h.key.params).get("edge") == "x0"
             and h.dtype == "float32")
    (x,) = h.make_args()
    for v in (0.0, np.inf, -np.inf, -1.0, np.finfo(np.float32).max, np.finfo(np.float32).smallest_subnormal):
        assert (x == np.float32(v)).any(), v
    assert np.isnan(x).any() and (np.signbit(x) & (x == 0)).any()
    # judged both ways: against NumPy's log and by the float64 evaluation of the jaxpr
    assert h.reference is not None and h.compare == "edges+jaxpr"


def test_a_wrong_reference_makes_a_harness_fail(harnesses) -> None:
    from farm.pipeline import run_harness
    from farm.results import Options

    h = _one(harnesses, "jnp.sin_float32_7x3_7x3") if any(h.name == "jnp.sin_float32_7x3_7x3" for h in harnesses) \
        else next(h for h in harnesses if h.primitive == "sin" and h.dtype == "float32" and h.reference is not None)
    opts = Options(platforms=("cpu",), repeats=1, crossexec=False)
    good = {f"{r.stage}/{r.platform}": r.status for r in run_harness(h, opts).records}
    assert good["compare/cpu"] == "ok"
    wrong = dataclasses.replace(h, reference=lambda x: np.sin(x) + 1e-3)
    bad = {f"{r.stage}/{r.platform}": r.status for r in run_harness(wrong, opts).records}
    assert bad["compare/cpu"] == "fail"


def test_a_planted_wrong_jnp_function_fails_its_harnesses() -> None:
    """jnp.cbrt replaced by a wrong one in a fresh process: its api harness fails compare."""
    code = (
        "import jax.numpy as jnp, numpy as np\n"
        "jnp.cbrt = lambda x: jnp.sign(x) * jnp.abs(x) ** 0.34\n"
        "from farm import catalog\n"
        "from farm.pipeline import run_harness\n"
        "from farm.results import Options\n"
        "h = next(h for h in catalog.load('api') if h.primitive == 'cbrt' and h.dtype == 'float32'"
        " and h.key.shapes == ((7, 3),))\n"
        "o = run_harness(h, Options(platforms=('cpu',), repeats=1, crossexec=False))\n"
        "print({r.stage: r.status for r in o.records if r.platform == 'cpu'}['compare'])\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"})
    assert out.stdout.strip().splitlines()[-1] == "fail", out.stderr[-2000:]


def test_a_sampler_passes_and_a_shifted_one_fails(harnesses) -> None:
    """The goodness-of-fit invariant at the fixed key: the real sample passes the bound, the
    same sample shifted by a tenth of a standard deviation (or scaled) fails it."""
    import jax

    from farm.judge.harness import invariant_check

    for name, shift in (("normal", 0.1), ("exponential", 0.1), ("poisson", 1)):
        h = next(h for h in harnesses if h.family == "random" and h.primitive == name and not dict(h.key.params))
        args = h.make_args()
        out = np.asarray(jax.jit(h.fun)(*args))
        err, bound = invariant_check(h, args, [out], "cpu")
        assert err <= bound, (name, err, bound)
        shifted = (out + shift).astype(out.dtype)
        err, bound = invariant_check(h, args, [shifted], "cpu")
        assert err > bound, (name, err, bound)


def test_unknown_function_or_module_names_the_nearest_and_exits_2() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    for flag, typo, near in (("--primitive", "cumsumm", "cumsum"), ("--family", "scipy.specal", "scipy.special")):
        out = subprocess.run([sys.executable, "-m", "farm", "sweep", "--catalog", "api", flag, typo, "--db",
                              "sqlite:///:memory:"], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
        assert out.returncode == 2, out.stderr[-2000:]
        lines = [l for l in out.stderr.splitlines() if l.strip()]
        assert len(lines) == 1 and near in lines[0], out.stderr


def test_filters_select_by_module_function_and_dtype() -> None:
    hs = catalog.select(catalog.Filters(catalog="api", family=("scipy.special",), primitive=("erf",),
                                        dtype=("float32",)))
    assert hs and {(h.family, h.primitive, h.dtype) for h in hs} == {("scipy.special", "erf", "float32")}


def test_coverage_command_prints_the_table_per_module() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-m", "farm", "coverage", "--catalog", "api", "--no-verdicts"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    for label in ("jnp", "jnp.linalg", "scipy.special", "scipy.stats.norm", "nn", "random"):
        assert f"| {label} | " in out.stdout
    assert "needs a callable argument" in out.stdout


def test_a_few_api_harnesses_through_the_real_pipeline(harnesses) -> None:
    """One harness per kind (a twin, a reduction with keywords, an edge-value variant, a
    decomposition reduced to its unique part, a sampler) through run_harness on the CPU,
    every platform lowered: nothing unexplained."""
    from farm.pipeline import run_harness
    from farm.results import Options

    picks = [
        next(h for h in harnesses if h.primitive == "logaddexp" and h.key.shapes == ((7, 1), (3,))),
        next(h for h in harnesses if h.primitive == "cumsum" and dict(h.key.params).get("axis") == "-1"),
        next(h for h in harnesses if h.family == "nn" and h.primitive == "sigmoid" and dict(h.key.params).get("edge") == "x0"),
        next(h for h in harnesses if h.family == "scipy.special" and h.primitive == "expit" and h.key.shapes == ((7, 3),)),
        next(h for h in harnesses if h.family == "jnp.linalg" and h.primitive == "qr" and not dict(h.key.params)),
        next(h for h in harnesses if h.family == "random" and h.primitive == "gamma" and not dict(h.key.params)),
    ]
    for h in picks:
        out = run_harness(h, Options(repeats=1))
        bad = [(r.stage, r.platform, r.status, r.error) for r in out.records
               if r.status not in ("ok", "skipped", "expected_fail", "not_runnable_here")]
        assert not bad, (h.name, bad)


def test_census_data_becomes_limitations_by_the_most_specific_key() -> None:
    from farm.catalog import SCAN_ABORTS_CPU

    data = {"f": "cpu,cuda,rocm,tpu: erf square", "f@empty": "", "f:alt": "cuda,rocm: scan",
            "g": "cuda,rocm: scan (compiles on cpu: no abort)", "h/complex64": "tpu: conj"}
    (lim,) = api.chlo_limitations(api.spec("f"), "float32", "main", data)
    assert lim.stage == "census" and lim.platforms == ("cpu", "cuda", "rocm", "tpu")
    assert lim.expects("fail", "CensusViolation", "crosses the plugin boundary: chlo.erf, chlo.square")
    assert not lim.expects("fail", "CensusViolation", "crosses the plugin boundary: chlo.erf, chlo.tan")
    assert api.chlo_limitations(api.spec("f"), "float32", "empty", data) == ()
    assert SCAN_ABORTS_CPU in api.chlo_limitations(api.spec("f", tag="alt"), "float32", "main", data)
    assert SCAN_ABORTS_CPU not in api.chlo_limitations(api.spec("g"), "float32", "main", data)
    assert api.chlo_limitations(api.spec("h"), "float32", "main", data) == ()
    assert api.chlo_limitations(api.spec("h"), "complex64", "main", data)[0].platforms == ("tpu",)
    # a pullback that holds the forward scan (measured: jnp.place, exp1, spence...) aborts under --vjp too
    from farm.catalog import SCAN_VJP_ABORTS_CPU

    data["k"] = "cuda,rocm: scan (vjp aborts: its pullback holds the forward scan)"
    assert {SCAN_ABORTS_CPU, SCAN_VJP_ABORTS_CPU} <= set(api.chlo_limitations(api.spec("k"), "float32", "main", data))
    assert SCAN_VJP_ABORTS_CPU not in api.chlo_limitations(api.spec("f", tag="alt"), "float32", "main", data)


def test_census_data_of_several_jax_versions_holds_on_each_where_measured() -> None:
    """A module's census measured on another jax (``chlo_on``) gives that version its own
    limitations: a text both versions share is one limitation holding on both, a text of one
    version holds there alone, and a version measured nowhere has none (its census is news)."""
    from farm.catalog.known import holds_on

    now = {"f": "cpu,cuda,rocm,tpu: erf", "g": "cuda,rocm: scan", "h": "cpu: square"}
    older = now | {"g": "", "h": "cpu,tpu: lgamma"}
    lims = {n: api.chlo_limitations(api.spec(n), "float32", "main", now, {"~=0.10.2": older}) for n in "fgh"}
    (f,) = lims["f"]
    assert [holds_on(f.jax, v) for v in ("0.12.0.1", "0.10.2", "0.11.2", "0.9.2")] == [True, True, False, False]
    g = [lim for lim in lims["g"] if lim.stage == "census"]
    assert len(g) == 1 and holds_on(g[0].jax, "0.12.0.1") and not holds_on(g[0].jax, "0.10.2")
    by = {lim.platforms: lim for lim in lims["h"]}
    assert set(by) == {("cpu",), ("cpu", "tpu")}
    assert holds_on(by[("cpu",)].jax, "0.12.0.1") and not holds_on(by[("cpu",)].jax, "0.10.2")
    assert holds_on(by[("cpu", "tpu")].jax, "0.10.2") and not holds_on(by[("cpu", "tpu")].jax, "0.12.0.1")
    assert by[("cpu", "tpu")].expects("fail", "CensusViolation", "crosses the plugin boundary: chlo.lgamma")


def test_a_known_gaps_versions_may_join_specifiers_and_reject_an_empty_one() -> None:
    from farm.catalog.known import check_spec, holds_on

    assert holds_on("<0.9 || ~=0.10.2", "0.8.3") and holds_on("<0.9 || ~=0.10.2", "0.10.2")
    assert not holds_on("<0.9 || ~=0.10.2", "0.9.2")
    with pytest.raises(ValueError):
        check_spec("~=0.10.2 ||")


def test_a_case_limitation_holds_for_its_case_alone(harnesses) -> None:
    """jnp.linalg.det's derivative raises for a 0x0 matrix only (docs/findings.md): the gap is on
    that case's harness, not on the others of the spec, where it would be an unexpected pass."""
    from harnesses.api_linalg import DET_EMPTY_GRAD

    assert DET_EMPTY_GRAD in _one(harnesses, "jnp.linalg.det_float32_0x0_case=s2").limitations
    assert DET_EMPTY_GRAD not in _one(harnesses, "jnp.linalg.det_float32_4x4").limitations
    assert DET_EMPTY_GRAD not in _one(harnesses, "jnp.linalg.det_float32_2x3x3_case=s1").limitations


def test_a_crossexec_run_apart_finds_its_harness_whose_name_begins_another(harnesses) -> None:
    """jnp.cumsum_float32_7x3 is the start of jnp.cumsum_float32_7x3_axis=0: the separate process
    of its aborting cuda crossexec (farm.pipeline.apart) must find that one harness, by its exact
    name, and die as expected (not report it missing)."""
    from farm.pipeline import run_harness
    from farm.results import Options

    h = _one(harnesses, "jnp.cumsum_float32_7x3")
    assert any(o.name.startswith(h.name + "_") for o in harnesses)
    from farm.catalog import SCAN_ABORTS_CPU
    from farm.catalog.known import holds_on

    out = run_harness(h, Options(platforms=("cpu", "cuda"), repeats=1))
    (cx,) = [r for r in out.records if r.stage == "crossexec" and r.platform == "cuda"]
    if not holds_on(SCAN_ABORTS_CPU.jax):  # before 0.11.2 the cuda module has no chlo.scan: it runs in place
        assert cx.status == "ok" and not cx.facts.get("apart"), (cx.status, cx.error)
        return
    assert cx.status == "expected_fail" and cx.facts.get("apart"), (cx.status, cx.error)
