"""What a harness is: its ``HarnessKey``, its known gaps (``Limitation``) and the ``Harness`` itself.

The display name and the fingerprint are derived from the key (and the argument
descriptors and seed), never parsed back out of a name. Inputs come from a generator
seeded by the fingerprint, so every worker on every host makes the same bytes.
"""
from __future__ import annotations

import hashlib
import linecache
import re
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from farm.catalog.args import Arg, StaticArg, _arg_dtype
from farm.catalog.dtypes import X64_DTYPES
from farm.catalog.effects import Effects
from farm.catalog.pallas import Kernel
from farm.catalog.features import ExportFeature
from farm.catalog.known import CHLO_GONE, CHLO_OPS, CHLO_SINCE, check_spec, holds_on
from farm.catalog.specs import Point, check
from farm.platforms import LOWERING_PLATFORMS
from farm.results import EXPECTABLE, check_specs, limitation_stages


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
    #: the jax versions the gap is known on (a PEP 440 specifier, "<0.12", or several joined by
    #: ``||``, any of which holds: versions measured apart; "": every version).
    #: Outside them the limitation does not apply: a pass there is a pass, a failure a finding.
    jax: str = ""
    #: a known crash (``crashes``) that only a sweep differentiating to this order meets (``--vjp``):
    #: in a sweep of a lower order the same crash is news
    vjp: int = 0

    def __post_init__(self) -> None:
        check_spec(self.jax)  # a bad specifier fails where the harness is defined
        if self.stage not in (known := limitation_stages()):
            raise ValueError(f"Limitation stage must be one of {known}, got {self.stage!r}")
        if self.status is not None and self.status not in EXPECTABLE:
            raise ValueError(f"Limitation status must be fail, error, not_runnable_here or crashed, got {self.status!r}")
        if self.error is not None:
            re.compile(self.error)  # a bad pattern fails where the harness is defined

    def expects(self, status: str, error_type: str | None, error: str | None) -> bool:
        """Is this failure the one the limitation describes?"""
        if self.status is not None and status != self.status:
            return False
        return self.error is None or re.search(self.error, f"{error_type or ''}: {error or ''}") is not None

    def applies(self, platform: str, dtype: str) -> bool:
        return ((not self.platforms or platform in self.platforms) and (not self.dtypes or dtype in self.dtypes)
                and holds_on(self.jax))


def chlo_leak(op: str, dtype: str = "") -> list[Limitation]:
    """JAX lowers this op to a non-StableHLO ``chlo`` op (JAX #15608): one of the known ones
    (``farm.catalog.known.CHLO_LEAKS``), on every platform, or, where a newer jax lowers it
    without the op on some platforms for a harness of ``dtype`` (``known.CHLO_GONE``), there
    only on the jax versions before that one."""
    if op not in CHLO_OPS:
        raise ValueError(f"chlo.{op} is not a known chlo leak: add it to farm.catalog.known.CHLO_LEAKS")
    why = f"lowers to chlo.{op}, which crosses the plugin boundary (JAX #15608)"
    gone = CHLO_GONE.get(op)
    if gone is None or (gone[1] and dtype not in gone[1]):
        return [Limitation(why, platforms=LOWERING_PLATFORMS, stage="census", jax=CHLO_SINCE.get(op, ""))]
    platforms, _, since = gone
    still = tuple(p for p in LOWERING_PLATFORMS if platforms and p not in platforms)
    return ([Limitation(why, platforms=still, stage="census")] if still else []) + [
        Limitation(f"{why}, before jax {since}", platforms=platforms or LOWERING_PLATFORMS, stage="census",
                   jax=f"<{since}")]


#: Found by ``farm sweep --jax 0.12.0.1`` (docs/findings.md): jax 0.12 lowers a forward cumsum
#: for cuda and rocm to ``chlo.scan``, and XLA:CPU compiling that module (crossexec) aborts the
#: process ("Check failed: operand_maps.size() == 1" in computation_partitioner.cc); 0.10.2's
#: module for cuda compiles and runs there (repro: docs/findings.md). On an H200 with jax 0.11.2
#: the module is chlo.scan too, runs right on the GPU, and aborts XLA:CPU the same way. The same
#: check failure on GPU upstream: openxla/xla#47373. Used by the cumulative and symbolic families.
#: The crossexec of those modules runs in a process of its own (``farm.pipeline.apart``): its
#: death is that record's, and the harness keeps every other.
SCAN_ABORTS_CPU = Limitation("jax 0.11.2 and 0.12's cuda/rocm cumsum module (chlo.scan) aborts XLA:CPU's compiler",
                             platforms=("cuda", "rocm"), stage="crossexec", crashes=True, status="crashed",
                             error="Check failed: operand_maps.size", jax=">=0.11.2")
