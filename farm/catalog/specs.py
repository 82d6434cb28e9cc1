"""Symbolic shape specs evaluated at concrete sizes: "b, 4*b, n + 1" at {b: 3, n: 5} is
(3, 12, 6). The catalog declares specs (``Poly``); the stages and the judge call artifacts
at the sizes these give. JAX's spec language (``max``, ``min``, ``mod``, ``floordiv``, the
arithmetic operators) is a subset of Python's expressions.
"""
from __future__ import annotations

import re

from farm.errors import ConfigError

#: A binding of dimension variables to sizes, e.g. (("b", 3), ("n", 5)).
Point = tuple[tuple[str, int], ...]
_SPEC = re.compile(r"^[\w\s+\-*/%(),.]*$")

_NAMES = {"max": max, "min": min, "mod": lambda a, b: a % b, "floordiv": lambda a, b: a // b}


def label(point: Point) -> str:
    """``b=3,n=5``: how a point is named in records."""
    return ",".join(f"{k}={v}" for k, v in point)


def parse_label(text: str) -> Point:
    """The point a label names (``b=3,n=5``), the inverse of ``label``."""
    return tuple((k.strip(), int(v)) for k, v in (kv.split("=") for kv in text.split(",") if kv.strip()))


def evaluate(expr: str, env: dict[str, int]) -> int:
    """One dimension of a spec ("4*b", "n + 1", "3") at sizes ``env``."""
    return int(eval(expr, {"__builtins__": {}, **_NAMES}, dict(env)))  # noqa: S307 - specs are ours or JAX's


def holds(constraint: str, env: dict[str, int]) -> bool:
    """Does a JAX symbolic constraint ("n >= 2", "a == 2*b") hold at ``env``?"""
    return bool(eval(constraint, {"__builtins__": {}, **_NAMES}, dict(env)))  # noqa: S307


def shape(spec: str, env: dict[str, int]) -> tuple[int, ...]:
    return tuple(evaluate(d, env) for d in spec.split(",") if d.strip())


def check(spec: str, points: tuple[Point, ...]) -> None:
    """A spec that does not parse, or names a variable a point does not bind, is a
    ``ConfigError`` where it is declared (one line at the CLI), not an error at call time."""
    if not _SPEC.match(spec):
        raise ConfigError(f"symbolic spec {spec!r} does not parse: only dimension variables, integers, "
                          "+ - * // % and max/min/mod/floordiv are allowed")
    for p in points:
        try:
            dims = shape(spec, dict(p))
        except Exception as e:
            raise ConfigError(f"symbolic spec {spec!r} does not parse at {label(p)}: {type(e).__name__}: {e}") from None
        if any(d < 0 for d in dims):
            raise ConfigError(f"symbolic spec {spec!r} has a negative dimension at {label(p)}: {dims}")
