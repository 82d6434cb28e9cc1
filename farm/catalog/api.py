"""The ``api`` catalog's machinery: the public callables of JAX's user-facing modules, found
by introspection, and per function a ``Spec`` (data: how to call it, on which operand
domains, dtypes and shapes, its NumPy/SciPy twin, what judges it) expanded into harnesses.

The harness modules ``harnesses/api_*.py`` hold the specs, one module per api module, and
call ``declare``; functions they leave without a harness are named with the reason in
``without`` (data, read by ``farm coverage --catalog api``). docs/api.md.

**Public** (``public``): a name of the module that does not start with an underscore and
whose value is callable and is neither a class (``jnp.float32``, ``jnp.ndarray``,
``jnp.dtype`` are classes: scalar types, array types, dtypes), nor a module, nor a
constant. ``jnp.ufunc`` instances (``jnp.add``) are callable objects, not classes: public.

**Judged by**: a spec's ``reference`` is its twin (the same name in the twin module,
``TWIN``) unless it names another; ``None`` with ``why``: the float64 evaluation of the
traced jaxpr judges it (``farm.reference``); an ``invariant``: a statistical or defining
property (samplers: a goodness-of-fit test's p-value). Edge-value variants
(``farm.catalog.special``) are always judged by the jaxpr's float64 evaluation, whose
policy knows flushed subnormals, signed zeros and rounding to the output dtype.
"""
from __future__ import annotations

import importlib
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from farm.catalog import special
from farm.catalog.args import CustomArg
from farm.catalog.definitions import _REGISTRY, define
from farm.catalog.dtypes import COMPLEX, FLOAT, INTEGER, np_dtype
from farm.catalog.harness import Harness, Limitation

CATALOG = "api"

#: label -> the jax module it names; ``scipy.stats.<dist>`` labels are added per
#: distribution submodule of the installed ``jax.scipy.stats`` (``labels``).
MODULES: dict[str, str] = {
    "jnp": "jax.numpy", "jnp.linalg": "jax.numpy.linalg", "jnp.fft": "jax.numpy.fft",
    "scipy.special": "jax.scipy.special", "scipy.linalg": "jax.scipy.linalg", "scipy.stats": "jax.scipy.stats",
    "scipy.signal": "jax.scipy.signal", "nn": "jax.nn", "random": "jax.random",
}

#: The twin module of each label's functions (NumPy/SciPy); ``scipy.stats.<dist>``: ``scipy.stats.<dist>``.
TWINS: dict[str, str] = {
    "jnp": "numpy", "jnp.linalg": "numpy.linalg", "jnp.fft": "numpy.fft", "scipy.special": "scipy.special",
    "scipy.linalg": "scipy.linalg", "scipy.stats": "scipy.stats", "scipy.signal": "scipy.signal",
    "nn": "scipy.special", "random": "scipy.stats",
}


def public(module: Any) -> tuple[str, ...]:
    """The public callables of a module, sorted (the rule is the module docstring's)."""
    out = []
    for name in dir(module):
        if name.startswith("_"):
            continue
        value = getattr(module, name, None)
        if isinstance(value, (type, types.ModuleType)) or not callable(value):
            continue
        out.append(name)
    return tuple(sorted(out))


def labels() -> dict[str, str]:
    """Every label the catalog covers -> its module path, the stats distributions included."""
    stats = importlib.import_module("jax.scipy.stats")
    dists = sorted(n for n in dir(stats) if not n.startswith("_")
                   and isinstance(getattr(stats, n), types.ModuleType))
    return {**MODULES, **{f"scipy.stats.{d}": f"jax.scipy.stats.{d}" for d in dists}}


def twin_module(label: str) -> str:
    return TWINS.get(label) or ("scipy." + label.split(".", 1)[1] if label.startswith("scipy.stats.") else "")


# ---- operands ---------------------------------------------------------------------------

