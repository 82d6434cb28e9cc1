"""JAX's own harness catalog (``jax._src.internal_test_util.test_harnesses``) as a
second farm catalog, ``--catalog upstream``.

Each upstream harness becomes one farm ``Harness``: its key is built from the upstream
group, dtype, argument shapes and the params that have a stable text form; ``fun`` is
the upstream ``dyn_fun``; inputs come from the upstream ``dyn_args_maker`` driven by a
``RandomState`` seeded from our fingerprint, so every worker makes the same bytes.
Upstream ``Limitation``s become farm ``Limitation``s. Upstream harnesses carry no
reference of their own: the compare stage judges them against their jaxpr evaluated in
NumPy float64 by ``farm.reference`` (or by an invariant where results are not unique).

Importing jax and the upstream catalog costs about 1.5 s, so the plain-data entries
(keys, limitations) are cached on disk per jax version and x64 mode; ``fun`` and the
inputs resolve the upstream harness by its fullname only when a harness runs.

Nothing is copied from upstream: the module is imported from the installed jax.
"""
from __future__ import annotations

import enum
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from farm.catalog.definitions import define, harness_key
from farm.catalog.dtypes import DTYPES
from farm.catalog.harness import CLAMP_CROSSED_GRAD, SCAN_ABORTS_CPU, SCAN_VJP2_ABORTS_CPU, SCAN_VJP_ABORTS_CPU, Limitation
from farm.catalog.known import stale_upstream
from farm.platforms import LOWERING_PLATFORMS

CATALOG = "upstream"
FAMILY = "upstream"

#: Upstream device names → farm lowering platforms.
PLATFORMS_OF_DEVICE = {"cpu": ("cpu",), "gpu": ("cuda", "rocm"), "tpu": ("tpu",)}

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_SIMPLE = (bool, int, float, str, type(None))


def upstream_module() -> Any:
    """Import the upstream catalog module without letting absl parse our argv."""
    from absl import flags

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    from jax._src.internal_test_util import test_harnesses

    return test_harnesses


def dtype_name(dt: Any) -> str:
    return np.dtype(dt).name


def _param_text(v: Any) -> str | None:
    """A stable, address-free text for a param value, or None to leave it out of the key."""
    if isinstance(v, _SIMPLE):
        return str(v)
    if isinstance(v, enum.Enum):
        return v.name
    if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
        return np.dtype(v).name
    if isinstance(v, (tuple, list)):
        parts = [_param_text(x) for x in v]
        if any(p is None for p in parts):
            return None
        return "(" + ",".join(parts) + ")"
    name = type(v).__name__
    if name == "Primitive":
        return str(v)
    if name in ("Precision",) or hasattr(v, "_fields"):  # namedtuples: dimension numbers
        return _ADDRESS.sub("", str(v)).replace(" ", "")
    return None  # functions, arrays, arg descriptors: not part of the key


def _shapes(h: Any, mod: Any) -> list[tuple[int, ...]]:
    out = []
    for a in h.arg_descriptors:
        if isinstance(a, mod.RandArg):
            out.append(tuple(a.shape))
        elif isinstance(a, np.ndarray):
            out.append(tuple(a.shape))
    shape = h.params.get("shape")
    if not out and isinstance(shape, tuple) and all(isinstance(d, int) for d in shape):
        out.append(shape)  # CustomArg-only harnesses (linalg) name their shape in params
    return out


def _key_params(h: Any) -> dict[str, str]:
    out = {}
    for k, v in h.params.items():
        if k in ("shape", "dtype", "enable_xla"):
            continue
        t = _param_text(v)
        if t is not None:
            out[k] = t if len(t) <= 80 else t[:60] + "…"
    return out


def _limitations(h: Any, dtype: str) -> list[dict[str, Any]]:
    out = []
    for lim in h.jax_unimplemented:
        if not lim.filter(dtype=h.dtype):  # disabled, or another dtype
            continue
        devices = (lim.devices,) if isinstance(lim.devices, str) else tuple(lim.devices)
        platforms = tuple(p for d in devices for p in PLATFORMS_OF_DEVICE.get(d, ()))
        out.append({"description": f"upstream: {lim.description}", "platforms": list(platforms),
                    "dtypes": [dtype], "stage": "run", "crashes": bool(lim.skip_run)})
    return out


