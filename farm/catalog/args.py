"""Typed argument descriptors: ``RandArg(shape, dtype)``, ``StaticArg(value)``, ``DtypeArg``, ``CustomArg``.

Each descriptor says how to make one input from the harness's seeded generator and
how to describe itself in the fingerprint.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from farm.catalog.dtypes import COMPLEX, DTYPES, INTEGER, np_dtype
from farm.errors import UnknownName


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


def _shape_of(a: Arg) -> tuple[int, ...] | None:
    """The shape an argument adds to a harness key (None for static values)."""
    if isinstance(a, RandArg):
        return a.shape
    if isinstance(a, CustomArg) and a.dtype:
        return a.shape
    return None
