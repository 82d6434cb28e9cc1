"""The elementwise tolerance table: per (primitive, dtype), how many ULP a result may be off.

Data, in ``ulp_bounds.toml`` next to this module, derived from the measured accuracy
tables (``farm accuracy --bounds``, ``farm.analysis.accuracy.bounds``): the max ULP error
on normal inputs of the worst stored jax version (over its platforms: cpu, and the
cuda/rocm/tpu modules run here), but at most 8 ULP above the best version's, so that a
version's known regression (float64 log1p at 125 ULP) stays a failure; plus 0.5 (the compare stage rounds its float64 reference to the dtype)
plus a stated margin (1 ULP; 4 for float64, whose float64 NumPy/SciPy reference errs by a
few ULP itself). docs/accuracy.md prints the table. A primitive the table does not name
gets ``DEFAULT`` (correctly rounded arithmetic: add, mul, div, convert...).
"""
from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path
from typing import Any

PATH = Path(__file__).with_name("ulp_bounds.toml")
#: the bound of a floating elementwise primitive the table does not name (IEEE arithmetic)
DEFAULT = 2
#: the bound where the table says the primitive is unusable (-1 in the file): no bound
UNBOUNDED = float("inf")


@cache
def table() -> dict[str, dict[str, int]]:
    data: dict[str, Any] = tomllib.loads(PATH.read_text())
    return {p: {d: int(v) for d, v in row.items()} for p, row in data.get("bounds", {}).items()}


def bound(primitive: str, dtype: str) -> float | None:
    """The table's bound in ULP, or None where it names no such (primitive, dtype)."""
    v = table().get(primitive, {}).get(dtype)
    return None if v is None else (UNBOUNDED if v < 0 else float(v))


def write(path: str | Path, bounds: dict[str, dict[str, int]], versions: list[str]) -> None:
    """The TOML text of ``bounds``, with where it came from."""
    lines = ["# Elementwise tolerance bounds in ULP, per primitive and dtype (farm.catalog.ulps).",
             "# Derived by `farm accuracy --bounds` from the measured tables of jax " + ", ".join(versions) + ":",
             "# ceil(max ULP on normal inputs, the worst version's but at most 8 above the best version's, + 0.5)",
             "# + margin (1 ULP; 4 for float64); a version's max is over its platforms. -1: no usable bound. "
             "See docs/accuracy.md.", "", "[bounds]"]
    for p in sorted(bounds):
        cells = ", ".join(f"{d} = {v}" for d, v in sorted(bounds[p].items()))
        lines.append(f"{p} = {{ {cells} }}")
    Path(path).write_text("\n".join(lines) + "\n")


def tolerance(primitive: str, dtype: str) -> tuple[float, float] | None:
    """(rtol, atol) for a harness of the one primitive in ``dtype``: the table's bound in
    epsilons relative to the result (eps*|x| >= ulp(x)), no absolute band beyond the
    dtype's smallest normal; None where the table names no bound."""
    import ml_dtypes  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    k = bound(primitive, dtype)
    if k is None or k == UNBOUNDED:
        return None
    fi = ml_dtypes.finfo(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype))
    return k * float(fi.eps), float(fi.tiny)
