"""symbolic: a harness exported with a symbolic leading dimension (shape polymorphism) for
every platform, serialized, and called at several concrete sizes of that dimension.

The variant is JAX's own ``vmap_*`` construction (``tests/shape_poly_test.py``): the
harness's function mapped over a new leading axis ``b`` of every dynamic argument, the
argument specs ``"b, d1, d2..."`` built in one symbolic scope. A symbolic module is where
export bugs cluster: ``shape_assertion`` custom calls, ``stablehlo.dynamic_*`` ops, shape
refinement at call time.

- ``export``: one multi-platform export; where it fails, one per platform, so the records
  say which platform sinks it (the tpu lowering of eigh with symbolic matrix dimensions
  sinks the whole four-platform export although cpu and cuda lower);
- ``serialize``: the round trip, and what the symbolic module carries (``census``);
- ``calls``: the deserialized artifact called at each size on the CPU backend, and each
  other platform's own symbolic module, refined to the same size and run by the CPU
  backend (as crossexec runs static modules). Whether the outputs are right is the
  judge's (``farm.judge.symbolic``).
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from farm.catalog import Harness
from farm.catalog.args import StaticArg
from farm.results import LOWERING_PLATFORMS, Record
from farm.stages.compile import not_runnable
from farm.stages.record import Timer, failure

#: The sizes of the symbolic dimension every variant is called at: 1, a prime, and a size
#: that is not a power of two.
SIZES = (1, 3, 7)
#: Primitives whose variant maps only their first argument: a convolution's batched kernel
#: makes its feature-group count symbolic, which jax.export refuses ("Convolutions with
#: non-static ... feature_group_count"); a batch of inputs under one kernel is what is exported.
FIRST_ONLY = frozenset({"conv_general_dilated"})
#: What a symbolic module carries that a static one does not.
DYNAMIC_OPS = re.compile(r"stablehlo\.(dynamic_\w+|real_dynamic_slice)|@shape_assertion")


@dataclass(frozen=True, slots=True)
class SymbolicExported(Record):
    """stage ``symbolic_export``; facts: the specs, the platforms exported; ``handle``: the
    ``jax.export.Exported``."""


@dataclass(frozen=True, slots=True)
class SymbolicCall(Record):
    """stage ``symbolic_call`` for one platform's module; ``handle``: {size: outputs}."""


@dataclass(frozen=True)
class Variant:
    """A harness with a symbolic leading dimension ``b`` over its dynamic arguments."""

    harness: Harness
    fun: Callable[..., Any]  # over the dynamic arguments, mapped over the leading axis
    specs: tuple[str, ...]  # per dynamic argument, e.g. "b, 3, 4" (mapped) or "3, 4"
    dtypes: tuple[str, ...]
    static: dict[int, Any]  # argument index -> value
    mapped: tuple[bool, ...] = ()  # per dynamic argument: over the leading b (default: all)
    one: Callable[..., Any] | None = None  # the function of one row, before the map (what a reproducer writes out)

    def rows(self, size: int) -> list[np.ndarray]:
        """The dynamic arguments at ``b = size``: ``size`` independent draws stacked (the
        first draw where an argument is not mapped)."""
        draws = [_draw(self.harness, i) for i in range(size)]
        dyn = [i for i in range(len(draws[0])) if i not in self.static]
        mapped = self.mapped or (True,) * len(dyn)
        return [np.stack([np.asarray(d[i]) for d in draws]) if m else np.asarray(draws[0][i])
                for i, m in zip(dyn, mapped)]


def _draw(h: Harness, i: int) -> list[Any]:
    """The harness's arguments, drawn with the i-th generator of its own seed."""
    if h.arg_maker is not None:
        return h.arg_maker(int(h.fingerprint[:8], 16) + i)
    rng = np.random.default_rng([int(h.fingerprint[:16], 16) ^ h.seed, i])
    return [a.value if isinstance(a, StaticArg) else a.make(rng) for a in h.args]


