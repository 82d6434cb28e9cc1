"""The floating elementwise primitives the accuracy table covers, as data.

Each entry names the primitive (as ``lax`` spells it, the runner's key), its arity and
the points near which it is hard (poles, zeros, branch points, where it overflows): the
inputs add the floats nearest those points. The exact values come from
``farm.accuracy.reference`` (the same names).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from farm.errors import FarmError


@dataclass(frozen=True)
class Function:
    name: str
    arity: int = 1
    #: "mpfr" (gmpy2, correctly rounded per call), "mpmath", or "exact" (the result is a float
    #: of the input's dtype that NumPy computes exactly: floor, nextafter...)
    engine: str = "mpfr"
    points: tuple[float, ...] = ()


_PI = math.pi
_HALF_PIS = tuple(k * _PI / 2 for k in range(-8, 9))
_LGAMMA_ZEROS = (1.0, 2.0, -2.4570247382208005, -2.7476826467274127, -3.1435808883499800, -3.9552942848585224)

FUNCTIONS: dict[str, Function] = {f.name: f for f in (
    Function("exp", points=(0.0, 88.72, 709.78, -87.33, -103.97, -745.13, 11.09, -17.33, 88.0)),
    Function("exp2", points=(0.0, 128.0, 1024.0, -126.0, -149.0, -1074.0, 16.0, -24.0)),
    Function("expm1", points=(0.0, 88.72, 709.78, -1e-5, 1e-5)),
    Function("log", points=(1.0, 0.0)),
    Function("log1p", points=(-1.0, 0.0, -0.5, 1e-5, -1e-5)),
    Function("sqrt", points=(0.0,)),
    Function("rsqrt", points=(0.0,)),
    Function("cbrt", points=(0.0,)),
    Function("sin", points=_HALF_PIS + (1e4, 1e6, 3.0e38)),
    Function("cos", points=_HALF_PIS + (1e4, 1e6)),
    Function("tan", points=_HALF_PIS + (1e4, 1e6)),
    Function("asin", points=(1.0, -1.0, 0.0, 0.5)),
    Function("acos", points=(1.0, -1.0, 0.0, 0.5)),
    Function("atan", points=(0.0, 1.0, -1.0)),
    Function("sinh", points=(0.0, 89.41, 710.47, 11.78)),
    Function("cosh", points=(0.0, 89.41, 710.47, 11.78)),
    Function("tanh", points=(0.0, 0.55, 9.01, 19.06)),
    Function("asinh", points=(0.0,)),
    Function("acosh", points=(1.0,)),
    Function("atanh", points=(1.0, -1.0, 0.0)),
    Function("logistic", points=(0.0, -88.72, -103.97, -745.13, 16.6, 36.7)),
    Function("erf", points=(0.0, 0.5, 3.9, 5.9)),
    Function("erfc", points=(0.0, 0.5, 3.9, 9.19, 26.5, 27.2)),
    Function("erf_inv", engine="mpmath", points=(1.0, -1.0, 0.0, 0.99, -0.99)),
    Function("lgamma", points=_LGAMMA_ZEROS + (0.0, -1.0, -2.0, -3.0, -4.0, 4.08e36, 2.55e305)),
    Function("digamma", points=(1.4616321449683622, -0.5040830082644554, -1.5734984731623507, 0.0, -1.0,
                                -2.0, -3.0)),
    Function("bessel_i0e", engine="mpmath", points=(0.0,)),
    Function("bessel_i1e", engine="mpmath", points=(0.0,)),
    Function("square", points=(0.0,)),
    Function("floor", engine="exact", points=(0.5, -0.5, 1.0)),
    Function("ceil", engine="exact", points=(0.5, -0.5, 1.0)),
    Function("round", engine="exact", points=(0.5, 1.5, 2.5, -0.5)),
    Function("sign", engine="exact", points=(0.0,)),
    Function("abs", engine="exact"),
    Function("neg", engine="exact"),
    Function("pow", arity=2, points=(1.0, 0.0, -1.0, 2.0, 0.5)),
    Function("atan2", arity=2, points=(0.0, 1.0, -1.0)),
    Function("rem", arity=2, points=(0.0, 1.0, _PI)),
    Function("nextafter", arity=2, engine="exact", points=(0.0,)),
)}


def select(names: list[str] | None) -> list[Function]:
    """The named functions (all if none), in the table's order; an unknown name is a user error."""
    if not names:
        return list(FUNCTIONS.values())
    unknown = [n for n in names if n not in FUNCTIONS]
    if unknown:
        raise FarmError(f"no accuracy function {', '.join(unknown)}; known: {', '.join(FUNCTIONS)}")
    return [FUNCTIONS[n] for n in names]
