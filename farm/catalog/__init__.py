"""The harness model: keys, argument descriptors, limitations, define() and select().

A harness is one primitive x dtype x shapes x params case. Its identity is a
structured ``HarnessKey``; the display name and the fingerprint are derived from the
key (and the argument descriptors and seed), never parsed back out of a name.
Inputs come from a generator seeded by the fingerprint, so every worker on every
host makes the same bytes.

This package's public face: the names below are what the rest of the farm and the
harness modules use (``from farm import catalog; catalog.define(...)``). They live in

- ``dtypes``: dtype names and groups (``FLOAT``, ``X64_DTYPES``...), ``DEFAULT_TOL``, ``np_dtype``;
- ``args``: the argument descriptors ``RandArg``, ``StaticArg``, ``DtypeArg``, ``CustomArg``;
- ``harness``: ``Limitation``, ``HarnessKey``, ``Harness`` and the source digest of a function;
- ``registry``: ``define``, ``load``, ``select``, ``Filters``, ``by_fingerprint``, ``check_platforms``;
- ``effects``: ``Effects``, what a harness's debug prints, callbacks and platform branches must show;
- ``pallas``: ``Kernel``, a Pallas kernel's backends, and the ``Target``s (TPU generations, GPU backends) it lowers for;
- ``features``: ``ExportFeature``, the export feature a harness exercises (donation, PRNG keys, safety checks, device counts);
- ``coverage``: the coverage table built from the limitations (imported on its own);
- ``special``: special-value inputs (NaN, ±Inf, ±0, subnormals, integer extremes) for harnesses.
"""
from __future__ import annotations

from farm.catalog.args import Arg, CustomArg, DtypeArg, RandArg, StaticArg
from farm.catalog.dtypes import (
    ALL, COMPLEX, DEFAULT_TOL, DTYPES, FLOAT, INEXACT, INTEGER, NUMERIC, SIGNED, UNSIGNED, X64_DTYPES, np_dtype,
)
from farm.catalog.effects import Effects
from farm.catalog.features import ExportFeature
from farm.catalog.pallas import Kernel, Target
from farm.catalog.harness import CLAMP_CROSSED_GRAD, ROCM_MOSAIC, ROCM_MOSAIC_MESH, SCAN_ABORTS_CPU, SCAN_VJP2_ABORTS_CPU, SCAN_VJP_ABORTS_CPU, Harness, HarnessKey, Limitation, Point, Poly, chlo_leak
from farm.catalog.registry import CATALOGS, FARM_FAMILIES, Filters, by_fingerprint, check_platforms, define, load, select
from farm.platforms import LOWERING_PLATFORMS
from farm.results import LIMITATION_STAGES, RUN_STAGES

# Private names, importable from here as before: farm.cache.key uses _code_digest;
# _REGISTRY and _LOADED are the registry's state (the same objects, so mutations are shared).
from farm.catalog.args import _arg_dtype, _shape_of  # noqa: F401
from farm.catalog.harness import _LIBRARY, _code_digest, _last_line  # noqa: F401
from farm.catalog.registry import _LOADED, _REGISTRY  # noqa: F401

__all__ = [
    # dtypes
    "ALL", "COMPLEX", "DEFAULT_TOL", "DTYPES", "FLOAT", "INEXACT", "INTEGER", "NUMERIC", "SIGNED", "UNSIGNED",
    "X64_DTYPES", "np_dtype",
    # argument descriptors
    "Arg", "CustomArg", "DtypeArg", "RandArg", "StaticArg",
    # harnesses and their known gaps
    "Effects", "ExportFeature", "Kernel", "Target", "Harness", "HarnessKey", "Limitation", "Point", "Poly", "chlo_leak", "SCAN_ABORTS_CPU", "SCAN_VJP_ABORTS_CPU", "ROCM_MOSAIC", "ROCM_MOSAIC_MESH", "CLAMP_CROSSED_GRAD", "SCAN_VJP2_ABORTS_CPU", "LIMITATION_STAGES", "RUN_STAGES", "LOWERING_PLATFORMS",
    # the registry
    "CATALOGS", "FARM_FAMILIES", "Filters", "by_fingerprint", "check_platforms", "define", "load", "select",
]