def _upstream_harness(fullname: str) -> Any:
    """The upstream harness object (imports the upstream catalog on first use)."""
    global _BY_NAME
    if _BY_NAME is None:
        _BY_NAME = {h.fullname: h for h in upstream_module().all_harnesses}
    return _BY_NAME[fullname]


_BY_NAME: dict[str, Any] | None = None


def _fun(fullname: str) -> Callable[..., Any]:
    """The upstream ``dyn_fun``, resolved at call time (so selecting needs no import)."""
    def dyn_fun(*dyn: Any) -> Any:
        return _upstream_harness(fullname).dyn_fun(*dyn)
    return dyn_fun


def _arg_maker(fullname: str) -> Callable[[int], list[Any]]:
    def make(seed: int) -> list[Any]:
        return list(_upstream_harness(fullname).dyn_args_maker(np.random.RandomState(seed)))
    return make


# ------------------------------------------------------------------------ entries
def _entries() -> list[dict[str, Any]]:
    """Plain-data description of every upstream harness (what define() needs)."""
    mod = upstream_module()
    seen: Counter[tuple] = Counter()
    out = []
    for h in mod.all_harnesses:
        dtype = dtype_name(h.dtype)
        if dtype not in DTYPES:
            continue
        params = _key_params(h)
        shapes = _shapes(h, mod)
        ident = (h.group_name, dtype, tuple(shapes), tuple(sorted(params.items())))
        seen[ident] += 1
        if seen[ident] > 1:  # same key text, different arrays/functions: number them
            params["case"] = str(seen[ident])
        out.append({"fullname": h.fullname, "group": h.group_name, "dtype": dtype, "params": params,
                    "shapes": [list(s) for s in shapes], "limitations": _limitations(h, dtype)})
    return out


def _x64() -> bool:
    jax = sys.modules.get("jax")
    if jax is not None:
        return bool(jax.config.jax_enable_x64)
    return os.environ.get("JAX_ENABLE_X64", "").lower() in ("1", "true", "yes", "on")


def cache_path() -> Path | None:
    """Where the entries of this jax + this adapter + this x64 mode are cached.

    The name hashes the jax version, the upstream file's size and mtime, this module's
    source and the x64 mode, so any change makes a new cache. Found without importing jax.
    """
    spec = importlib.util.find_spec("jax")
    if spec is None or not spec.submodule_search_locations:
        return None
    src = Path(spec.submodule_search_locations[0]) / "_src" / "internal_test_util" / "test_harnesses.py"
    try:
        st = src.stat()
        version = importlib.metadata.version("jax")
    except (OSError, importlib.metadata.PackageNotFoundError):
        return None
    h = hashlib.sha256(repr((version, st.st_size, st.st_mtime_ns, _x64())).encode())
    h.update(Path(__file__).read_bytes())
    root = Path(os.environ.get("FARM_CACHE_DIR") or Path.home() / ".cache" / "lowering-farm")
    return root / f"upstream-{version}-{h.hexdigest()[:16]}.json"


def entries() -> list[dict[str, Any]]:
    """The entries, from the cache when it is there (importing jax's catalog costs ~1 s)."""
    path = cache_path()
    if path is not None:
        try:
            data = json.loads(path.read_text())
            if data.get("format") == CACHE_FORMAT:
                return data["entries"]
        except (OSError, ValueError, KeyError):
            pass  # missing or unreadable: rebuild
    out = _entries()
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"format": CACHE_FORMAT, "entries": out}))
            os.replace(tmp, path)
        except OSError:
            pass  # read-only home (e.g. a sandbox): just do not cache
    return out


CACHE_FORMAT = 1


_TPU_SYMBOLIC_LINALG = ("the tpu lowerings of eigh (and svd, which uses it) take symbolic batch dimensions only, "
                        "and svd's QDWH needs concrete matrix dimensions: they sink the four-platform export "
                        "(docs/findings.md)")
