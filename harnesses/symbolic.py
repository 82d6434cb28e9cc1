"""Hand-written symbolic harnesses: where shape polymorphism is subtle, written with their own
symbolic specs (``Poly``), constraints and sizes, not derived by vmap.

Each is also an ordinary harness at its first point's sizes (its static twin). Its symbolic
variant is exported for every platform, serialized, called at each point (a dimension of 1
and sizes that are not powers of two among them) and judged against the float64 reference
and the static lowering at that size; a point that breaks a constraint must raise JAX's
shape-assertion error. Expected errors are ``Limitation`` data with the error they expect.
Covers jax#22489, #23437, #23456, #24730 and #36766 (digitize, where, tile, searchsorted,
constraints).
"""
from dataclasses import replace
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from farm.catalog import SCAN_ABORTS_CPU, SCAN_VJP2_ABORTS_CPU, CustomArg, Limitation, Poly, RandArg, chlo_leak, define
from farm.catalog.specs import shape

FAMILY = "symbolic"
GROUP = "symbolic"
Maker = Callable[[dict[str, int], np.random.Generator], list[Any]]


def _pts(*points: dict[str, int]) -> tuple[tuple[tuple[str, int], ...], ...]:
    return tuple(tuple(sorted(p.items())) for p in points)


def _shape(spec: str, env: dict[str, int]) -> tuple[int, ...]:
    return shape(spec, env)


def sym(name: str, primitive: str, fun: Callable[..., Any], specs: Sequence[str], points: Sequence[dict[str, int]], *,
        dtypes: Sequence[str] = ("float32",), kinds: Sequence[str] = (), constraints: Sequence[str] = (),
        violations: Sequence[dict[str, int]] = (), maker: Maker | None = None,
        limitations: Sequence[Limitation] = (), compare: str | None = None, **kw: Any) -> None:
    """One hand-written symbolic harness: its static twin at ``points[0]``."""
    env0 = dict(points[0])
    dts = tuple(dtypes) * (len(specs) if len(dtypes) == 1 else 1)
    shapes = [_shape(s, env0) for s in specs]
    if maker is None:
        ks = tuple(kinds) or ("normal",) * len(specs)
        args = [RandArg(s, d, k) for s, d, k in zip(shapes, dts, ks)]
    else:
        args = [CustomArg(f"{name}.{k}", (lambda m: lambda rng: maker(env0, rng)[m])(k), s, d)
                for k, (s, d) in enumerate(zip(shapes, dts))]
        # one generator for all of them: each CustomArg draws the whole set and keeps its own
    poly = Poly(tuple(specs), _pts(*points), tuple(constraints), _pts(*violations), maker)
    define(FAMILY, primitive, fun, args, dtype=dts[0], group=GROUP, params={"case": name},
           limitations=limitations, compare=compare, shapes=shapes, poly=poly, **kw)


def _ints(lo: int, hi_dim: str, spec: str) -> Maker:
    """An array (first argument) and in-bounds int32 indices into its leading dimension."""
    def make(env: dict[str, int], rng: np.random.Generator) -> list[Any]:
        x = rng.standard_normal(_shape(spec, env)).astype(np.float32)
        i = rng.integers(lo, env[hi_dim], size=_shape("k", env)).astype(np.int32)
        return [x, i]
    return make


def _scatter(env: dict[str, int], rng: np.random.Generator) -> list[Any]:
    return [rng.standard_normal(env["n"]).astype(np.float32),
            rng.integers(0, env["n"], env["k"]).astype(np.int32), rng.standard_normal(env["k"]).astype(np.float32)]


def _start(spec: str, width: int) -> Maker:
    def make(env: dict[str, int], rng: np.random.Generator) -> list[Any]:
        x = rng.standard_normal(_shape(spec, env)).astype(np.float32)
        return [x, np.int32(rng.integers(0, max(1, env["n"] - width + 1)))]  # a violating n too
    return make