def variant(h: Harness) -> Variant | str:
    """The symbolic variant of ``h``, or the reason it has none."""
    import jax

    if h.mesh:
        return "a sharded harness: its mesh fixes the shapes"
    if h.devices > 1:
        return f"a {h.devices}-device harness: called on one device, its export would need device-count polymorphism"
    args = _draw(h, 0)
    static = {i: args[i] for i in h.static_argnums()}
    dyn = [i for i in range(len(args)) if i not in static]
    if not dyn:
        return "no dynamic argument to map over"
    arrays = [np.asarray(args[i]) for i in dyn]
    if any(a.dtype == object or not hasattr(args[i], "dtype") for i, a in zip(dyn, arrays)):
        return "an argument that is not an array (a PRNG key, a pytree)"

    def one(*row: Any) -> Any:
        full = list(args)
        for i, v in zip(dyn, row):
            full[i] = v
        return h.fun(*full)

    mapped = tuple(k == 0 or h.primitive not in FIRST_ONLY for k in range(len(arrays)))
    specs = tuple(", ".join(["b"] * m + [str(d) for d in a.shape]) for a, m in zip(arrays, mapped))
    fun = jax.vmap(one, in_axes=tuple(0 if m else None for m in mapped))
    return Variant(h, fun, specs, tuple(str(a.dtype) for a in arrays), static, mapped, one)


def _structs(v: Variant) -> list[Any]:
    import jax
    from jax import export

    scope = export.SymbolicScope()
    return [jax.ShapeDtypeStruct(export.symbolic_shape(s, scope=scope), np.dtype(d)) for s, d in zip(v.specs, v.dtypes)]


def export_all(v: Variant, platforms: tuple[str, ...] = LOWERING_PLATFORMS) -> list[SymbolicExported]:
    """The multi-platform export (platform ``export``); where it fails, one export per
    platform as well, each its own record."""
    rec = export_one(v, platforms, "export")
    if rec.status == "ok" or len(platforms) == 1:
        return [rec]
    return [rec] + [export_one(v, (p,), p) for p in platforms]


def export_one(v: Variant, platforms: tuple[str, ...], label: str) -> SymbolicExported:
    import jax
    from jax import export

    timer = Timer()
    facts = {"specs": list(v.specs), "platforms": list(platforms)}
    try:
        with timer():
            exp = export.export(jax.jit(v.fun), platforms=platforms)(*_structs(v))
        return SymbolicExported("symbolic_export", label, "ok", timer.seconds, facts=facts, handle=exp)
    except Exception as e:
        return failure(SymbolicExported, "symbolic_export", label, e, timer.seconds, facts=facts)


def serialize(rec: SymbolicExported) -> Record:
    """The round trip of a symbolic artifact and what its module carries."""
    import hashlib

    from jax import export

    if rec.status != "ok":
        return Record("symbolic_serialize", rec.platform, "skipped", error="the symbolic export did not succeed")
    timer = Timer()
    try:
        with timer():
            blob = bytes(rec.handle.serialize())
            back = export.deserialize(bytearray(blob))
        same = [str(a) for a in back.in_avals] == [str(a) for a in rec.handle.in_avals] and \
            [str(a) for a in back.out_avals] == [str(a) for a in rec.handle.out_avals]
        ops = DYNAMIC_OPS.findall(rec.handle.mlir_module())
        census = {op or "shape_assertion": ops.count(op) for op in sorted(set(ops))}
        facts = {"sha256": hashlib.sha256(blob).hexdigest(), "dynamic_ops": census,
                 "in_avals": [str(a) for a in back.in_avals], "out_avals": [str(a) for a in back.out_avals]}
        if not same:
            facts["changed"] = ["in_avals or out_avals"]
        return Record("symbolic_serialize", rec.platform, "ok", timer.seconds,
                      metrics={"artifact_bytes": float(len(blob))}, facts=facts, handle=back)
    except Exception as e:
        return failure(Record, "symbolic_serialize", rec.platform, e, timer.seconds)


def call(exported: Any, platform: str, v: Variant, sizes: tuple[int, ...] = SIZES, *,
         native: bool = False) -> SymbolicCall:
    """``exported`` (a symbolic artifact) called at each size on the CPU backend; a module
    for another platform is relabelled for the CPU first, so jax refines its symbolic
    shapes to the call's and the CPU backend compiles it (``native``: called as it is, on
    this host's device for its platform). ``handle``: {size: outputs}."""
    import jax

    here = exported if native or "cpu" in exported.platforms else dataclasses.replace(exported, platforms=("cpu",))
    timer = Timer()
    outs: dict[int, list[np.ndarray]] = {}
    try:
        with timer():
            for n in sizes:
                res = here.call(*v.rows(n))
                outs[n] = [np.asarray(o) for o in jax.tree.leaves(res)]
        return SymbolicCall("symbolic_call", platform, "ok", timer.seconds,
                            facts={"sizes": list(sizes), "specs": list(v.specs)}, handle=outs)
    except Exception as e:
        rec = failure(SymbolicCall, "symbolic_call", platform, e, timer.seconds,
                      facts={"sizes": list(sizes), "specs": list(v.specs), "reached": sorted(outs)})
        return not_runnable(rec, str(e))  # a platform's custom call with no CPU handler
