"""JAX's own shape-polymorphism harnesses (``tests/shape_poly_test.py``,
``_POLY_SHAPE_TEST_HARNESSES``) as a farm catalog, ``--catalog shape_poly --jax-repo PATH``.

JAX runs each ``PolyHarness`` by exporting it for the default platform and calling the
artifact once, at its own arguments; it never serializes. Here each becomes a farm
``Harness`` with a declared symbolic variant (``Poly``), so ``--shapes symbolic`` exports it
for every platform, round-trips it and calls every platform's module:

- ``specs``: its ``polymorphic_shapes`` as JAX expands them against its own arguments
  (``export.symbolic_args_specs``: ``...``, ``_`` and ``None`` written out);
- ``constraints``: its ``symbolic_constraints``;
- ``points``: the binding JAX's own solver finds from its own arguments' shapes (the only
  place JAX calls it), and one more with every variable 2 larger where every dynamic
  argument is a ``RandArg`` (drawn again at that shape by the harness's own ``rng_factory``)
  and the constraints hold there;
- ``maker``: JAX's own ``dyn_args_maker`` (a ``RandomState`` seeded from the farm's generator);
- ``expect_error`` → a ``symbolic_export`` ``Limitation`` expecting that error; ``tol`` → the
  harness's tolerance; ``override_jax_config_flags`` → the harness's ``jax_config``, which the
  pipeline sets around every stage (a PRNG flag is read while lowering, not only tracing).

The conditions JAX's test method applies by name (``ShapePolyHarnessesTest.test_harness``)
are data here (``JAX_TEST``), next to the gaps the farm's sweep found (``KNOWN``).
A harness that cannot be converted is counted with its reason (``Conversion.skipped``).
"""
from __future__ import annotations

import contextlib
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from farm.catalog import jaxrepo
from farm.catalog.dtypes import DTYPES
from farm.catalog.harness import Limitation, Point, Poly
from farm.catalog.definitions import define
from farm.catalog.specs import holds, shape
from farm.errors import BadJaxRepo
from farm.platforms import LOWERING_PLATFORMS

CATALOG = "shape_poly"
FAMILY = "shape_poly"
PATH = "tests/shape_poly_test.py"
#: The repository a worker process reads the catalog from (the driver sets it for its workers).
ENV = "FARM_JAX_REPO"
#: How much larger every dimension variable is at the second point.
BUMP = 2


@dataclass(frozen=True, slots=True)
class Rule:
    """A condition on a PolyHarness (its group or full name, a regular expression) and the
    limitation it carries; ``poly_dims``: only where a non-leading dimension is symbolic."""

    group: str
    limitation: Limitation
    fullname: str = ""
    poly_dims: bool = False

    def matches(self, ph: Any) -> bool:
        first = (list(ph.polymorphic_shapes) or [None])[0]
        return (re.fullmatch(self.group, ph.group_name) is not None and re.search(self.fullname, ph.fullname) is not None
                and (not self.poly_dims or not (first or "").endswith("...")))  # JAX's own test of it


_NOT_CPU = tuple(p for p in LOWERING_PLATFORMS if p != "cpu")
#: ``ShapePolyHarnessesTest.test_harness``'s conditions, as data (jax 0.10.2).
JAX_TEST: tuple[Rule, ...] = (
    Rule("(vmap_)?(schur|eig)", Limitation("JAX implements schur and eig on CPU only (shape_poly_test skips other devices)",
                                 platforms=_NOT_CPU, stage="symbolic_export", status="error")),
    Rule("eigh|svd", Limitation("tpu: shape polymorphism for eigh and svd only in batch dimensions (shape_poly_test "
                                "skips tpu)", platforms=("tpu",), stage="symbolic_export", status="error",
                                error="implemented only for the batch dimensions|'m' [<>] 'n' is inconclusive|Abstract tracer value"),
         poly_dims=True),
    Rule("cholesky.*", Limitation("tpu: a looser tolerance, the matmul operands are swapped (shape_poly_test)",
                                  platforms=("tpu",), stage="symbolic_call", tol=(5e-5, 5e-5))),
    Rule("vmap_conv_general_dilated", Limitation("a batched kernel makes the feature-group count symbolic: jax.export "
                                                 "refuses it (shape_poly_test skips it: openxla/stablehlo#1268)",
                                                 stage="symbolic_export", status="error",
                                                 error="Convolutions with non-static strides")),
    Rule("fft", Limitation("FFT with a symbolic fft_length does not lower on any platform: 'not implemented for TPU "
                           "and GPU', the cpu included (shape_poly_test skips it everywhere; docs/findings.md)",
                           stage="symbolic_export", status="error", error="non-constant fft_length"),
         fullname=r"^(?!.*IRFFT).*nr_fft_lengths_2"),  # IRFFT's lengths stay constant: it exports
)
_GPU = ("cuda", "rocm")
_SOLVER = "a platform's solver custom call (cusolver/hipsolver FFI, tpu LuDecomposition) has no CPU handler: " \
          "its symbolic module cannot be called on this host (zero-sized matrices carry none)"