def _update(env: dict[str, int], rng: np.random.Generator) -> list[Any]:
    return [rng.standard_normal((env["n"], 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32),
            np.int32(rng.integers(0, max(1, env["n"] - 1)))]


def _distinct(env: dict[str, int], rng: np.random.Generator) -> list[Any]:
    """Distinct values per row, so argsort and top_k have one right answer."""
    rows = np.stack([rng.permutation(env["n"]) for _ in range(env["b"])])
    return [(rows * 0.75 - 1.0).astype(np.float32)]


def _spd(spec: str) -> Maker:
    def make(env: dict[str, int], rng: np.random.Generator) -> list[Any]:
        shape = _shape(spec, env)
        a = rng.standard_normal(shape)
        m = a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])
        return [m.astype(np.float32)]
    return make


def _solve(env: dict[str, int], rng: np.random.Generator) -> list[Any]:
    a = rng.standard_normal((env["b"], env["n"], env["n"])) + 3 * env["n"] ** 0.5 * np.eye(env["n"])
    return [a.astype(np.float32), rng.standard_normal((env["b"], env["n"])).astype(np.float32)]


def _sorted_and_values(env: dict[str, int], rng: np.random.Generator) -> list[Any]:
    """Sorted, distinct bins and values never equal to one (no ties to break)."""
    bins = np.sort(rng.choice(np.arange(-40, 40), env["n"], replace=False)).astype(np.float32) / 8
    return [rng.uniform(-6, 6, env["m"]).astype(np.float32) + 1 / 32, bins]


def _searchsorted(env: dict[str, int], rng: np.random.Generator) -> list[Any]:
    x, bins = _sorted_and_values(env, rng)
    return [bins, x]


INCONCLUSIVE = Limitation("without a constraint JAX cannot decide k <= n for a symbolic n: export must refuse "
                          "with InconclusiveDimensionOperation (the error names the way around it: a constraint)",
                          stage="symbolic_export", status="error", error="InconclusiveDimensionOperation.*inconclusive")
RESHAPE_UNEVEN = Limitation("a reshape of a symbolic n to (-1, 3) needs n divisible by 3, which no constraint in "
                            "JAX's language says: export must refuse with 'Cannot divide evenly'",
                            stage="symbolic_export", status="error", error="Cannot divide evenly")
EIGH_TPU = Limitation("the tpu lowering of eigh supports symbolic batch dimensions only ('Shape polymorphism for "
                      "native lowering for eigh is implemented only for the batch dimensions'): it sinks the "
                      "four-platform export, while cpu, cuda and rocm export", platforms=("tpu",),
                      stage="symbolic_export", status="error", error="implemented only for the batch dimensions")
SEARCHSORTED = Limitation("jnp.searchsorted (and digitize, built on it) cannot be exported with a symbolic length of "
                          "the sorted array, whatever the method: the hijax SearchSorted primitive converts the "
                          "dimension to an int in its constructor (jax/_src/numpy/hijax.py:88, an overflow check), "
                          "jax 0.10.2; a regression of jax#22489's fix (docs/findings.md); 0.5.3 refuses it at "
                          "that check's comparison",
                          stage="symbolic_export", status="error",
                          # jax 0.5.3 refuses it too, at the overflow check's comparison
                          error=r"used in a context that requires a constant|'n' <= '2147483647' is inconclusive")
SEARCHSORTED_SORT = Limitation("jnp.searchsorted(method='sort') with symbolic query values: bounded by a constraint "
                               "past its index-dtype comparison, it still raises \"'_DimExpr' object cannot be "
                               "interpreted as an integer\" (jax 0.10.2, docs/findings.md; 0.5.3 exports it)",
                               stage="symbolic_export", status="error", error="cannot be interpreted as an integer",
                               jax=">=0.9.2")
