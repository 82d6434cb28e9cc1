"""The harness model: keys, argument descriptors, limitations, define() and select().

A harness is one primitive x dtype x shapes x params case. Its identity is a
structured ``HarnessKey``; the display name and the fingerprint are derived from the
key (and the argument descriptors and seed), never parsed back out of a name.
Inputs come from a generator seeded by the fingerprint, so every worker on every
host makes the same bytes.
"""
from __future__ import annotations

import fnmatch
import hashlib
import importlib
import linecache
import re
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from farm.errors import UnknownName
from farm.platforms import LOWERING_PLATFORMS
from farm.results import LIMITATION_STAGES, RUN_STAGES  # noqa: F401  (catalog.LIMITATION_STAGES)

DTYPES: tuple[str, ...] = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "bfloat16", "float16", "float32", "float64", "complex64", "complex128",
)
X64_DTYPES = frozenset({"int64", "uint64", "float64", "complex128"})
INTEGER = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
FLOAT = ("bfloat16", "float16", "float32", "float64")
COMPLEX = ("complex64", "complex128")
INEXACT = FLOAT + COMPLEX
NUMERIC = INTEGER + INEXACT
ALL = ("bool",) + NUMERIC

#: Default tolerances (rtol, atol) by result dtype; integers and bool are exact.
DEFAULT_TOL: dict[str, tuple[float, float]] = {
    "bfloat16": (2e-2, 1e-2),
    "float16": (4e-3, 1e-3),
    "float32": (2e-5, 1e-6),
    "float64": (1e-12, 1e-14),
    "complex64": (2e-5, 1e-6),
    "complex128": (1e-12, 1e-14),
}