#: Shared by the Pallas primitive and feature families (``harnesses/pallas_prims.py``,
#: ``pallas_features.py``): JAX refuses Mosaic GPU for ROCm (jax 0.9.2-0.11's ``pallas_call``),
#: and jax 0.12 lowers a ``plgpu.kernel`` twin for rocm with Triton, which refuses its mesh.
ROCM_MOSAIC = Limitation("Mosaic GPU does not support ROCm", platforms=("rocm:mosaic_gpu",), stage="pallas_export",
                         error="Mosaic GPU does not yet support AMD ROCm devices", jax="<0.12")
ROCM_MOSAIC_MESH = Limitation("jax 0.12 lowers a plgpu.kernel for rocm with Triton, which refuses its mesh",
                              platforms=("rocm:mosaic_gpu",), stage="pallas_export",
                              error="mesh is not supported in the Triton backend", jax=">=0.12")
#: Under ``--vjp`` the same module is a pullback the gradients stage runs in the worker itself
#: (a reverse cumsum's derivative is a forward cumsum, and so is a forward one's second
#: derivative, ``--vjp 2``): the worker dies, and the harness is one ``crashed`` record,
#: expected there and only in a sweep of that order (``farm.judge.limitations.judge_crash``).
SCAN_VJP_ABORTS_CPU = Limitation("under --vjp, jax 0.11.2 and 0.12's cuda/rocm cumsum pullback (chlo.scan) aborts "
                                 "XLA:CPU's compiler in the worker", platforms=("cpu",), stage="crossexec",
                                 crashes=True, jax=">=0.11.2", vjp=1)
SCAN_VJP2_ABORTS_CPU = Limitation("under --vjp 2, jax 0.11.2 and 0.12's cuda/rocm pullback of a forward cumsum's "
                                  "derivative (a forward cumsum: chlo.scan) aborts XLA:CPU's compiler in the worker",
                                  platforms=("cpu",), stage="crossexec", crashes=True, jax=">=0.11.2", vjp=2)
#: Found by JAX's own catalog under ``--vjp`` (docs/findings.md, docs/repros/clamp_min_above_max_grad.py),
#: declared by both catalogs' clamp harnesses with crossed bounds: the first and second
#: derivatives (``--vjp 2``), on every platform a vjp record judges numbers on.
CLAMP_CROSSED_GRAD = tuple(Limitation(
    "jax bug: where min > max, lax.clamp is max but its derivatives with respect to min, operand and max are all 0 "
    "(its JVP rules assume min <= max; jnp.clip gives 1 for max)", platforms=LOWERING_PLATFORMS,
    stage=stage, status="fail", error="GradientMismatch") for stage in ("vjp", "vjp2"))