#: jax 0.5.3's symbolic cholesky modules for cuda/rocm call no solver: they run here, and right
#: (a version sweep's 4 unexpected passes); 0.9.2 and later call cusolver/hipsolver.
CHOLESKY_SOLVER_SINCE = ">0.5.3"
#: jax 0.5.3 exports the symbolic top_k for several platforms with ``mhlo.topk``, which crosses
#: the plugin boundary (census of the multi-platform artifact); 0.9.2 and later do not.
TOPK_MHLO = Limitation("jax 0.5.3's multi-platform symbolic top_k export holds mhlo.topk, which crosses the plugin "
                       "boundary (JAX #15608)", stage="census", error="mhlo.topk", jax="<=0.5.3")
GPU_SOLVER = Limitation("cuda/rocm solver custom calls (cusolver/hipsolver) have no CPU handler: their symbolic "
                        "modules cannot be called here", platforms=("cuda", "rocm"), stage="symbolic_call",
                        status="not_runnable_here")

# gather, scatter, dynamic_slice, dynamic_update_slice with symbolic bounds
sym("take_rows", "gather", lambda x, i: jnp.take(x, i, axis=0), ["n, 3", "k"], [dict(n=1, k=2), dict(n=5, k=3), dict(n=7, k=6)],
    dtypes=("float32", "int32"), maker=_ints(0, "n", "n, 3"))
sym("fancy_index", "gather", lambda x, i: x[i, 1:], ["n, 4", "k"], [dict(n=3, k=1), dict(n=6, k=5), dict(n=7, k=2)],
    dtypes=("float32", "int32"), maker=_ints(0, "n", "n, 4"))
sym("scatter_add", "scatter-add", lambda x, i, u: x.at[i].add(u), ["n", "k", "k"], [dict(n=1, k=3), dict(n=5, k=3), dict(n=6, k=7)],
    dtypes=("float32", "int32", "float32"), maker=_scatter)
sym("dynamic_slice", "dynamic_slice", lambda x, s: lax.dynamic_slice_in_dim(x, s, 2), ["n, m", ""],
    [dict(n=2, m=1), dict(n=3, m=4), dict(n=7, m=5)], dtypes=("float32", "int32"), constraints=["n >= 2"],
    violations=[dict(n=1, m=3)], maker=_start("n, m", 2))
sym("dynamic_update_slice", "dynamic_update_slice", lambda x, u, s: lax.dynamic_update_slice_in_dim(x, u, s, 0),
    ["n, 3", "2, 3", ""], [dict(n=2), dict(n=5), dict(n=6)], dtypes=("float32", "float32", "int32"),
    constraints=["n >= 2"], violations=[dict(n=1)], maker=_update)