#: jax.export's refusal of a custom call without a compatibility guarantee, as the farm's export
#: stage words it and as jax's own serialization does.
_NO_GUARANTEE = "custom calls (without a|whose targets have no) compatibility guarantee"
#: Gaps the farm's symbolic sweep of this catalog found, as data: (group regex, name regex,
#: Limitation). Each was checked by hand (docs/symbolic.md).
KNOWN: tuple[tuple[str, str, Limitation], ...] = (
    # matrices whose last two dimensions are symbolic: both larger than 1 (a size of 1 or 0 stays
    # static), in a dtype the cpu lowers (bf16/f16 keep their concrete matrix: the cpu refuses them)
    ("eigh|svd", r"_(float32|float64|complex64|complex128)_(\d+x)*([2-9]|\d\d+)x([2-9]|\d\d+)_",
     Limitation(_TPU_SYMBOLIC_LINALG, platforms=("tpu",), stage="symbolic_export", status="error",
                error="implemented only for the batch dimensions|concrete value is expected")),
    # jax.export refuses custom calls without a compatibility guarantee (the export is redone
    # without the platform, which the artifact records as dropped), as the farm catalog declares
    ("eig", "", Limitation(
        "cuda/rocm eig lowers to cuhybrid_eig_*/hiphybrid_eig_* (MAGMA or LAPACK on the host), custom calls "
        "without a compatibility guarantee: jax.export refuses them", platforms=("cuda", "rocm"), stage="export",
        status="error", error=_NO_GUARANTEE)),
    ("tridiagonal_solve", "", Limitation(
        "rocm tridiagonal_solve lowers to hipsparse_gtsv2_ffi, which has no compatibility guarantee (cuda's "
        "cusparse_gtsv2_ffi has one): jax.export refuses it", platforms=("rocm",), stage="export",
        status="error", error=_NO_GUARANTEE)),
    # a symbolic system size (the variant widens n): tpu blocks the system by 32 and slices a
    # floordiv(n - 1, 32) array, which jax refuses; rocm's hipsparse_gtsv2_ffi has no
    # compatibility guarantee, so jax.export refuses it whatever the shapes
    ("tridiagonal_solve", r"_(float32|float64|complex64|complex128)_", Limitation(
        "the tpu tridiagonal_solve lowering blocks the system by 32: with a symbolic n its slice of a "
        "floordiv(n - 1, 32) block array is refused (docs/findings.md)", platforms=("tpu",), stage="symbolic_export",
        status="error", error="slice_sizes must be less than or equal to operand shape")),
    ("tridiagonal_solve", "", Limitation(
        "rocm tridiagonal_solve lowers to hipsparse_gtsv2_ffi, which has no compatibility guarantee (cuda's "
        "cusparse_gtsv2_ffi has one): jax.export refuses it", platforms=("rocm",), stage="symbolic_export",
        status="error", error="custom calls whose targets have no compatibility guarantees")),
    ("random_categorical", r"bfloat16_5x4_axis=0$", Limitation(
        "a discrete choice over bfloat16 sums: at b=7 two logits+noise round to one bfloat16 value (4.75 and 4.75; "
        "4.734 and 4.75 in float64), the device takes the first as argmax does, the float64 reference the other",
        stage="symbolic_call", status="fail", error=r"b=7,.*1 of 28 elements differ")),
    ("random_gamma", r"float32_3$", Limitation(
        "gamma's float32 rejection sampler against the float64 reference: 2.6 ULP at one of the b=7 samples (the "
        "shape_poly catalog's gamma: 6 ULP)", stage="symbolic_call", tol=(1e-6, 0.0))),
    ("tan", r"^tan_complex64_", Limitation(
        "complex64 tan against the float64 reference: 3.7 eps (|z|-relative) at one of the b=3 points, over the 3 ULP "
        "the table allows; the table's tan bound is measured on real inputs, and complex tan is a quotient of sin, "
        "sinh, cos and cosh", stage="symbolic_call", tol=(6e-7, 0.0))),
    # the farm catalog's cumulative finding (docs/findings.md): a forward real cumsum's cuda/rocm
    # module (chlo.scan) aborts XLA:CPU's compiler on jax >= 0.11.2; run apart, its death is that
    # record's (JAX's catalog on 0.12.0.1: 22 workers died, every one of these)
    ("cumsum", r"^cumsum_(?!complex).*_reverse=False$", SCAN_ABORTS_CPU),
    # under --vjp, as the farm catalog's cumulative family declares: a reverse cumsum's pullback,
    # and a forward one's second derivative, is a forward cumsum whose chlo.scan aborts the worker
    ("cumsum", r"^cumsum_(?!complex).*_reverse=True$", SCAN_VJP_ABORTS_CPU),
    ("cumsum", r"^cumsum_(?!complex).*_reverse=False$", SCAN_VJP2_ABORTS_CPU),
    # found by this catalog under --vjp 1 (docs/findings.md, docs/repros/clamp_min_above_max_grad.py):
    # the harness draws its bounds at random, so some elements have min > max, where clamp is max
    # and JAX's derivatives are all 0
    *(("clamp", r"max_shape=\(2,3\)_min_shape=\(2,3\)", lim) for lim in CLAMP_CROSSED_GRAD),
    # JAX's catalog's out-of-bounds gathers ("negative indices", "oob indices", "oob behavior coming
    # from slice_sizes", "Test out of bounds behavior") in lax.gather's default mode
    ("gather", r"^gather_float32_(10x10x10_1x4x2_case=(3|4|5|6|9|10)|2x3x3_2x3(_case=2)?|3x10_3x2(_case=2)?)$", Limitation(
        "jax: lax.gather's default mode is PROMISE_IN_BOUNDS; with out-of-bounds indices the gather clamps its "
        "window but its transpose (a scatter-add) drops it, and JAX documents that gradients are then not correct "
        "(GatherScatterMode)", platforms=LOWERING_PLATFORMS, stage="vjp", status="fail", error="GradientMismatch")),
    # JAX's catalog calls eigh on a triangular matrix with symmetrize_input=False: the derivative JAX
    # takes is that of a Hermitian input (its perturbation the whole matrix), not of the one triangle read
    ("eigh", r"^eigh_float32_(2x20x20|50x50)_lower=(True|False)$", Limitation(
        "jax: eigh with symmetrize_input=False assumes a Hermitian input and perturbation; JAX's catalog passes a "
        "triangular matrix, so finite differences of the triangle eigh reads differ from JAX's derivative by "
        "contract (with symmetrize_input=True they agree)", platforms=("cpu", "tpu"), stage="vjp", status="fail",
        error="GradientMismatch")),
    # (float16/bfloat16 pairs pass: finite differences of a half-precision bitcast stay within the bound)
    ("bitcast_convert_type", r"^bitcast_convert_type_float32_.*_new_dtype=float32$", Limitation(
        "jax defines bitcast_convert_type's derivative as zero (ad.defjvp_zero), even from float32 to float32, "
        "where the bitcast is the identity and finite differences see 1", platforms=LOWERING_PLATFORMS, stage="vjp",
        status="fail",
        error="GradientMismatch")),
    ("scatter_(add|mul)", "_bool_", Limitation(
        "jax 0.10.2's scatter_add/scatter_mul refuse bool operands at trace time ('add does not accept dtype "
        "bool'), where JAX's own catalog still lists them", stage="trace", status="error",
        error="does not accept dtype bool")),
)


def _known(group: str, name: str) -> list[Limitation]:
    return [lim for g, n, lim in KNOWN if re.fullmatch(g, group) and re.search(n, name)]


def register() -> int:
    """Define every upstream harness in the ``upstream`` catalog; returns the count."""
    n = 0
    for e in entries():
        shapes = [tuple(s) for s in e["shapes"]]
        name = harness_key(e["group"], e["group"], e["dtype"], shapes, e["params"]).name
        lims = [Limitation(l["description"], platforms=tuple(l["platforms"]), dtypes=tuple(l["dtypes"]),
                           stage=l["stage"], crashes=l.get("crashes", False)) for l in e["limitations"]
                if not stale_upstream(e["group"], name, l["description"])]
        lims += _known(e["group"], name)
        define(FAMILY, e["group"], _fun(e["fullname"]), (), dtype=e["dtype"], group=e["group"],
               params=e["params"], shapes=shapes, compare="none", limitations=lims,
               catalog=CATALOG, source=e["fullname"], arg_maker=_arg_maker(e["fullname"]))
        n += 1
    return n