def np_dtype(name: str) -> np.dtype:
    """The numpy dtype for a farm dtype name (bfloat16 through ml_dtypes)."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


# --------------------------------------------------------------------------- args
@dataclass(frozen=True, slots=True)
class RandArg:
    """A random array of a shape and dtype; ``kind`` picks the value domain."""

    shape: tuple[int, ...]
    dtype: str
    kind: str = "normal"  # normal | positive | unit | small_int | nonzero | bits

    def make(self, rng: np.random.Generator) -> np.ndarray:
        dt = np_dtype(self.dtype)
        shape = self.shape
        if self.dtype == "bool":
            return rng.integers(0, 2, size=shape).astype(bool)
        if self.dtype in INTEGER:
            info = np.iinfo(dt)
            if self.kind == "bits":
                lo, hi = int(info.min), int(info.max)
            elif self.kind == "positive":
                lo, hi = 1, min(int(info.max), 100)
            elif self.kind == "small_int":
                lo, hi = 0, min(int(info.bits) - 1, int(info.max))
            else:
                lo, hi = max(int(info.min), -50), min(int(info.max), 50)
            out = rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64 if lo < 0 or hi < 2**63 else np.uint64)
            if self.kind == "nonzero":
                out = np.where(out == 0, 1, out)
            return out.astype(dt)
        real = self._real(rng, shape)
        if self.dtype in COMPLEX:
            real = real + 1j * self._real(rng, shape)
        return np.asarray(real).astype(dt)

    def _real(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        if self.kind == "positive":
            return rng.uniform(0.1, 4.0, size=shape)
        if self.kind == "unit":
            return rng.uniform(-0.95, 0.95, size=shape)
        if self.kind == "nonzero":
            x = rng.standard_normal(size=shape)
            return np.where(np.abs(x) < 0.1, 0.5, x)
        return rng.standard_normal(size=shape) * 2.0

    def describe(self) -> str:
        kind = "" if self.kind == "normal" else f":{self.kind}"
        return f"{self.dtype}[{','.join(map(str, self.shape))}]{kind}"


@dataclass(frozen=True, slots=True)
class StaticArg:
    """A Python value passed as a static (compile-time) argument."""

    value: Any

    def describe(self) -> str:
        return repr(self.value)


@dataclass(frozen=True, slots=True)
class DtypeArg(StaticArg):
    """A dtype name passed as a static argument (a conversion's target, an accumulator).

    Unlike a plain ``StaticArg`` it counts for ``Harness.needs_x64``: a harness that
    converts to ``float64`` runs with x64 enabled, or JAX would silently make it
    ``float32``.
    """

    def __post_init__(self) -> None:
        if self.value not in DTYPES:
            raise UnknownName("dtype", self.value, DTYPES)

    @property
    def dtype(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class CustomArg:
    """An input made by a function of the seeded generator (indices, SPD matrices...).

    ``name`` is its identity in the fingerprint; change it when the maker changes.
    """

    name: str
    maker: Callable[[np.random.Generator], Any] = field(compare=False, hash=False, repr=False)
    shape: tuple[int, ...] = ()
    dtype: str = ""

    def make(self, rng: np.random.Generator) -> Any:
        return self.maker(rng)

    def describe(self) -> str:
        if self.dtype:
            return f"{self.name}:{self.dtype}[{','.join(map(str, self.shape))}]"
        return self.name


Arg = RandArg | StaticArg | DtypeArg | CustomArg


def _arg_dtype(a: Arg) -> str:
    """The dtype an argument brings into the computation ("" for plain static values)."""
    if isinstance(a, DtypeArg):
        return a.value
    if isinstance(a, StaticArg):
        return ""
    return getattr(a, "dtype", "")


# -------------------------------------------------------------------- limitations
@dataclass(frozen=True, slots=True)
class Limitation:
    """A known gap, as data: on these platforms x dtypes this stage is expected to fail.

    Empty ``platforms`` or ``dtypes`` means all. ``stage="compare"`` with ``tol`` set
    means "needs a looser tolerance" rather than "fails". ``stage="run"``: fails somewhere
    between lowering and comparing on that platform (see ``RUN_STAGES``).
    """

    description: str
    platforms: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()
    stage: str = "lower"
    tol: tuple[float, float] | None = None
    #: the harness is known to kill the process there (JAX's ``skip_run``): a ``crashed``
    #: outcome on a native run of that platform is the expected failure, not a finding
    crashes: bool = False
    #: which failure is expected: a regular expression searched in "ErrorType: message"
    #: (and the status it must have, e.g. "error" or "fail"). A different failure behind
    #: the same limitation is a ``fail`` that shows both. None: any failure.
    error: str | None = None
    status: str | None = None

    def __post_init__(self) -> None:
        if self.stage not in LIMITATION_STAGES:
            raise ValueError(f"Limitation stage must be one of {LIMITATION_STAGES}, got {self.stage!r}")
        if self.status is not None and self.status not in ("fail", "error", "not_runnable_here"):
            raise ValueError(f"Limitation status must be fail, error or not_runnable_here, got {self.status!r}")
        if self.error is not None:
            re.compile(self.error)  # a bad pattern fails where the harness is defined

    def expects(self, status: str, error_type: str | None, error: str | None) -> bool:
        """Is this failure the one the limitation describes?"""
        if self.status is not None and status != self.status:
            return False
        return self.error is None or re.search(self.error, f"{error_type or ''}: {error or ''}") is not None

    def applies(self, platform: str, dtype: str) -> bool:
        return (not self.platforms or platform in self.platforms) and (not self.dtypes or dtype in self.dtypes)


def chlo_leak(op: str) -> Limitation:
    """JAX lowers this op to a non-StableHLO ``chlo`` op on every platform (JAX #15608)."""
    return Limitation(f"lowers to chlo.{op}, which crosses the plugin boundary (JAX #15608)",
                      platforms=LOWERING_PLATFORMS, stage="census")


# ------------------------------------------------------------------------ harness
@dataclass(frozen=True, slots=True)
class HarnessKey:
    """What a harness is: primitive, group, dtype, argument shapes and params."""

    primitive: str
    group: str
    dtype: str
    shapes: tuple[tuple[int, ...], ...]
    params: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        shapes = "_".join("x".join(map(str, s)) or "scalar" for s in self.shapes)
        params = "".join(f"_{k}={v}" for k, v in self.params)
        base = self.group if self.group == self.primitive else f"{self.group}.{self.primitive}"
        return f"{base}_{self.dtype}_{shapes}{params}"


#: Modules whose functions are named, not hashed: their bodies change with the library's version.
_LIBRARY = ("jax", "jaxlib", "numpy", "scipy", "ml_dtypes")


def _last_line(code: types.CodeType) -> int:
    nested = (_last_line(c) for c in code.co_consts if isinstance(c, types.CodeType))
    own = (line for _, _, line in code.co_lines() if line is not None)
    return max(code.co_firstlineno, *own, *nested)


def _code_digest(obj: Any, h: "hashlib._Hash") -> None:
    """Feed a function's source text into a hash.

    Source lines, not bytecode: bytecode differs between Python versions, and a
    fingerprint (and the inputs seeded from it) must be the same on a CPU host with
    Python 3.11 and a device host with 3.12. Bytecode is the fallback when the source
    file is not there.
    """
    obj = getattr(obj, "__wrapped__", obj)
    code = getattr(obj, "__code__", None)
    module = getattr(obj, "__module__", None) or ""
    if module.startswith(_LIBRARY) and not module.endswith("test_harnesses"):
        code = None  # a library function (lax.tanh): its name is the definition, not its body
    if code is None:
        h.update(repr(getattr(obj, "__qualname__", type(obj).__name__)).encode())
        return
    lines = linecache.getlines(code.co_filename)
    last = _last_line(code)
    text = "".join(lines[code.co_firstlineno - 1:last])
    if text:
        h.update(text.strip().encode())
    else:
        h.update(code.co_code)
        h.update(repr(code.co_names).encode())


@dataclass(frozen=True)
class Harness:
    """One catalog entry. ``fun`` takes the arguments in ``args`` order."""

    key: HarnessKey
    fun: Callable[..., Any] = field(repr=False)
    args: tuple[Arg, ...]
    family: str
    catalog: str = "farm"
    reference: Callable[..., Any] | None = field(default=None, repr=False)
    compare: str = "allclose"  # allclose | exact | invariant name | none
    invariant: Callable[..., Any] | None = field(default=None, repr=False)
    limitations: tuple[Limitation, ...] = ()
    tol: tuple[float, float] | None = None
    seed: int = 0
    devices: int = 1
    source: str = ""  # e.g. the upstream harness fullname
    arg_maker: Callable[[int], list[Any]] | None = field(default=None, repr=False)
    timeout_s: float | None = None

    @property
    def name(self) -> str:
        return self.key.name

    @property
    def primitive(self) -> str:
        return self.key.primitive

    @property
    def group(self) -> str:
        return self.key.group

    @property
    def dtype(self) -> str:
        return self.key.dtype

    @property
    def needs_x64(self) -> bool:
        if self.catalog == "upstream":
            return False
        return self.dtype in X64_DTYPES or any(_arg_dtype(a) in X64_DTYPES for a in self.args)

    @property
    def fingerprint(self) -> str:
        """Stable hash of definition, inputs and seed (cached on first use)."""
        fp = self.__dict__.get("_fp")
        if fp is None:
            h = hashlib.sha256()
            h.update(repr((self.catalog, self.key, self.seed, self.source, self.devices)).encode())
            h.update(repr(tuple(a.describe() for a in self.args)).encode())
            _code_digest(self.fun, h)
            fp = h.hexdigest()[:20]
            object.__setattr__(self, "_fp", fp)
        return fp

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(int(self.fingerprint[:16], 16) ^ self.seed)

    def make_args(self) -> list[Any]:
        """All arguments (static ones included), bit-identical on every host."""
        if self.arg_maker is not None:
            return self.arg_maker(int(self.fingerprint[:8], 16))
        rng = self.rng()
        return [a.value if isinstance(a, StaticArg) else a.make(rng) for a in self.args]

    def static_argnums(self) -> tuple[int, ...]:
        return tuple(i for i, a in enumerate(self.args) if isinstance(a, StaticArg))

    def limitation(self, platform: str, stage: str | None = None) -> Limitation | None:
        """The first limitation that covers this platform (and stage, if given)."""
        for lim in self.limitations:
            if lim.applies(platform, self.dtype) and (stage is None or lim.stage == stage) and lim.tol is None:
                return lim
        return None

    def tolerance(self, platform: str, dtype: str | None = None) -> tuple[float, float]:
        for lim in self.limitations:
            if lim.tol is not None and lim.applies(platform, self.dtype):
                return lim.tol
        if self.tol is not None:
            return self.tol
        return DEFAULT_TOL.get(dtype or self.dtype, (0.0, 0.0))

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "fingerprint": self.fingerprint,
            "catalog": self.catalog,
            "family": self.family,
            "primitive": self.primitive,
            "group": self.group,
            "dtype": self.dtype,
            "shapes": [list(s) for s in self.key.shapes],
            "params": dict(self.key.params),
            "args": [a.describe() for a in self.args],
            "compare": self.compare,
            "devices": self.devices,
            "source": self.source,
            "limitations": [
                {"description": l.description, "platforms": list(l.platforms), "dtypes": list(l.dtypes),
                 "stage": l.stage, "tol": list(l.tol) if l.tol else None, "error": l.error, "status": l.status}
                for l in self.limitations
            ],
        }


# ----------------------------------------------------------------------- registry
_REGISTRY: dict[str, list[Harness]] = {}
_LOADED: set[str] = set()

#: Family modules of the farm's own catalog, imported on first use.
FARM_FAMILIES: tuple[str, ...] = (
    "elementwise_unary", "elementwise_binary", "comparison", "bitwise", "conversion",
    "reduction", "cumulative", "dot_conv", "shape", "indexing", "sort", "control_flow",
    "linalg", "random", "fft", "special", "collective",
)


def _shape_of(a: Arg) -> tuple[int, ...] | None:
    if isinstance(a, RandArg):
        return a.shape
    if isinstance(a, CustomArg) and a.dtype:
        return a.shape
    return None


def define(
    family: str,
    primitive: str,
    fun: Callable[..., Any],
    args: Sequence[Arg],
    *,
    dtype: str,
    group: str | None = None,
    params: dict[str, Any] | None = None,
    reference: Callable[..., Any] | None = None,
    compare: str | None = None,
    invariant: Callable[..., Any] | None = None,
    limitations: Iterable[Limitation] = (),
    tol: tuple[float, float] | None = None,
    devices: int = 1,
    catalog: str = "farm",
    source: str = "",
    arg_maker: Callable[[int], list[Any]] | None = None,
    shapes: Sequence[tuple[int, ...]] | None = None,
    timeout_s: float | None = None,
) -> Harness:
    """Declare one harness and append it to its catalog's registry."""
    if dtype not in DTYPES:
        raise UnknownName("dtype", dtype, DTYPES)
    if shapes is None:
        shapes = [s for s in (_shape_of(a) for a in args) if s is not None]
    key = HarnessKey(
        primitive=primitive,
        group=group or primitive,
        dtype=dtype,
        shapes=tuple(tuple(int(d) for d in s) for s in shapes),
        params=tuple(sorted((k, str(v)) for k, v in (params or {}).items())),
    )
    if compare is None:
        compare = "exact" if dtype in INTEGER + ("bool",) else ("allclose" if reference else "none")
    h = Harness(
        key=key, fun=fun, args=tuple(args), family=family, catalog=catalog, reference=reference,
        compare=compare, invariant=invariant, limitations=tuple(limitations), tol=tol,
        devices=devices, source=source, arg_maker=arg_maker, timeout_s=timeout_s,
    )
    _REGISTRY.setdefault(catalog, []).append(h)
    return h


CATALOGS = ("farm", "upstream", "all")


def load(catalog: str = "farm", modules: Iterable[str] = ()) -> list[Harness]:
    """Import a catalog's family modules (once) and return its harnesses."""
    for mod in modules:
        if mod not in _LOADED:
            try:
                importlib.import_module(mod)
            except ModuleNotFoundError as e:
                from farm.errors import ConfigError

                raise ConfigError(f"cannot import harness module {mod!r}: {e}") from None
            _LOADED.add(mod)
    if catalog not in CATALOGS and catalog not in _REGISTRY:
        raise UnknownName("catalog", catalog, set(CATALOGS) | set(_REGISTRY))
    if catalog in ("farm", "all") and "farm" not in _LOADED:
        for fam in FARM_FAMILIES:
            try:
                importlib.import_module(f"harnesses.{fam}")
            except ModuleNotFoundError as e:
                if e.name != f"harnesses.{fam}":
                    raise
        _LOADED.add("farm")
    if catalog in ("upstream", "all") and "upstream" not in _LOADED:
        from harnesses import upstream

        upstream.register()
        _LOADED.add("upstream")
    if catalog == "all":
        return _REGISTRY.get("farm", []) + _REGISTRY.get("upstream", [])
    return list(_REGISTRY.get(catalog, []))


@dataclass(frozen=True, slots=True)
class Filters:
    """A selection: each field a tuple of accepted values (empty = any)."""

    catalog: str = "farm"
    primitive: tuple[str, ...] = ()
    group: tuple[str, ...] = ()
    dtype: tuple[str, ...] = ()
    family: tuple[str, ...] = ()
    name: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    limit: int | None = None

    @classmethod
    def parse(cls, catalog: str = "farm", primitive: str | None = None, group: str | None = None,
              dtype: str | None = None, family: str | None = None, name: str | None = None,
              modules: str | None = None, limit: int | None = None) -> "Filters":
        split = lambda s: tuple(x.strip() for x in s.split(",") if x.strip()) if s else ()
        return cls(catalog=catalog, primitive=split(primitive), group=split(group), dtype=split(dtype),
                   family=split(family), name=split(name), modules=split(modules), limit=limit)

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in
                ((f, getattr(self, f)) for f in self.__dataclass_fields__)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Filters":
        return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()})