# reshape with -1 and products of dimensions
sym("flatten", "reshape", lambda x: x.reshape(-1), ["b, 4, n"], [dict(b=1, n=1), dict(b=3, n=2), dict(b=7, n=5)])
sym("unflatten_4b", "reshape", lambda x: x.reshape(x.shape[0] // 4, 4), ["4*b"], [dict(b=1), dict(b=3), dict(b=7)])
sym("merge_split", "reshape", lambda x: x.reshape(x.shape[0] * x.shape[1], -1).T, ["b, n, 6"],
    [dict(b=1, n=1), dict(b=2, n=3), dict(b=5, n=7)])
sym("uneven_minus_one", "reshape", lambda x: x.reshape(-1, 3), ["n"], [dict(n=3), dict(n=6), dict(n=9)],
    limitations=[RESHAPE_UNEVEN])

# iota/arange, pad, concatenate
sym("arange_n", "iota", lambda x: x + jnp.arange(x.shape[0], dtype=x.dtype), ["n"], [dict(n=1), dict(n=3), dict(n=10)])
sym("broadcasted_iota", "iota", lambda x: x * lax.broadcasted_iota(jnp.float32, x.shape, 1), ["b, n"],
    [dict(b=1, n=1), dict(b=3, n=5), dict(b=2, n=7)])
sym("interior", "pad", lambda x: lax.pad(x, np.float32(0.5), [(1, 2, 1)]), ["n"], [dict(n=1), dict(n=4), dict(n=7)])
sym("negative_low", "pad", lambda x: lax.pad(x, np.float32(0), [(-1, 1, 0), (0, 0, 0)]), ["n, 2"],
    [dict(n=1), dict(n=3), dict(n=6)])
sym("pieces", "concatenate", lambda x, y: jnp.concatenate([x, y, x[:1]]), ["n", "2*n"], [dict(n=1), dict(n=3), dict(n=5)])

# convolution with symbolic spatial dimensions
sym("valid", "conv_general_dilated", lambda x, k: lax.conv_general_dilated(x, k, (1, 1), "VALID"),
    ["b, 2, h, w", "3, 2, 3, 3"], [dict(b=1, h=3, w=5), dict(b=2, h=4, w=7), dict(b=3, h=6, w=3)],
    constraints=["h >= 3", "w >= 3"], violations=[dict(b=1, h=2, w=5)])
sym("same_stride2", "conv_general_dilated", lambda x, k: lax.conv_general_dilated(x, k, (2, 2), "SAME"),
    ["b, 2, h, w", "3, 2, 3, 3"], [dict(b=1, h=1, w=5), dict(b=2, h=4, w=7), dict(b=3, h=9, w=6)])

# reductions and cumulative ops over a symbolic axis
_LIMITS = {"var": chlo_leak("square"), "cumsum": [SCAN_ABORTS_CPU, SCAN_VJP2_ABORTS_CPU]}  # the latter: the cumulative family's finding
for _name, _prim, _f in [("sum", "reduce_sum", lambda x: jnp.sum(x, axis=1)), ("max", "reduce_max", lambda x: jnp.max(x, axis=1)),
                         ("mean", "reduce_sum", lambda x: jnp.mean(x, axis=1)), ("var", "reduce_sum", lambda x: jnp.var(x, axis=1)),
                         ("cumsum", "cumsum", lambda x: jnp.cumsum(x, axis=1)),
                         ("cumlogsumexp", "cumlogsumexp", lambda x: lax.cumlogsumexp(x, axis=1, reverse=True)),
                         ("argmax", "argmax", lambda x: jnp.argmax(x, axis=1))]:
    sym(_name, _prim, _f, ["b, n"], [dict(b=1, n=1), dict(b=3, n=5), dict(b=2, n=7)],
        maker=_distinct if _name == "argmax" else None, limitations=_LIMITS.get(_name, ()))

# sort, argsort, top_k
sym("sort", "sort", lambda x: jnp.sort(x, axis=-1), ["b, n"], [dict(b=1, n=1), dict(b=3, n=5), dict(b=2, n=7)], maker=_distinct)
sym("argsort", "sort", lambda x: jnp.argsort(x, axis=-1), ["b, n"], [dict(b=2, n=1), dict(b=3, n=5), dict(b=1, n=7)],
    maker=_distinct)
sym("top_k", "top_k", lambda x: lax.top_k(x, 3), ["b, n"], [dict(b=1, n=3), dict(b=3, n=5), dict(b=2, n=7)],
    constraints=["n >= 3"], violations=[dict(b=2, n=2)], maker=_distinct, limitations=[*chlo_leak("top_k"), TOPK_MHLO])
sym("top_k_unconstrained", "top_k", lambda x: lax.top_k(x, 3), ["b, n"], [dict(b=1, n=3), dict(b=3, n=5)],
    maker=_distinct, limitations=[INCONCLUSIVE, *chlo_leak("top_k"), TOPK_MHLO])

# random bits of a symbolic shape: the same key gives the same bits at every size, statically or not
sym("uniform", "random_bits", lambda x: x + jax.random.uniform(jax.random.key(7), x.shape), ["b, n"],
    [dict(b=1, n=1), dict(b=3, n=5), dict(b=2, n=7)])
sym("bits", "random_bits", lambda x: jax.random.bits(jax.random.key(3), x.shape, jnp.uint32) ^ x, ["n, 3"],
    [dict(n=1), dict(n=5), dict(n=6)], dtypes=("uint32",), kinds=("bits",))

# linalg: a symbolic batch, and symbolic matrix dimensions
sym("cholesky_batch", "cholesky", lambda a: jnp.linalg.cholesky(a), ["b, 3, 3"], [dict(b=1), dict(b=3), dict(b=7)],
    maker=_spd("b, 3, 3"), limitations=[replace(GPU_SOLVER, jax=CHOLESKY_SOLVER_SINCE)])
sym("cholesky_n", "cholesky", lambda a: jnp.linalg.cholesky(a), ["n, n"], [dict(n=1), dict(n=3), dict(n=6)],
    maker=_spd("n, n"), limitations=[replace(GPU_SOLVER, jax=CHOLESKY_SOLVER_SINCE)])
sym("solve", "lu", lambda a, b: jnp.linalg.solve(a, b[..., None])[..., 0], ["b, n, n", "b, n"],
    [dict(b=1, n=1), dict(b=2, n=3), dict(b=3, n=5)], maker=_solve, limitations=[GPU_SOLVER])
sym("eigvalsh_n", "eigh", lambda a: jnp.linalg.eigvalsh(a), ["n, n"], [dict(n=1), dict(n=3), dict(n=5)],
    maker=_spd("n, n"), limitations=[EIGH_TPU, GPU_SOLVER])

# while and scan with symbolic trip counts
sym("fori_loop", "while", lambda x: lax.fori_loop(0, x.shape[0], lambda i, c: c * 0.5 + x[i], jnp.zeros(x.shape[1:], x.dtype)),
    ["n, 3"], [dict(n=1), dict(n=4), dict(n=7)])
sym("scan", "scan", lambda x: lax.scan(lambda c, r: (c + r, c * r), jnp.zeros(x.shape[1:], x.dtype), x), ["n, m"],
    [dict(n=1, m=2), dict(n=3, m=1), dict(n=7, m=5)],
    tol=(1e-5, 1e-6))  # the carry is a running sum and the output its product with a row: 2 roundings per step

# jnp functions from jax#22489, #23437, #23456, #24730
sym("digitize", "digitize", lambda x, bins: jnp.digitize(x, bins), ["m", "n"], [dict(m=3, n=1), dict(m=5, n=4), dict(m=7, n=9)],
    maker=_sorted_and_values, limitations=[SEARCHSORTED])
sym("searchsorted", "searchsorted", lambda a, v: jnp.searchsorted(a, v), ["n", "m"], [dict(m=3, n=1), dict(m=5, n=4), dict(m=2, n=7)],
    maker=_searchsorted, limitations=[SEARCHSORTED])
# symbolic values, a static sorted array: "scan" and "compare_all" export; "sort" sorts a and v
# together and picks the index dtype from their total size, so it needs a bound on m ('m + 5' <=
# int32 max), and then still fails
for _method in ("scan", "sort", "compare_all"):
    sym(f"searchsorted_{_method}_static_bins", "searchsorted",
        lambda a, v, m=_method: jnp.searchsorted(a, v, method=m), ["5", "m"], [dict(m=1, n=5), dict(m=3, n=5), dict(m=7, n=5)],
        maker=_searchsorted, constraints=["m <= 1000000"] if _method == "sort" else [],
        limitations=[SEARCHSORTED_SORT] if _method == "sort" else [])
sym("where", "select_n", lambda x, y: jnp.where(x > 0, x, y), ["b, n", "n"], [dict(b=1, n=1), dict(b=3, n=5), dict(b=2, n=6)])
sym("tile", "tile", lambda x: jnp.tile(x, (2, 1)), ["n, 3"], [dict(n=1), dict(n=3), dict(n=5)])
sym("tile_by_n", "tile", lambda x: jnp.tile(x, x.shape[0]), ["n"], [dict(n=1), dict(n=3), dict(n=5)])