def _no_cpu_handler(group: str, platforms: tuple[str, ...], fullname: str = "") -> Rule:
    return Rule(group, Limitation(_SOLVER, platforms=platforms, stage="symbolic_call", status="not_runnable_here",
                                  error="No FFI handler registered|No registered implementation for untyped"),
                fullname)


_RBG = Limitation("unsafe_rbg draws with rng_bit_generator, whose bits are implementation-defined: the float64 "
                  "reference has only placeholders, so a choice made from them cannot be judged against it "
                  "(the static lowering agrees)", stage="symbolic_call", status="fail", error="vs the reference")
#: Gaps the farm's own sweep of this catalog found (jax 0.10.2; docs/symbolic.md, docs/findings.md).
KNOWN: tuple[Rule, ...] = (
    _no_cpu_handler("eigh", _GPU), _no_cpu_handler("lu", (*_GPU, "tpu"), r"^(?!.*_2_0_4_)"),
    _no_cpu_handler("qr", _GPU, r"^(?!.*_2_0_4_|.*_2_4_0_)"), _no_cpu_handler("inv", (*_GPU, "tpu")),
    _no_cpu_handler("lu_pivots_to_permutation", _GPU),
    _no_cpu_handler("vmap_(lu|custom_linear_solve)", (*_GPU, "tpu")), _no_cpu_handler("vmap_qr", _GPU),
    _no_cpu_handler("vmap_cholesky", _GPU, r"^(?!.*_1000_0_0_)"), _no_cpu_handler("vmap_eigh", _GPU, r"^(?!.*_0_0_)"),
    Rule("vmap_approx_top_k", Limitation("tpu's approx_top_k is a PartialReduce custom call with no CPU handler",
                                         platforms=("tpu",), stage="symbolic_call", status="not_runnable_here",
                                         error="PartialReduce"), fullname="large_True"),
    Rule("vmap_random_gamma", Limitation("gamma's float32 rejection sampler against the float64 reference: 6 ulp at "
                                         "one large sample", stage="symbolic_call", tol=(1e-6, 0.0)),
         fullname=r"shape_float32_$"),
    _no_cpu_handler("vmap_svd", _GPU, r"^(?!.*_0_0_)"),
    Rule("vmap_svd", Limitation("tpu's svd module run by the CPU backend against the cpu lowering: a different "
                                "algorithm, 4.6e-5 where 2e-5 is allowed (JAX never runs a tpu module on a CPU)",
                                platforms=("tpu",), stage="symbolic_call", tol=(1e-4, 1e-5))),
    _no_cpu_handler("svd", _GPU, r"^(?!.*_2_(0_4|4_0)_poly_b_full_matrices_(True|False_compute_uv_True))"),
    Rule("ragged_dot", Limitation("the cuda, rocm and tpu modules keep ragged_dot, which XLA:CPU cannot compile "
                                  "(the cpu lowering expands it)", platforms=(*_GPU, "tpu"), stage="symbolic_call",
                                  status="error", error="ragged-dot. is not supported by XLA:CPU"),
         fullname=r"mode_1_non_contracting|mode_2_contracting$"),
    Rule("random_choice|random_split|random_uniform", _RBG, fullname="unsafe_rbg"),
    Rule("random_categorical", _RBG, fullname=r"axis_[01]_unsafe_rbg$|axis_1_then_reshape_unsafe_rbg$"),
    Rule("jnp_pad", Limitation("reflect_odd computes 2*edge - x: two float32 roundings where the float64 reference's "
                               "elementwise tolerance allows one (JAX compares at 1e-6)", stage="symbolic_call",
                               tol=(1e-6, 1e-6)), fullname=r"mode_reflect_odd$"),
    Rule("approx_max_k", Limitation("the farm's float64 reference rule for approx_top_k ignores aggregate_to_topk="
                                    "False (shape k where the operand's is promised; docs/findings.md, the farm's "
                                    "own bug, not fixed)", stage="symbolic_call", status="error",
                                    error="rule for approx_top_k gave shape"), fullname=r"agg_False$"),
    Rule("conv_general_dilated", Limitation("jax.export serialization drops weak_type: the weak int32 scalar result "
                                            "deserializes strong (docs/findings.md)", stage="symbolic_serialize",
                                            status="fail", error="avals differ"), fullname="zero_output"),
)