def select(filters: Filters) -> list[Harness]:
    """Harnesses matching every filter. Unknown values raise ``UnknownName``."""
    harnesses = load(filters.catalog, filters.modules)
    for d in filters.dtype:
        if d not in DTYPES:
            raise UnknownName("dtype", d, DTYPES)
    checks = (("primitive", filters.primitive), ("group", filters.group), ("family", filters.family))
    for attr, wanted in checks:
        if wanted:
            known = {getattr(h, attr) for h in harnesses}
            for w in wanted:
                if w not in known:
                    raise UnknownName(attr, w, known)
    out = []
    for h in harnesses:
        if filters.primitive and h.primitive not in filters.primitive:
            continue
        if filters.group and h.group not in filters.group:
            continue
        if filters.family and h.family not in filters.family:
            continue
        if filters.dtype and h.dtype not in filters.dtype:
            continue
        if filters.name and not any(
            (fnmatch.fnmatchcase(h.name, pat) if any(c in pat for c in "*?[") else pat in h.name)
            for pat in filters.name
        ):
            continue
        out.append(h)
    if filters.limit is not None:
        out = out[: filters.limit]
    return out


def by_fingerprint(harnesses: Iterable[Harness]) -> dict[str, Harness]:
    return {h.fingerprint: h for h in harnesses}


def check_platforms(platforms: Iterable[str]) -> tuple[str, ...]:
    out = tuple(platforms)
    for p in out:
        if p not in LOWERING_PLATFORMS:
            raise UnknownName("platform", p, LOWERING_PLATFORMS)
    return out