def _ints(rng: np.random.Generator, lo: int, hi: int, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
    if dt.kind == "u":
        lo = max(lo, 0)
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(dt)


def _reals(domain: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    if domain == "positive":
        return rng.uniform(0.1, 4.0, shape)
    if domain == "unit":
        return rng.uniform(-0.95, 0.95, shape)
    if domain == "prob":
        return rng.uniform(0.05, 0.95, shape)
    if domain == "gt1":
        return rng.uniform(1.1, 5.0, shape)
    if domain == "nonzero":
        x = rng.standard_normal(shape) * 2.0
        return np.where(np.abs(x) < 0.25, 0.5, x)
    if domain == "small":
        return rng.uniform(-1.0, 1.0, shape)
    if domain == "angle":
        return rng.uniform(-3.0, 3.0, shape)
    if domain == "sorted":
        return np.sort(rng.standard_normal(shape) * 2.0, axis=-1)
    if domain == "spd":
        a = rng.standard_normal(shape)
        n = shape[-1] if shape else 1
        return a @ np.swapaxes(a, -1, -2) + n * np.eye(n) if len(shape) >= 2 else np.abs(a) + 1.0
    if domain == "matrix":  # well conditioned: a random matrix plus n on its diagonal
        a = rng.standard_normal(shape)
        return a + shape[-1] * np.eye(shape[-1], shape[-2]).T if len(shape) >= 2 else a
    if domain == "count":
        return rng.integers(0, 10, shape).astype(np.float64)
    if domain == "real":
        return rng.standard_normal(shape) * 2.0
    raise ValueError(f"unknown operand domain {domain!r}")


DOMAINS = ("real", "positive", "unit", "prob", "gt1", "nonzero", "small", "angle", "sorted", "spd", "matrix",
           "count", "bool", "index", "key")

#: The one PRNG key every sampler harness draws from (a raw threefry key, uint32[2]): fixed, so
#: that a goodness-of-fit test's p-value is the same on every run (docs/api.md).
KEY = (0, 42)


def operand(domain: str, shape: tuple[int, ...], dtype: str) -> CustomArg:
    """One dynamic input: values of ``domain`` in ``dtype`` (integers: the domain's integer
    range; bool: random bits; complex: a real and an imaginary part from the domain).
    ``index``: integers in [0, 3), int32 whatever ``dtype`` is."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown operand domain {domain!r}; known: {DOMAINS}")

    def make(rng: np.random.Generator) -> np.ndarray:
        dt = np_dtype(dtype)
        if domain == "key":
            return np.array(KEY, np.uint32)
        if domain == "index":
            return rng.integers(0, 3, shape).astype(np.int32)
        if dtype == "bool" or domain == "bool":
            return rng.integers(0, 2, shape) == 1
        if dtype in INTEGER:
            lo, hi = {"positive": (1, 20), "count": (0, 9), "prob": (0, 1), "unit": (-1, 1),
                      "small": (-3, 3)}.get(domain, (-50, 50))
            if domain == "sorted":
                return np.sort(_ints(rng, lo, hi, shape, dt), axis=-1)
            out = _ints(rng, lo, hi, shape, dt)
            return np.where(out == 0, 1, out).astype(dt) if domain == "nonzero" else out
        if dtype in COMPLEX and domain == "spd" and len(shape) >= 2:  # Hermitian positive definite
            a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
            return (a @ np.swapaxes(a, -1, -2).conj() + shape[-1] * np.eye(shape[-1])).astype(dt)
        x = _reals(domain, rng, shape)
        if dtype in COMPLEX:
            x = x + 1j * _reals(domain if domain not in ("spd", "matrix", "sorted") else "real", rng, shape)
        return np.asarray(x).astype(dt)

    fixed = {"index": "int32", "key": "uint32", "bool": "bool"}.get(domain, dtype)
    return CustomArg(f"api:{domain}" + (f"{KEY}" if domain == "key" else ""), make, tuple(shape), fixed)


# ---- specs ------------------------------------------------------------------------------

#: ``Spec.reference``'s default: the function of the same name in the label's twin module.
TWIN = "twin"

#: Operand shapes per template: the main case, then the extra ones a spec's first dtype gets:
#: an empty array, size 1, and (two or more operands) a broadcasting set.
MAIN = (7, 3)


def _call(f: Callable[..., Any], *a: Any, **kw: Any) -> Any:
    return f(*a, **kw)


def lib(f: Callable[..., Any]) -> Any:
    """The array module a spec's ``call`` uses beside ``f``: ``jax.numpy`` for a jax function,
    ``numpy`` for its twin (a call that reduces a non-unique result, ``q @ r``, in both)."""
    if (getattr(f, "__module__", "") or "").startswith("jax"):
        return importlib.import_module("jax.numpy")
    return np


@dataclass(frozen=True)
class Spec:
    """How to call one function and what judges it (data).

    ``operands``: per dynamic operand its domain (``DOMAINS``), ``"domain:dtype"`` for a
    fixed dtype; ``kind``: ``elementwise`` (shapes: 7x3, empty, size 1, a broadcasting
    set), ``reduction`` (7x3 with each ``variants`` keyword set, and 0x3), ``custom``
    (``shapes`` given: per case the operand shapes, the first the main case); ``call``:
    how the function is called with the operands, ``call(f, *operands, **kwargs)`` for
    the jax function and its twin alike (static arguments, reductions of non-unique
    results to unique ones); ``variants``: keyword sets that change the computation, each
    its own harness (``axis``, ``keepdims``, ``ord``, ``mode``...); ``dtypes``: the
    harness dtypes (the first gets every shape and variant, the others the main case);
    ``reference``: ``TWIN``, another NumPy/SciPy callable (same calling convention as
    the function) or None (the jaxpr's float64 evaluation; ``why`` says why);
    ``invariant``: (operands..., outputs...) -> error, for results a reference cannot
    judge; ``edge``: the edge-value variants (``farm.catalog.special``), with
    ``edge_values`` (poles, branch points) added to the dtype's special values, judged
    against the twin where ``edge_reference="twin"`` (rounded to the output dtype, a
    device's flushed subnormal inputs allowed: ``farm.judge.edges.at_edges``), else by the
    jaxpr's float64 evaluation (which computes JAX's own algorithm, so it agrees where that
    is wrong by design).
    """

    name: str
    operands: tuple[str, ...] = ("real",)
    kind: str = "elementwise"
    call: Callable[..., Any] = field(default=_call, repr=False)
    variants: tuple[tuple[tuple[str, Any], ...], ...] = ((),)
    dtypes: tuple[str, ...] = ("float32",)
    shapes: tuple[tuple[tuple[int, ...], ...], ...] = ()
    reference: Any = field(default=TWIN, repr=False)
    why: str = ""
    invariant: Callable[..., Any] | None = field(default=None, repr=False)
    tol: tuple[float, float] | None = None
    limitations: tuple[Limitation, ...] = ()
    edge: bool = True
    edge_values: tuple[float, ...] = ()
    edge_cases: tuple[str, ...] = ()  # only these edge cases (x0, x1..., all); empty: all
    #: what judges the edge variants: jaxpr | twin | both (the twin and the jaxpr: the worse verdict)
    edge_reference: str = "jaxpr"
    #: what the other operands hold while one is at its edges: ordinary (``special.ordinary``'s
    #: generic values) | domain (drawn from each operand's own domain: a probability in [0, 1])
    edge_others: str = "ordinary"
    #: known gaps of the edge-value variants alone, (edge case, limitation) pairs
    edge_limitations: tuple[tuple[str, Limitation], ...] = ()
    #: special values left out of the edge operands: where the function hangs (a finding, a
    #: timeout no limitation can expect; its repro keeps it)
    edge_withheld: tuple[float, ...] = ()
    #: a custom spec's edge variant of rows, one special value a row (``_edge_rows``: transforms over trailing axes)
    edge_rows: bool = False
    #: a matrix function's edge variant of matrices (``_edge_matrices``: jnp.linalg's, scipy.linalg's)
    edge_matrices: bool = False
    #: known gaps of one case alone (main, empty, s1...), (case, limitation) pairs
    case_limitations: tuple[tuple[str, Limitation], ...] = ()
    empty: bool = True
    cases: tuple[str, ...] = ()  # only these cases (main, empty, one, broadcast, s1...); empty: all
    tag: str = ""  # tells apart two specs of one function (in the harness key's params)

    def __post_init__(self) -> None:
        if self.kind not in ("elementwise", "reduction", "custom"):
            raise ValueError(f"unknown spec kind {self.kind!r}")
        if self.kind == "custom" and not self.shapes:
            raise ValueError(f"{self.name}: a custom spec names its shapes")
        if self.edge_others not in ("ordinary", "domain"):
            raise ValueError(f"{self.name}: unknown edge_others {self.edge_others!r}")
        if self.edge_reference not in ("jaxpr", "twin", "both"):
            raise ValueError(f"{self.name}: unknown edge reference {self.edge_reference!r}")
        if self.reference is None and not self.why and self.invariant is None:
            raise ValueError(f"{self.name}: a spec without a reference says why")
        for op in self.operands:
            if op.split(":")[0] not in DOMAINS:
                raise ValueError(f"{self.name}: unknown operand domain {op!r}")


def spec(name: str, *operands: str, variants: Iterable[Mapping[str, Any]] = ({},), **kw: Any) -> Spec:
    """A ``Spec`` written compactly: operands positionally, keyword variants as dicts."""
    return Spec(name, tuple(operands) or ("real",), variants=tuple(tuple(sorted(v.items())) for v in variants), **kw)


def case_shapes(s: Spec) -> list[tuple[str, tuple[tuple[int, ...], ...]]]:
    """(case, the operand shapes) of a spec: the main case first."""
    n = len(s.operands)
    if s.kind == "custom":
        return [("main" if i == 0 else f"s{i}", sh) for i, sh in enumerate(s.shapes)]
    if s.kind == "reduction":
        return [("main", (MAIN,) * n)] + ([("empty", ((0, 3),) * n)] if s.empty else [])
    out = [("main", (MAIN,) * n)]
    if s.empty:
        out.append(("empty", ((0,),) * n))
    out.append(("one", ((),) * n))
    if n >= 2:
        out.append(("broadcast", ((7, 1), (3,), MAIN, (1, 3))[:n]))
    return out


def _resolve(label: str, s: Spec) -> tuple[Callable[..., Any], Callable[..., Any] | None] | None:
    """(the jax function, its reference callable or None) of a spec; None where an older jax than
    the one the catalog was written on (``CHLO_MEASURED``) has no such function (``jnp.top_k``
    before 0.12): no harness, as ``farm coverage``, which lists the installed jax's callables,
    asks for none. On that jax itself a missing name (a typo) still raises."""
    from farm.catalog.known import holds_on  # noqa: PLC0415

    mod = importlib.import_module(labels()[label])
    if not hasattr(mod, s.name) and not holds_on(CHLO_MEASURED):
        return None
    fn = getattr(mod, s.name)
    ref = s.reference
    if ref == TWIN:
        mod: Any = importlib.import_module(twin_module(label).rsplit(".", 1)[0] if label.startswith("scipy.stats.")
                                           else twin_module(label))
        if label.startswith("scipy.stats."):  # scipy.stats.norm is an object, not a module
            mod = getattr(mod, label.rsplit(".", 1)[1])
        ref = getattr(mod, s.name, None)
        if ref is None:
            raise ValueError(f"{label}.{s.name}: {twin_module(label)} has no {s.name}; name its reference")
    return fn, ref


def _operand_dtype(op: str, dtype: str) -> tuple[str, str]:
    domain, _, fixed = op.partition(":")
    return domain, fixed or dtype


#: The jax versions the census data of the harness modules (``CHLO``) was measured on.
CHLO_MEASURED = "~=0.12.0"

#: A module's census data: ``{key: "platform,...: op op; ..."}`` (``chlo_limitations``).
Census = Mapping[str, str]

#: label -> (its census data on ``CHLO_MEASURED``, on other versions): filled by ``declare``, read
#: by ``scripts/census_table.py`` when a new jax is measured.
CENSUS: dict[str, tuple[Census, Mapping[str, Census]]] = {}


def census_text(name: str, tag: str, dtype: str, case: str, chlo: Census) -> str:
    """What ``chlo`` says of a harness of function ``name`` (spec tag ``tag``), ``dtype`` and
    ``case``: the value of its most specific key (``name:tag`` before ``name``; then
    ``/dtype@case``, ``@case``, ``/dtype``, bare), ``""`` where none is there."""
    names = ([f"{name}:{tag}"] if tag else []) + [name]
    keys = [k for n in names for k in (f"{n}/{dtype}@{case}", f"{n}@{case}", f"{n}/{dtype}", n)]
    return next((chlo[k] for k in keys if k in chlo), "")


def _census_parts(text: str) -> list[tuple[tuple[str, ...], list[str]]]:
    """A census value's parts (``;``), each (its platforms, its sorted chlo ops); a note in
    parentheses is not an op."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        plats, _, ops = part.split("(")[0].partition(":")
        out.append((tuple(p.strip() for p in plats.split(",")), sorted(ops.split())))
    return out


def census_ops(text: str) -> dict[str, frozenset[str]]:
    """A census value as platform -> its chlo ops (a platform without ops is left out)."""
    out: dict[str, frozenset[str]] = {}
    for platforms, ops in _census_parts(text):
        for p in platforms:
            out[p] = out.get(p, frozenset()) | frozenset(ops)
    return out


def chlo_limitations(s: Spec, dtype: str, case: str, chlo: Census,
                     on: Mapping[str, Census] | None = None) -> tuple[Limitation, ...]:
    """The census's known failures of a harness of spec ``s``, from its module's measured data:
    ``{key: "platform,...: op op; ..."}``, the non-StableHLO ``chlo`` ops its lowering for each
    platform holds (JAX #15608), measured by ``farm sweep``'s census on ``CHLO_MEASURED``
    (``census_text`` says which key applies); ``""``: none. ``on``: the same data measured on
    other jax versions (a PEP 440 specifier each: the whole table, usually ``{**chlo, **what
    changed}``); a text that two versions share is one limitation holding on both
    (``"~=0.12.0 || ~=0.10.2"``), and a version measured nowhere has none, so its census is
    judged afresh. A forward scan (``chlo.scan``) for cuda and rocm also aborts XLA:CPU's
    compiler in crossexec (``SCAN_ABORTS_CPU``: that record runs apart) unless the data says
    ``(no abort)``; where it says ``(vjp aborts``, the pullback (``--vjp``) holds the forward
    scan too, and the worker that runs it dies (``SCAN_VJP_ABORTS_CPU``: measured, since a
    pullback recomputes only some of the forward)."""
    from farm.catalog.harness import SCAN_ABORTS_CPU, SCAN_VJP_ABORTS_CPU  # noqa: PLC0415  (beside Limitation)
    from farm.catalog.known import CHLO_URL  # noqa: PLC0415

    versions: dict[str, list[str]] = {}
    for spec_, table in {CHLO_MEASURED: chlo, **(on or {})}.items():
        versions.setdefault(census_text(s.name, s.tag, dtype, case, table), []).append(spec_)
    out: list[Limitation] = []
    for text, specs in versions.items():
        jax = " || ".join(specs)
        for platforms, ops_ in _census_parts(text):
            alt = "|".join(ops_)
            out.append(Limitation(f"{s.name} lowers to {', '.join('chlo.' + o for o in ops_)}, which crosses the "
                                  f"plugin boundary ({CHLO_URL})", platforms=platforms, stage="census",
                                  error=rf"CensusViolation: crosses the plugin boundary: chlo\.(?:{alt})(?:, chlo\.(?:{alt}))*$",
                                  jax=jax))
            if "scan" in ops_ and set(platforms) & {"cuda", "rocm"} and "no abort" not in text:
                out.append(SCAN_ABORTS_CPU)
                if "vjp aborts" in text:
                    out.append(SCAN_VJP_ABORTS_CPU)
    return tuple(dict.fromkeys(out))


def declare(label: str, specs: Iterable[Spec], *, limitations: Iterable[Limitation] = (),
            chlo: Census | None = None, chlo_on: Mapping[str, Census] | None = None) -> list[Harness]:
    """Every spec of ``label`` expanded into harnesses of the ``api`` catalog (family and group
    ``label``, primitive the function's name); ``limitations``: the module's own, on each;
    ``chlo``: the module's measured census data, ``chlo_on`` the same on other jax versions
    (``chlo_limitations``)."""
    base = tuple(limitations)
    CENSUS[label] = (dict(chlo or {}), dict(chlo_on or {}))
    out: list[Harness] = []
    for s in specs:
        resolved = _resolve(label, s)
        if resolved is None:
            continue
        fn, ref = resolved
        call = s.call
        for d, dtype in enumerate(s.dtypes):
            cases = [c for c in case_shapes(s) if not s.cases or c[0] in s.cases]
            cases = cases if d == 0 else cases[:1]
            for case, shapes in cases:
                variants = s.variants if (d == 0 and case == "main") else s.variants[:1]
                shared = base + chlo_limitations(s, dtype, case, chlo or {}, chlo_on)
                for v in variants:
                    kw = dict(v)
                    args = [operand(dom, sh, dt) for (dom, dt), sh in
                            zip((_operand_dtype(op, dtype) for op in s.operands), shapes)]
                    params = {**kw, **({"v": s.tag} if s.tag else {}), **({"case": case} if case != "main" else {})}
                    out.append(define(
                        label, s.name, _bind(call, fn, kw), args, dtype=dtype, group=label, params=params,
                        reference=None if ref is None else _bind(call, ref, kw), invariant=s.invariant,
                        # against a reference, values (integers stay exact): jnp.mean of int32 is float32
                        compare="allclose" if ref is not None else None,
                        limitations=s.limitations + tuple(lim for c, lim in s.case_limitations if c == case) + shared,
                        tol=s.tol, catalog=CATALOG, source=f"{labels()[label]}.{s.name}", shapes=shapes))
            if s.edge and (dtype in FLOAT or dtype in INTEGER) and s.kind != "custom":
                out += _edges(label, s, fn, ref, dtype, base + chlo_limitations(s, dtype, "edge", chlo or {}, chlo_on))
            elif s.edge_rows and s.kind == "custom" and d == 0 and ref is not None:
                out.append(_edge_rows(label, s, fn, ref, dtype,
                                      base + chlo_limitations(s, dtype, "edge", chlo or {}, chlo_on)))
            elif s.edge_matrices and s.kind == "custom" and ref is not None and (d == 0 or dtype in COMPLEX):
                out.append(_edge_matrices(label, s, fn, ref, dtype,
                                          base + chlo_limitations(s, dtype, "edge", chlo or {}, chlo_on)))
    return out


def _bind(call: Callable[..., Any], f: Callable[..., Any], kw: dict[str, Any]) -> Callable[..., Any]:
    def bound(*a: Any) -> Any:
        out = call(f, *a, **kw)
        # a named tuple (jnp.unique_counts's, linalg's results) as a plain one: jax.export serializes
        # only pytree nodes registered for it (export.register_namedtuple_serialization), as documented
        return tuple(out) if isinstance(out, tuple) and hasattr(out, "_fields") else out
    bound.__qualname__ = f"{getattr(f, '__module__', '')}.{getattr(f, '__qualname__', f)}"
    return bound


def _domain_values(domain: str, dtype: str) -> Callable[[int], np.ndarray]:
    """n -> n values of ``domain`` in ``dtype`` (drawn from a generator seeded by n: the same
    on every run), what an operand holds while another is at its edges (``edge_others``)."""
    return lambda n: operand(domain, (n,), dtype).make(np.random.default_rng(n))


def _edges(label: str, s: Spec, fn: Callable[..., Any], ref: Callable[..., Any] | None, dtype: str,
           shared: tuple[Limitation, ...]) -> list[Harness]:
    """The edge-value variants of a spec for one dtype: each operand holding every special
    value alone (the others ordinary values), and all of them together; judged against the
    twin ``ref`` where the spec says so (``edge_reference``), else by the float64 evaluation
    of the jaxpr."""
    out = []
    kw = dict(s.variants[0])
    twin = s.edge_reference in ("twin", "both") and ref is not None
    compare = ("edges+jaxpr" if s.edge_reference == "both" else "edges") if twin else None
    dts = [_operand_dtype(op, dtype)[1] for op in s.operands]
    others = [(f"api:{op}", _domain_values(*_operand_dtype(op, dtype))) for op in s.operands] \
        if s.edge_others == "domain" else ()
    for case, args in special.operand_sets(dts, extra=s.edge_values, others=others, withheld=s.edge_withheld):
        if s.edge_cases and case not in s.edge_cases:
            continue
        out.append(define(
            label, s.name, _bind(s.call, fn, kw), list(args), dtype=dtype, group=label,
            params={**kw, **({"v": s.tag} if s.tag else {}), "edge": case},
            reference=_bind(s.call, ref, kw) if twin else None, compare=compare,
            limitations=s.limitations + tuple(lim for c, lim in s.edge_limitations if c == case) + shared, tol=s.tol, catalog=CATALOG, source=f"{labels()[label]}.{s.name}"))
    return out


def _edge_rows(label: str, s: Spec, fn: Callable[..., Any], ref: Callable[..., Any], dtype: str,
               shared: tuple[Limitation, ...]) -> Harness:
    """A transform's edge-value variant (a custom spec of one operand with ``edge_rows=True``: jnp.fft's):
    a batch of rows of the spec's first shape, row i holding special value i (for a complex dtype,
    in the real part, then in the imaginary part) at its first element and values of the operand's
    own domain elsewhere. The transform acts on each row alone (its trailing axes), so each row
    tests one value; judged against the twin (``edge="rows"``: ``farm.judge.edges.twin_at_edges``
    takes any non-finite answer where the twin's is non-finite: which of inf and NaN a transform
    of inf gives is its algorithm's)."""
    if len(s.operands) != 1:
        raise ValueError(f"{s.name}: edge rows need one operand")
    dom, dt = _operand_dtype(s.operands[0], dtype)
    shape = s.shapes[0][0]
    vals = _one_each(dt)

    def make(rng: np.random.Generator) -> np.ndarray:
        rows = operand(dom, (len(vals), *shape), dt).make(np.random.default_rng(len(vals)))
        rows[(slice(None), *(0,) * len(shape))] = vals
        return rows

    kw = dict(s.variants[0])
    arg = CustomArg(f"special_rows:{dt}:{shape}:api:{dom}", make, (len(vals), *shape), dt)
    return define(label, s.name, _bind(s.call, fn, kw), [arg], dtype=dtype, group=label,
                  params={**kw, **({"v": s.tag} if s.tag else {}), "edge": "rows"},
                  reference=_bind(s.call, ref, kw), compare="edges",
                  limitations=s.limitations + tuple(lim for c, lim in s.edge_limitations if c == "rows") + shared, tol=s.tol,
                  catalog=CATALOG, source=f"{labels()[label]}.{s.name}")


#: The structural edges of a matrix (``_edge_matrices``), after one special value at [0, 0] each:
#: all zeros; two equal rows and columns (exactly singular: elimination gives an exact zero pivot,
#: and a symmetric matrix stays symmetric); scaled by 2**66 (float32's squares overflow: sqrt(max)
#: is 1.8e19) and by 2**-66 (its squares are subnormal, flushed by XLA:CPU). Powers of two scale
#: exactly.
STRUCTURAL = ("zero", "singular", "huge", "tiny")
_SCALES = {"huge": 2.0 ** 66, "tiny": 2.0 ** -66}


def _one_each(dtype: str, withheld: tuple[float, ...] = ()) -> np.ndarray:
    """The dtype's special values but those ``withheld``, one an edge row or matrix; for a complex
    dtype each in the real part, then each in the imaginary part."""
    vals = special.kept(special.values(dtype), withheld)
    if dtype in COMPLEX:
        im = np.zeros_like(vals)
        im.imag = vals.real
        vals = np.concatenate([vals, im])
    return vals


def edge_matrix_names(dtype: str, withheld: tuple[float, ...] = ()) -> list[str]:
    """What each member of a matrix edge batch holds, in order (``_edge_matrices``)."""
    return [f"a00={v!r}" for v in _one_each(dtype, withheld).tolist()] + list(STRUCTURAL)


def _edge_matrices(label: str, s: Spec, fn: Callable[..., Any], ref: Callable[..., Any], dtype: str,
                   shared: tuple[Limitation, ...]) -> Harness:
    """A matrix function's edge-value variant (a custom spec with ``edge_matrices=True``): a batch
    of matrices of the first operand's main shape, each testing one thing (``edge_matrix_names``):
    a special value at [0, 0] (for a complex dtype, in the real part, then in the imaginary part;
    a symmetric matrix stays symmetric) among values of the operand's own domain, then the
    ``STRUCTURAL`` edges; for the spec's first dtype, and for complex64 where the spec has it. The
    other operands hold their domain's values, the same for every member. JAX maps the function over the batch (``jax.vmap``, as a batched call lowers); the twin is
    called matrix by matrix, and a matrix it refuses (NumPy's LinAlgError, SciPy's "must not
    contain infs or NaNs") has NaN for its answer. Judged against the twin (``edge="matrices"``:
    ``farm.judge.edges.twin_at_edges``): normwise per matrix, as LAPACK's own tests hold a
    factorization, and a refused or all-non-finite answer is matched by any non-finite one."""
    doms = [_operand_dtype(op, dtype) for op in s.operands]
    dom, dt = doms[0]
    shape = s.shapes[0][0]
    vals = _one_each(dt, s.edge_withheld)
    n = len(vals) + len(STRUCTURAL)
    wide = np.complex128 if dt in COMPLEX else np.float64

    def make(rng: np.random.Generator) -> np.ndarray:
        base = operand(dom, shape, dt).make(np.random.default_rng(n))
        mats = np.repeat(base[None], n, axis=0)
        mats[(slice(None, len(vals)), *(0,) * len(shape))] = vals
        mats[len(vals)] = 0
        sing = mats[len(vals) + 1]
        sing[1] = sing[0]
        if len(shape) == 2 and shape[0] == shape[1]:
            sing[:, 1] = sing[:, 0]
        for i, k in enumerate(("huge", "tiny")):
            mats[len(vals) + 2 + i] = (base.astype(wide) * _SCALES[k]).astype(mats.dtype)
        return mats

    kw = dict(s.variants[0])
    jf, rf = _bind(s.call, fn, kw), _bind(s.call, ref, kw)
    rest = [operand(d, sh, t) for (d, t), sh in zip(doms[1:], s.shapes[0][1:])]

    def batched(mats: Any, *others: Any) -> Any:
        import jax  # noqa: PLC0415  (the catalog is built without importing jax)
        return jax.vmap(jf, in_axes=(0, *(None,) * len(others)))(mats, *others)

    batched.__qualname__ = f"vmap({jf.__qualname__})"

    def per_matrix(mats: Any, *others: Any) -> Any:
        return _stacked([_answer(rf, m, others) for m in np.asarray(mats)])

    held = f":withheld={','.join(map(repr, s.edge_withheld))}" if s.edge_withheld else ""
    arg = CustomArg(f"special_matrices:{dt}:{shape}:{len(STRUCTURAL)}{held}:api:{dom}", make, (n, *shape), dt)
    return define(label, s.name, batched, [arg, *rest], dtype=dtype, group=label,
                  params={**kw, **({"v": s.tag} if s.tag else {}), "edge": "matrices"},
                  reference=per_matrix, compare="edges",
                  limitations=s.limitations + tuple(lim for c, lim in s.edge_limitations if c == "matrices") + shared,
                  tol=s.tol, catalog=CATALOG, source=f"{labels()[label]}.{s.name}")


def _answer(f: Callable[..., Any], m: np.ndarray, others: tuple[Any, ...]) -> Any:
    """The twin's answer for one matrix, or None where it refuses the matrix (NumPy's
    LinAlgError; SciPy's check_finite: "array must not contain infs or NaNs")."""
    try:
        with np.errstate(all="ignore"):
            return f(m, *others)
    except np.linalg.LinAlgError:
        return None
    except ValueError as e:
        if "infs or NaNs" in str(e):
            return None
        raise


def _stacked(answers: list[Any]) -> Any:
    """The twin's answers for a batch, stacked (a tuple of outputs stacked output by output); a
    refused matrix's answer is NaN of the shape the others have."""
    template = next((a for a in answers if a is not None), None)
    if template is None:
        raise np.linalg.LinAlgError("the twin refused every matrix of the batch")
    if isinstance(template, tuple):
        return tuple(_stacked([None if a is None else a[i] for a in answers]) for i in range(len(template)))
    t = np.asarray(template)
    if any(a is None for a in answers):
        t = t.astype(np.result_type(t.dtype, np.float64))
        return np.stack([np.full(t.shape, np.nan, t.dtype) if a is None else np.asarray(a, t.dtype) for a in answers])
    return np.stack([np.asarray(a) for a in answers])


# ---- JAX's documented gaps that several modules meet ---------------------------------------

#: jnp.linalg.eig (and what calls it: eigvals, roots) runs on CPU and GPU only: no TPU lowering, and
#: the GPU kernels (cuhybrid_eig_*, hiphybrid_eig_*) are custom calls without a compatibility
#: guarantee, which jax.export refuses (https://docs.jax.dev/en/latest/_autosummary/jax.numpy.linalg.eig.html:
#: "only implemented on CPU and GPU"; the farm's linalg family declares the same gaps).
EIG = (Limitation("no eig lowering for tpu (jnp.linalg.eig: CPU and GPU only)", platforms=("tpu",), stage="lower",
                  error="NotImplementedError"),
       Limitation("cuda/rocm eig lowers to cuhybrid_eig_*/hiphybrid_eig_*, custom calls without a compatibility "
                  "guarantee: not exportable", platforms=("cuda", "rocm"), stage="export",
                  # the static export's error type, and jax.export's own words (a symbolic export's)
                  error="UnguaranteedCustomCall|custom calls whose targets have no compatibility guarantees"))


# ---- coverage ---------------------------------------------------------------------------

#: label -> {function: why it has no harness}: filled by the harness modules (``without``).
WITHOUT: dict[str, dict[str, str]] = {}

NOT_IN_CATALOG = "no harness (not in the catalog)"


def without(label: str, reasons: Mapping[str, str]) -> None:
    """Name the public callables of ``label`` that have no harness, each with its reason."""
    WITHOUT.setdefault(label, {}).update(reasons)


@dataclass(frozen=True, slots=True)
class ModuleCoverage:
    """One api module: its public callables, those with harnesses, the others with reasons."""

    label: str
    module: str
    public: tuple[str, ...]
    covered: tuple[str, ...]
    missing: tuple[tuple[str, str], ...]

    @property
    def percent(self) -> float:
        return 100.0 * len(self.covered) / len(self.public) if self.public else 100.0


def coverage(harnesses: Sequence[Harness] | None = None,
             modules: Mapping[str, Any] | None = None) -> list[ModuleCoverage]:
    """Per label: the installed module's public callables against the api harnesses
    (``modules``: label -> module object, to count another set of modules)."""
    hs = list(_REGISTRY.get(CATALOG, [])) if harnesses is None else list(harnesses)
    have: dict[str, set[str]] = {}
    for h in hs:
        have.setdefault(h.family, set()).add(h.primitive)
    if modules is None:
        modules = {lab: importlib.import_module(path) for lab, path in labels().items()}
    out = []
    for lab, mod in modules.items():
        names = public(mod)  # scipy.stats: its functions; each distribution is a label of its own
        covered = tuple(n for n in names if n in have.get(lab, ()))
        missing = tuple((n, WITHOUT.get(lab, {}).get(n, NOT_IN_CATALOG)) for n in names if n not in covered)
        out.append(ModuleCoverage(lab, getattr(mod, "__name__", lab), names, covered, missing))
    return out


def coverage_markdown(rows: Sequence[ModuleCoverage]) -> str:
    """The per-module table, then each callable without a harness and why."""
    lines = ["# API coverage (api catalog)", "",
             "Public callables of each module of the installed jax (farm.catalog.api.public) against the api "
             "catalog's harnesses.", "",
             "| module | public callables | with harnesses | % |", "|---|---:|---:|---:|"]
    tot_pub = tot_cov = 0
    for r in rows:
        lines.append(f"| {r.label} | {len(r.public)} | {len(r.covered)} | {r.percent:.0f}% |")
        tot_pub += len(r.public)
        tot_cov += len(r.covered)
    lines.append(f"| all | {tot_pub} | {tot_cov} | {100.0 * tot_cov / max(tot_pub, 1):.0f}% |")
    lines += ["", "## Without a harness", "", "| module | function | why |", "|---|---|---|"]
    for r in rows:
        lines += [f"| {r.label} | {n} | {why} |" for n, why in r.missing]
    return "\n".join(lines) + "\n"