@dataclass
class Conversion:
    """What loading the catalog did: the harnesses defined and those skipped, with why."""

    source: jaxrepo.Source | None = None
    converted: int = 0
    skipped: dict[str, str] = field(default_factory=dict)  # fullname -> reason

    def summary(self) -> str:
        src = f"{self.source.tag}:{self.source.path}" if self.source else PATH
        why = Counter(self.skipped.values())
        tail = "; ".join(f"{n} {r}" for r, n in why.most_common())
        return f"{src}: {self.converted} PolyHarnesses converted, {len(self.skipped)} skipped" + (
            f" ({tail})" if tail else "")


LAST = Conversion()


@contextlib.contextmanager
def _flags(flags: dict[str, Any]) -> Iterator[None]:
    if not flags:
        yield
        return
    from jax._src import test_util as jtu

    with jtu.thread_local_config_context(**flags):
        yield


def _fun(ph: Any) -> Callable[..., Any]:
    """JAX's ``dyn_fun`` (its source is what gets fingerprinted); its config flags are the
    harness's ``jax_config``, which the pipeline sets around every stage."""
    def dyn_fun(*dyn: Any) -> Any:
        return ph.dyn_fun(*dyn)
    dyn_fun.__wrapped__ = getattr(ph.fun, "__wrapped__", ph.fun)  # type: ignore[attr-defined]
    return dyn_fun


def _seed(rng: np.random.Generator) -> np.random.RandomState:
    return np.random.RandomState(int(rng.integers(0, 2**31 - 1)))


def _maker(ph: Any, flags: dict[str, Any], specs: tuple[str, ...], own: Point,
           regen: bool) -> Callable[[dict[str, int], np.random.Generator], list[Any]]:
    """JAX's own arguments at the harness's own binding; at another point (``regen`` only), each
    ``RandArg`` drawn at the spec's shape there by the harness's own ``rng_factory``."""
    def make(env: dict[str, int], rng: np.random.Generator) -> list[Any]:
        with _flags(flags):
            if tuple(sorted(env.items())) == own:
                return list(ph.dyn_args_maker(_seed(rng)))
            if not regen:
                raise ValueError(f"{ph.fullname}: its arguments exist at {dict(own)} only")
            draw = ph.rng_factory(_seed(rng))
            return [draw(shape(s, env), a.dtype) for s, a in zip(specs, _dynamic(ph))]
    return make


def _dynamic(ph: Any) -> list[Any]:
    from jax._src.internal_test_util.test_harnesses import StaticArg

    return [a for a in ph.arg_descriptors if not isinstance(a, StaticArg)]


def _binding(structs: list[Any], args: list[Any]) -> Point:
    """The dimension variables' sizes, solved by JAX's own solver from the arguments' shapes."""
    from jax._src import core, tree_util
    from jax._src.export import shape_poly

    avals = tuple(core.ShapedArray(s.shape, s.dtype) for s in structs)
    tree = tree_util.tree_structure((avals, {}))
    solution, _, synth = shape_poly.solve_dim_vars(avals, tree)
    ev = shape_poly.ShapeEvaluator({n: np.shape(args[i])[j] for n, i, j in synth})
    return tuple(sorted((k, int(ev.evaluate(v))) for k, v in solution.items()))


def convert(ph: Any) -> dict[str, Any] | str:
    """``define`` keywords for one PolyHarness, or the reason it cannot be converted."""
    from jax import export

    flags = dict(ph.override_jax_config_flags)
    if "random_gamma" in ph.group_name:  # as JAX's test method does
        flags.setdefault("jax_debug_key_reuse", False)
    with _flags(flags):
        args = list(ph.dyn_args_maker(np.random.RandomState(0)))
    if not args:
        return "no dynamic argument"
    if any(not hasattr(a, "shape") or not hasattr(a, "dtype") or np.asarray(a).dtype == object for a in args):
        return "an argument that is not an array"
    try:
        structs = export.symbolic_args_specs(args, ph.polymorphic_shapes, constraints=ph.symbolic_constraints)
        own = _binding(structs, args)
    except Exception as e:
        return f"its specs do not apply to its own arguments ({type(e).__name__})"
    specs = tuple(", ".join(str(d) for d in s.shape) for s in structs)
    env = dict(own)
    if any(shape(s, env) != tuple(np.shape(a)) for s, a in zip(specs, args)):
        return "a spec that does not evaluate to its argument's shape"
    constraints = tuple(ph.symbolic_constraints)
    points = [own]
    from jax._src.internal_test_util.test_harnesses import RandArg

    dyn = _dynamic(ph)
    regen = bool(own) and len(dyn) == len(args) and all(isinstance(a, RandArg) for a in dyn)
    if regen:
        bumped = {k: n + BUMP for k, n in own}
        try:
            regen = all(holds(c, bumped) for c in constraints)
        except Exception:
            regen = False
        if regen:
            points.append(tuple(sorted(bumped.items())))
    dtypes = [np.dtype(a.dtype).name for a in args]
    orig = getattr(ph, "original_harness", None)
    dtype = np.dtype(orig.dtype).name if orig is not None else next((d for d in dtypes if d in DTYPES), "float32")
    if dtype not in DTYPES:
        dtype = "float32"
    with _flags(flags):
        lims = _limitations(ph, args)
    fun = _fun(ph)
    poly = Poly(specs, tuple(points), constraints, (), _maker(ph, flags, specs, own, regen))
    seeds = lambda seed: list(_maker(ph, flags, specs, own, False)(env, np.random.default_rng(seed)))  # noqa: E731
    return {"fun": fun, "dtype": dtype, "group": ph.group_name, "params": {"case": ph.name} if ph.name else {},
            "shapes": [tuple(np.shape(a)) for a in args], "limitations": lims,
            "tol": (ph.tol, ph.tol) if ph.tol is not None else None, "poly": poly, "arg_maker": seeds,
            "source": ph.fullname, "jax_config": tuple(sorted(flags.items()))}