@dataclass(frozen=True, slots=True)
class Poly:
    """A harness written with symbolic dimensions (``jax.export`` shape polymorphism).

    ``specs``: per dynamic argument, its symbolic shape ("b, n", "4*b", "n + 1");
    ``constraints``: JAX's symbolic constraints ("n >= 2"); ``points``: the sizes to call the
    exported artifact at, the first being the static twin's shapes; ``violations``: sizes that
    break a constraint, where a call must raise JAX's shape-assertion error; ``maker``: the
    dynamic arguments at a point from a seeded generator, where a ``RandArg`` of the
    evaluated shape is not enough (in-bounds indices, SPD matrices).
    """

    specs: tuple[str, ...]
    points: tuple[Point, ...]
    constraints: tuple[str, ...] = ()
    violations: tuple[Point, ...] = ()
    maker: Callable[[dict[str, int], np.random.Generator], list[Any]] | None = None

    def __post_init__(self) -> None:
        for spec in self.specs:
            check(spec, self.points + self.violations)

    def describe(self) -> str:
        return repr((self.specs, self.points, self.constraints, self.violations))


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
    #: allclose | exact | edges (allclose at edge values: farm.judge.edges.twin_at_edges) | edges+jaxpr (that,
    #: and the float64 evaluation of the jaxpr: the worse verdict) | none
    compare: str = "allclose"
    invariant: Callable[..., Any] | None = field(default=None, repr=False)
    limitations: tuple[Limitation, ...] = ()
    tol: tuple[float, float] | None = None
    seed: int = 0
    devices: int = 1
    source: str = ""  # e.g. the upstream harness fullname
    arg_maker: Callable[[int], list[Any]] | None = field(default=None, repr=False)
    timeout_s: float | None = None
    #: A sharded harness's mesh, ((axis name, size), ...): the pipeline traces it under that
    #: mesh, concrete when the host has enough devices, abstract otherwise (lower, export and
    #: the structural ``sharding`` stage only). ``devices`` is its size.
    mesh: tuple[tuple[str, int], ...] = ()
    #: Per dynamic argument, its PartitionSpec as a tuple (per dimension: an axis name, a
    #: tuple of names, or None).
    in_specs: tuple[Any, ...] = ()
    #: The mesh axes its collectives communicate over (their replica groups must be those).
    collective_axes: tuple[str, ...] = ()
    #: "shardy" or "gspmd" (the partitioner JAX lowers with); "" for the installed default.
    partitioner: str = ""
    #: "auto" or "explicit": the mesh's axis types (explicit axes put shardings in the
    #: types, so the traced program itself says where every value lives).
    axis_types: str = "auto"
    #: Shardings the module must carry as constraints (reshards), each (mesh, spec): the
    #: mesh may be another of the same size (a reshard between meshes).
    constraints: tuple[tuple[tuple[tuple[str, int], ...], tuple[Any, ...]], ...] = ()
    #: Written with symbolic dimensions: its symbolic variant is this, not one derived by vmap.
    poly: Poly | None = None
    #: jax config flags the pipeline sets around every stage of this harness, ((name, value), ...):
    #: JAX's shape_poly_test harnesses pick a PRNG implementation this way.
    jax_config: tuple[tuple[str, Any], ...] = ()
    #: Has side effects (debug prints, callbacks, platform branches) the ``effects_export``
    #: stage checks on every export configuration: what they must show.
    effects: Effects | None = None
    #: A Pallas kernel (``fun`` is it in interpret mode): the ``pallas_export`` stage lowers
    #: the real kernel for each TPU generation and GPU backend it is written for.
    pallas: Kernel | None = None
    #: Exercises an export feature (donation, a typed PRNG key, a disabled safety check,
    #: device-count polymorphism) the ``export_feature`` stage checks.
    feature: ExportFeature | None = None
    #: What it calls that an older jax lacks, ((API, the jax versions that have it: a PEP 440
    #: specifier), ...): on another jax the harness is ``skipped`` with that reason
    #: (``farm.catalog.known.lacking``), never an error of the farm's own.
    needs: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        for _, spec in self.needs:
            check_spec(spec)  # a bad specifier fails where the harness is defined

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
        if self.catalog in ("upstream", "shape_poly"):  # JAX's catalogs run as JAX's tests do: x64 as configured
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
            if self.jax_config:
                h.update(repr(self.jax_config).encode())
            for spec in check_specs():  # each check's own part of the harness (its Poly, Effects, Kernel...)
                part = getattr(self, spec.harness_field) if spec.harness_field else None
                if part is not None:
                    h.update(part.describe().encode())
                    if (code := getattr(part, spec.harness_code or "", None)) is not None:
                        _code_digest(code, h)
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
            "mesh": [list(m) for m in self.mesh],
            "in_specs": [list(s) if isinstance(s, tuple) else s for s in self.in_specs],
            "collective_axes": list(self.collective_axes),
            "partitioner": self.partitioner,
            **({"axis_types": self.axis_types} if self.axis_types != "auto" else {}),
            **({"jax_config": [list(f) for f in self.jax_config]} if self.jax_config else {}),
            **({"constraints": [[[list(m) for m in mesh], list(spec)] for mesh, spec in self.constraints]}
               if self.constraints else {}),
            **({"effects": self.effects.describe()} if self.effects is not None else {}),
            **({"pallas": self.pallas.describe()} if self.pallas is not None else {}),
            **({"feature": self.feature.describe()} if self.feature is not None else {}),
            "limitations": [
                {"description": l.description, "platforms": list(l.platforms), "dtypes": list(l.dtypes),
                 "stage": l.stage, "tol": list(l.tol) if l.tol else None, "error": l.error, "status": l.status}
                for l in self.limitations
            ],
        }
