"""Harnesses from plain data: a ``Case`` (family, primitive, dtype, shapes, params, values)
becomes one ``define()`` call.

This is how generated harnesses exist: ``farm fuzz`` draws cases with hypothesis, its
workers rebuild the same harnesses from the same case data (so a case, not a function,
is what travels to a worker and into a file), and a finding kept in ``harnesses/found/``
is a case written as JSON. A case's fingerprint is its key plus the builder's source, so
the same case is the same harness on every host and in every campaign.

Values: ``normal`` draws from the harness's seeded generator as ``RandArg`` does; the
other kinds overwrite a fraction (``density``) of the elements, at positions the same
generator picks, with special values, subnormals, huge or tiny magnitudes, or ties.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
from jax import lax

from farm.catalog import special
from farm.catalog.args import CustomArg, RandArg, StaticArg
from farm.catalog.dtypes import INTEGER, np_dtype
from farm.catalog.harness import Harness, Limitation
from farm.catalog.registry import define

#: Value kinds a case may ask for (``normal``: none overwritten).
VALUE_KINDS = ("normal", "special", "subnormal", "huge", "tiny", "ties", "zeros")


def _freeze(v: Any) -> Any:
    """JSON lists back into tuples (static arguments must be hashable)."""
    return tuple(_freeze(x) for x in v) if isinstance(v, (list, tuple)) else v


@dataclass(frozen=True)
class Case:
    """One generated harness, as data (``to_dict``/``from_dict`` for JSON)."""

    family: str
    primitive: str
    dtype: str
    shapes: tuple[tuple[int, ...], ...]
    params: tuple[tuple[str, Any], ...] = ()
    values: str = "normal"
    density: float = 0.0
    seed: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def param(self, name: str, default: Any = None) -> Any:
        return dict(self.params).get(name, default)

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "primitive": self.primitive, "dtype": self.dtype,
                "shapes": [list(s) for s in self.shapes], "params": {k: v for k, v in self.params},
                "values": self.values, "density": self.density, "seed": self.seed}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Case":
        params = d.get("params") or {}
        return cls(d["family"], d["primitive"], d["dtype"], tuple(tuple(int(x) for x in s) for s in d["shapes"]),
                   tuple(sorted((str(k), _freeze(v)) for k, v in params.items())), d.get("values", "normal"),
                   float(d.get("density", 0.0)), int(d.get("seed", 0)))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))


# --------------------------------------------------------------------------- values
def _pool(kind: str, dtype: str) -> np.ndarray:
    """The values a kind writes into an array of ``dtype``."""
    dt = np_dtype(dtype)
    if dtype == "bool":
        return np.array([False, True])
    if dtype in INTEGER:
        if kind == "special":
            return special.values(dtype)
        info = np.iinfo(dt)
        ints = {"huge": [info.max, info.max - 1, info.min], "tiny": [0, 1], "subnormal": [0, 1], "ties": [2, 2, 3],
                "zeros": [0]}
        return np.array(ints[kind], dtype=object).astype(dt)
    fi = ml_dtypes.finfo(dt)
    sub, tiny, big = float(fi.smallest_subnormal), float(fi.tiny), float(fi.max)
    pools = {"special": special.values(dtype).astype(np.float64),
             "subnormal": [sub, -sub, tiny / 2, -tiny / 4, sub * 3],
             "huge": [big, -big, big / 2, big / 3, -big / 7],
             "tiny": [tiny, -tiny, tiny * 3, tiny * 1.5],
             "ties": [0.5, 1.5, 2.5, -0.5, 1.0, 1.0],
             "zeros": [0.0, -0.0]}
    return np.asarray(pools[kind], dtype=np.float64).astype(dt)


def _value_maker(shape: tuple[int, ...], dtype: str, kind: str, density: float, domain: str):  # noqa: ANN202
    base = RandArg(shape, dtype, domain)

    def make(rng: np.random.Generator) -> np.ndarray:
        x = base.make(rng)
        if kind == "normal" or x.size == 0:
            return x
        pool = _pool(kind, dtype)
        flat = x.reshape(-1)
        n = max(1, int(round(density * flat.size)))
        where = rng.choice(flat.size, size=n, replace=False)
        flat[where] = pool[rng.integers(0, pool.size, size=n)]
        return flat.reshape(shape)

    return make


def value_arg(shape: tuple[int, ...], dtype: str, kind: str = "normal", density: float = 0.0,
              domain: str = "normal") -> CustomArg | RandArg:
    """An input of ``shape``: random (``normal``), or with a fraction of special values."""
    if kind == "normal":
        return RandArg(tuple(shape), dtype, domain)
    return CustomArg(f"fuzz:{kind}:{density:g}:{domain}", _value_maker(tuple(shape), dtype, kind, density, domain),
                     tuple(shape), dtype)


# --------------------------------------------------------------------------- the programs
#: primitives whose ``jax.lax`` function has another name
LAX_FUNCTIONS = {"not": "bitwise_not", "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor"}


def unary(x, op):  # noqa: ANN001, ANN201
    return getattr(lax, LAX_FUNCTIONS.get(op, op))(x)


def binary(x, y, op, bcast):  # noqa: ANN001, ANN201
    if bcast is not None:  # y has fewer dimensions: broadcast it into x's shape first
        y = lax.broadcast_in_dim(y, x.shape, bcast)
    return getattr(lax, LAX_FUNCTIONS.get(op, op))(x, y)


def reduction(x, op, axes):  # noqa: ANN001, ANN201
    if op in ("argmax", "argmin"):
        return getattr(lax, op)(x, axes[0], np.int32)
    return getattr(lax, op)(x, axes)


def pad(x, config):  # noqa: ANN001, ANN201
    return lax.pad(x, np.zeros((), x.dtype), config)


def slice_(x, start, limit, strides):  # noqa: ANN001, ANN201
    return lax.slice(x, start, limit, strides)


def concatenate(x, y, dimension):  # noqa: ANN001, ANN201
    return lax.concatenate([x, y], dimension)


def rev(x, dimensions):  # noqa: ANN001, ANN201
    return lax.rev(x, dimensions)


def transpose(x, permutation):  # noqa: ANN001, ANN201
    return lax.transpose(x, permutation)


def dot_general(x, y, dims, precision, preferred):  # noqa: ANN001, ANN201
    prec = None if precision is None else getattr(lax.Precision, precision)
    return lax.dot_general(x, y, dims, precision=prec,
                           preferred_element_type=None if preferred is None else np_dtype(preferred))


def conv(x, w, strides, padding, lhs_dilation, rhs_dilation, groups):  # noqa: ANN001, ANN201
    return lax.conv_general_dilated(x, w, strides, padding, lhs_dilation, rhs_dilation,
                                    feature_group_count=groups)


#: family -> primitive -> (the program, the names of its static params in order)
PROGRAMS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "elementwise_unary": (unary, ("op",)),
    "elementwise_binary": (binary, ("op", "bcast")),
    "reduction": (reduction, ("op", "axes")),
    "pad": (pad, ("config",)),
    "slice": (slice_, ("start", "limit", "strides")),
    "concatenate": (concatenate, ("dimension",)),
    "rev": (rev, ("dimensions",)),
    "transpose": (transpose, ("permutation",)),
    "dot_general": (dot_general, ("dims", "precision", "preferred")),
    "conv_general_dilated": (conv, ("strides", "padding", "lhs_dilation", "rhs_dilation", "groups")),
}


def program_of(case: Case) -> tuple[Any, tuple[str, ...]]:
    """The program a case runs: by family for elementwise ops and reductions, else by primitive."""
    return PROGRAMS.get(case.family) or PROGRAMS[case.primitive]


def define_case(case: Case, *, catalog: str = "fuzz", family: str | None = None,
                limitations: Iterable[Limitation] = (), source: str = "") -> Harness:
    """Define the case's harness in ``catalog`` (the float64 jaxpr reference judges it)."""
    fun, statics = program_of(case)
    domain = "unit" if case.primitive == "reduce_prod" else "normal"
    args: list[Any] = [value_arg(s, case.dtype, case.values, case.density, domain) for s in case.shapes]
    args += [StaticArg(case.param(n)) for n in statics]
    params = dict(case.params)
    if case.values != "normal":
        params["values"] = f"{case.values}@{case.density:g}"
    if case.seed:
        params["seed"] = case.seed
    h = define(family or case.family, case.primitive, fun, args, dtype=case.dtype, params=params,
               catalog=catalog, limitations=limitations, source=source or "fuzz", group=case.primitive)
    return h