def _limitations(ph: Any, args: list[Any]) -> list[Limitation]:
    out = []
    if ph.expect_error is not None:
        etype, regex = ph.expect_error
        untraced = _static_error(ph, args)
        if untraced is not None:  # JAX defines it symbolically only: its static twin raises too
            out.append(Limitation(f"shape_poly_test expects its export to raise; at its own sizes the function "
                                  f"does not trace either ({untraced})", stage="trace", status="error",
                                  error=f"^{re.escape(untraced)}:"))
        scan = regex == "associative scan over axis of non-constant size"
        out.append(Limitation(f"shape_poly_test expects {etype.__name__}: /{regex}/ at export"
                              + (" (not on tpu, which reduces with reduce_window)" if scan else ""),
                              platforms=tuple(p for p in LOWERING_PLATFORMS if p != "tpu") if scan else (),
                              stage="symbolic_export", status="error", error=regex))
    for rule in JAX_TEST + KNOWN:
        if rule.matches(ph):
            out.append(rule.limitation)
    return out


def _static_error(ph: Any, args: list[Any]) -> str | None:
    """The type of the error tracing ``ph`` at its own arguments raises, or None."""
    import jax

    try:
        jax.make_jaxpr(ph.dyn_fun)(*args)
        return None
    except Exception as e:
        return type(e).__name__


def harnesses(mod: Any) -> list[Any]:
    """The flat ``_POLY_SHAPE_TEST_HARNESSES`` of an imported shape_poly_test module."""
    out: list[Any] = []

    def flat(xs: Any) -> None:
        for x in xs:
            flat(x) if isinstance(x, (list, tuple)) else out.append(x)
    flat(mod._POLY_SHAPE_TEST_HARNESSES)
    return out


def stale(repo: str | None) -> bool:
    """Must the catalog be read (again) for ``repo``?"""
    if LAST.source is None:
        return True
    repo = repo or os.environ.get(ENV)
    return bool(repo) and str(Path(repo).resolve()) != LAST.source.repo


def register(repo: str | None) -> Conversion:
    """Read ``PATH`` at the installed jax's tag from ``repo`` (``$FARM_JAX_REPO`` when None),
    define every PolyHarness that converts, and count the rest."""
    global LAST
    repo = repo or os.environ.get(ENV)
    if not repo:
        raise BadJaxRepo("--catalog shape_poly reads JAX's tests/shape_poly_test.py from a jax repository: "
                         "give --jax-repo PATH")
    src = jaxrepo.read(repo, PATH)
    mod = jaxrepo.load(src, f"_farm_jax_shape_poly_test_{src.blob[:12]}")
    if not hasattr(mod, "_POLY_SHAPE_TEST_HARNESSES"):
        raise BadJaxRepo(f"--jax-repo {repo}: {src.tag}:{PATH} defines no _POLY_SHAPE_TEST_HARNESSES")
    conv = Conversion(src)
    seen: Counter[tuple[Any, ...]] = Counter()
    for ph in harnesses(mod):
        try:
            got = convert(ph)
        except Exception as e:  # its own arguments could not be made: counted, never dropped
            got = f"its arguments could not be made ({type(e).__name__})"
        if isinstance(got, str):
            conv.skipped[ph.fullname] = got
            continue
        ident = (got["group"], got["dtype"], tuple(got["shapes"]), tuple(sorted(got["params"].items())))
        seen[ident] += 1
        if seen[ident] > 1:
            got["params"] = {**got["params"], "n": str(seen[ident])}
        define(FAMILY, got.pop("group"), got.pop("fun"), (), catalog=CATALOG, compare="none",
               group=None, **got)
        conv.converted += 1
    LAST = conv
    return conv
