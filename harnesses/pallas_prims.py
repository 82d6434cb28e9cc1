"""Every lax primitive inside a Pallas kernel body (catalog ``pallas``, family ``pallas_prims``):
the primitive × target support matrix (``farm pallas-matrix``, docs/pallas.md).

Each harness is one primitive in a plain ``pl.pallas_call`` over a grid of at least two
programs, its operands and result cut into ``BlockSpec`` blocks whose index maps place them.
The kernel has no compiler parameters, so it is lowered for every backend (every TPU
generation the installed jax knows, Triton for cuda and rocm, Mosaic GPU where this jax lowers
a plain ``pallas_call`` with it); its numbers are the interpret-mode kernel against a float64
NumPy/SciPy reference applied block by block (``_blockwise``: the same index maps).

Layouts (``LAYOUTS``): ``tile``, blocks of Mosaic TPU's native (8, 128) tile and powers of two;
``lane``, (8, 130) blocks whose lane dimension is the whole array's (Mosaic TPU takes that, Triton
needs powers of two); ``odd``, (5, 7) blocks, neither. Every primitive at its main dtype in
``tile`` and ``lane``; the other dtypes the backends plausibly take in ``tile``; ``odd`` for one
primitive per family (a block's shape is the load's and the store's business, not the
primitive's). Shape-changing primitives (reductions, reshape, transpose, dot_general,
broadcast_in_dim, iota) have their own block arrangements.

What a backend refuses is a ``Limitation`` (``KNOWN``: stage ``pallas_export``, per target, with
the backend's own error and the reason) and is read as a fact of the matrix, not a failure.
Mosaic TPU's and Triton's were measured on jax 0.12.0.1 and hold on 0.10.2. Mosaic GPU's were
measured on both, each limitation with its ``jax=`` range: 0.10.2 lowers the plain ``pallas_call``
with Mosaic GPU, 0.12 has no such lowering, so there the Mosaic GPU targets export the kernel's
``plgpu.kernel`` twin (``_mosaic_gpu``: the same body over the same blocks in ``emit_pipeline``).
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special as sp
from jax import lax
from jax.experimental import pallas as pl

from farm.catalog import ROCM_MOSAIC, ROCM_MOSAIC_MESH, Kernel, Limitation, RandArg, define, ulps

FAMILY = "pallas_prims"
CATALOG = "pallas"
GROUP = "prims"
ALL = ("mosaic_tpu", "mosaic_gpu", "triton")


# ---------------------------------------------------------------- what the backends refuse

TPU = ("tpu",)
TRITON = ("cuda:triton", "rocm:triton")


def _unimplemented(backend: str, platforms: tuple[str, ...], primitive: str) -> Limitation:
    # jax 0.9.2 says "for CoreType.TC" and "Pallas GPU lowering"; 0.10.2 on "for tc" and "Pallas Triton lowering"
    words = {"tpu": f"Unimplemented primitive in Pallas TPU lowering for (tc|CoreType\\.TC): {primitive}\\b",
             "triton": f"Unimplemented primitive in Pallas (Triton|GPU) lowering: {primitive}\\b"}[backend]
    name = {"tpu": "Mosaic TPU", "triton": "Triton"}[backend]
    return Limitation(f"{name} has no lowering rule for {primitive}", platforms=platforms, stage="pallas_export",
                      error=words)


#: Blocks Mosaic TPU refuses: neither multiples of its (8, 128) tile nor the whole array's dimensions.
TPU_BLOCK = Limitation("Mosaic TPU needs a block's last two dimensions to be multiples of (8, 128) or the array's own",
                       platforms=TPU, stage="pallas_export",
                       error="last two dimensions of your block shape are divisible by 8 and 128")
#: Triton's rule: every array in the kernel has a power-of-two size.
TRITON_POW2 = Limitation("Triton needs power-of-two block shapes", platforms=TRITON, stage="pallas_export",
                         error="size is a power of 2")
TPU_ACCURACY = Limitation("Mosaic TPU refuses the accuracy= parameter", platforms=TPU, stage="pallas_export",
                          error="Not implemented: accuracy")
ERF_INV_F32 = Limitation("erf_inv lowers for float32 only (Mosaic TPU and Triton share the helper)",
                         platforms=TPU + TRITON, stage="pallas_export",
                         error="erf_inv_lowering_helper not implemented for (bfloat16|float16)")
TPU_ARGMAX_INT = Limitation("Mosaic TPU's argmax (reduce_index) takes floating operands only", platforms=TPU,
                            stage="pallas_export",
                            error="Unsupported combination of input dtype .int32.|Only float32 is supported")
TRITON_HALF_DIV = Limitation("Triton's float division takes no 16-bit floats (div; logistic divides)",
                             platforms=TRITON, stage="pallas_export",
                             error=r"unsupported types: tensor<\d+x\d+x(bf16|f16)> and tensor")
#: JAX findings (docs/repros/): the lowering emits Mosaic IR its own verifier rejects ("Please file a bug").
TPU_FLOAT_IOTA = Limitation("finding: Mosaic TPU lowers a float iota to a tpu.iota its verifier rejects "
                            "(docs/repros/pallas_tpu_float_iota.py)", platforms=TPU, stage="pallas_export",
                            error="'tpu.iota' op result #0 must be vector of integer")
TPU_HALF_IS_FINITE = Limitation("finding: Mosaic TPU lowers a 16-bit is_finite to a tpu.weird its verifier rejects "
                                "(docs/repros/pallas_tpu_half_is_finite.py)", platforms=TPU, stage="pallas_export",
                                error="'tpu.weird' op Input type must be F32")
#: jax 0.9.2 only (gone in 0.10.2): its Mosaic TPU rules for atan2 and erf take an ``accuracy`` argument
#: the lowering does not pass them, and it has no cast between float32 and uint8.
TPU_ACCURACY_ARG_0_9 = Limitation("jax 0.9.2's Mosaic TPU lowering rules for atan2 and erf take an accuracy argument "
                                  "the lowering does not pass (a TypeError; they lower from 0.10.2)", platforms=TPU,
                                  stage="pallas_export", error="missing 1 required positional argument: 'accuracy'",
                                  jax="<0.10")
TPU_UINT8_CAST_0_9 = Limitation("jax 0.9.2's Mosaic TPU has no cast between float32 and uint8 (it has from 0.10.2)",
                                platforms=TPU, stage="pallas_export",
                                error="Unsupported cast: (float32 -> uint8|uint8 -> float32)", jax="<0.10")
TPU_BF16_ACC = Limitation("finding: Mosaic TPU lowers a bfloat16-accumulating dot_general to a tpu.matmul its "
                          "verifier rejects (docs/repros/pallas_tpu_bf16_matmul_acc.py)", platforms=TPU,
                          stage="pallas_export", error="'tpu.matmul' op Expected matmul acc to be 32-bit")

#: Mosaic GPU, told it is an H100: ``pl.pallas_call`` with ``jax_pallas_use_mosaic_gpu`` (measured on jax
#: 0.10.2: ``jax="<0.12"``), the ``plgpu.kernel`` twin on jax 0.12 (``jax=">=0.12"``); none: both.
MGPU = ("cuda:mosaic_gpu",)
MGPU_WARPGROUP = Limitation("Mosaic GPU copies a block only if its bytes are a multiple of the warpgroup's 128 threads",
                            platforms=MGPU, stage="pallas_export",
                            error="Only copies transferring a number of bytes divisible by the warpgroup size", jax="<0.12")
MGPU_ACCURACY = Limitation("Mosaic GPU refuses the accuracy= parameter", platforms=MGPU, stage="pallas_export",
                           error="Not implemented: accuracy")
MGPU_8BIT = Limitation("Mosaic GPU does no arithmetic on 8-bit integers (bitwise only)", platforms=MGPU,
                       stage="pallas_export", error="Pointwise operations on 8-bit types are unsupported")
MGPU_BOOL = Limitation("Mosaic GPU takes no bool (1-bit) operands", platforms=MGPU, stage="pallas_export",
                       error="Unsupported integer bitwidth: 1")
MGPU_BOOL_OUT = Limitation("finding: Mosaic GPU refuses a bool block, with a message that contradicts itself "
                           "('must have a number of elements that is a multiple of 128 (got 1024)'; "
                           "docs/repros/pallas_mosaic_gpu_bool_block.py)", platforms=MGPU,
                           stage="pallas_export", error=r"xi1, .* must have a number of elements that is a multiple of 128", jax="<0.12")
MGPU_TO_BOOL = Limitation("Mosaic GPU cannot convert to bool (a 1-bit register)", platforms=MGPU,
                          stage="pallas_export", error="Register bitwidth in target type must be divisible by 8")
MGPU_AXES = Limitation("Mosaic GPU reduces whole arrays only ('No support for axes yet')", platforms=MGPU,
                       stage="pallas_export", error="No support for axes yet", jax="<0.12")
MGPU_IOTA = Limitation("Mosaic GPU cannot infer the layout of an iota", platforms=MGPU, stage="pallas_export",
                       error="Failed to infer the output layout of the iota", jax="<0.12")
MGPU_FLOAT_REM = Limitation("finding: Mosaic GPU's rem of floats raises a TypeError (no % on a float "
                            "FragmentedArray) instead of lowering or refusing, jax 0.10.2 and 0.12 "
                            "(docs/repros/pallas_mosaic_gpu_float_rem.py)",
                            platforms=MGPU, stage="pallas_export",
                            error="unsupported operand type.s. for %: 'FragmentedArray'")
MGPU_SELECT_LAYOUTS = Limitation("Mosaic GPU cannot select bfloat16 values by a predicate from float32 (incompatible "
                                 "layouts)", platforms=MGPU, stage="pallas_export",
                                 error="Incompatible FragmentedArray layouts", jax="<0.12")
MGPU_COPY_256_0_9 = Limitation("jax 0.9.2's Mosaic GPU copies at most 256 elements along each dimension of a block",
                               platforms=MGPU, stage="pallas_export",
                               error="Async copies only support copying <=256 elements along each dimension",
                               jax="<0.10")
#: jax 0.12 (``plgpu.kernel``: ``Kernel.mosaic_gpu``): the same kernels, Mosaic GPU's refusals there.
MGPU_LAYOUT = Limitation("Mosaic GPU finds no register layout for a block that is not (8, 128)-tiled (lane, odd, the "
                         "(8, 1) column) or for a reduction over an axis", platforms=MGPU, stage="pallas_export",
                         error="Failed to infer a possible set of layouts|Layout inference failed to find a solution",
                         jax=">=0.12")
MGPU_MATH_LAYOUT = Limitation("finding: Mosaic GPU's layout inference has no rule for the math op erf and atan2 lower "
                              "to (they lowered on 0.10.2; docs/repros/pallas_mosaic_gpu_erf_layout.py)",
                              platforms=MGPU, stage="pallas_export",
                              error=r"No layout inference rule defined for .*math\.(erf|atan2)", jax=">=0.12")
MGPU_BOOL_BYTES = Limitation("Mosaic GPU refuses a bool block ('Vector length should be a multiple of byte size')",
                             platforms=MGPU, stage="pallas_export",
                             error="Vector length should be a multiple of byte size", jax=">=0.12")
#: Mosaic GPU has no rule for these (jax 0.10.2).
MGPU_MISSING = {"acos", "acosh", "asin", "asinh", "atan", "atanh", "cbrt", "ceil", "cosh", "digamma", "dot_general",
                "erf_inv", "erfc", "expm1", "floor", "igamma", "is_finite", "lgamma", "log1p", "nextafter",
                "population_count", "pow", "sinh", "sqrt", "tan", "transpose", "argmax"}
#: ... and jax 0.12 (sqrt gained one; reduce_and and reduce_or are refused by name, not by their bool operands).
MGPU_MISSING_0_12 = MGPU_MISSING - {"sqrt"} | {"reduce_and", "reduce_or"}
#: ... and jax 0.9.2 (clz and the shifts gained theirs in 0.10).
MGPU_MISSING_0_9 = MGPU_MISSING | {"clz", "shift_left", "shift_right_logical", "shift_right_arithmetic"}
#: Where each set was measured: the jax versions it holds for.
MGPU_MISSING_BY_JAX = (("<0.10", MGPU_MISSING_0_9), (">=0.10,<0.12", MGPU_MISSING), (">=0.12", MGPU_MISSING_0_12))
COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge"}


def _mgpu_missing(q: str) -> list[Limitation]:
    """Mosaic GPU's missing rule for ``q``: one limitation for every jax it is missing on, or one per
    range of versions where it is."""
    where = [spec for spec, missing in MGPU_MISSING_BY_JAX if q in missing]
    return [Limitation(f"Mosaic GPU has no lowering rule for {q}", platforms=MGPU, stage="pallas_export",
                       error=f"Unimplemented primitive in Pallas Mosaic GPU lowering: {q} ", jax=spec)
            for spec in ([""] if len(where) == len(MGPU_MISSING_BY_JAX) else where)]
EIGHT_BIT_ARITHMETIC = {"add", "sub", "mul", "max", "min", "shift_left", "shift_right_logical", "shift_right_arithmetic"}

#: Mosaic TPU and Triton have no rule for these (measured, jax 0.12).
TPU_MISSING = {"acos", "acosh", "asin", "asinh", "atan", "atanh", "cbrt", "cosh", "sinh", "digamma", "erfc", "lgamma",
               "expm1", "igamma"}
TRITON_MISSING = {"digamma", "erf", "erfc", "lgamma", "round", "igamma", "reduce_and", "reduce_or"}
#: Layouts whose blocks Mosaic TPU refuses, and those with a block that is not a power of two.
TPU_BAD_LAYOUTS = {"odd", "small"}
POW2_BAD_LAYOUTS = {"odd", "lane"}
HALF = ("bfloat16", "float16")


def _half(dtypes: tuple[str, ...]) -> bool:
    return dtypes[-1] in HALF


#: (does it concern this harness: (primitive, the operands' dtypes and the harness's, layout,
#: accuracy= given, its other parameters), the limitation), each a backend's refusal, with its own words. Only the
#: first that names a target is asked about a failure there (``Harness.limitation``): the
#: backend's first refusal comes first (a block's shape before the body's primitives).
KNOWN: list[tuple[Callable[[str, tuple[str, ...], str, bool, dict[str, Any]], bool], Limitation]] = [
    (lambda p, d, lay, acc, kw: lay in TPU_BAD_LAYOUTS, TPU_BLOCK),
    (lambda p, d, lay, acc, kw: lay in POW2_BAD_LAYOUTS, TRITON_POW2),
    *[(lambda p, d, lay, acc, kw, q=q: p == q, _unimplemented("tpu", TPU, q)) for q in sorted(TPU_MISSING)],
    *[(lambda p, d, lay, acc, kw, q=q: p == q and lay not in POW2_BAD_LAYOUTS, _unimplemented("triton", TRITON, q))
      for q in sorted(TRITON_MISSING)],
    (lambda p, d, lay, acc, kw: acc, TPU_ACCURACY),
    (lambda p, d, lay, acc, kw: p == "erf_inv" and _half(d), ERF_INV_F32),
    (lambda p, d, lay, acc, kw: p == "argmax" and d[-1] == "int32", TPU_ARGMAX_INT),
    (lambda p, d, lay, acc, kw: p in ("div", "logistic") and _half(d) and lay not in POW2_BAD_LAYOUTS, TRITON_HALF_DIV),
    (lambda p, d, lay, acc, kw: p == "iota" and d[-1] == "float32", TPU_FLOAT_IOTA),
    (lambda p, d, lay, acc, kw: p == "is_finite" and _half(d), TPU_HALF_IS_FINITE),
    (lambda p, d, lay, acc, kw: p == "dot_general" and kw.get("acc") == "bfloat16", TPU_BF16_ACC),
    (lambda p, d, lay, acc, kw: p in ("atan2", "erf"), TPU_ACCURACY_ARG_0_9),
    (lambda p, d, lay, acc, kw: p == "convert_element_type" and "uint8" in (d[0], kw.get("to")), TPU_UINT8_CAST_0_9),
    # Mosaic GPU: jax 0.10.2 refuses a block's byte count before anything else; jax 0.12 a missing
    # rule first, then the layouts (``jax=`` on each limitation says which version it was measured on)
    (lambda p, d, lay, acc, kw: True, ROCM_MOSAIC),
    (lambda p, d, lay, acc, kw: True, ROCM_MOSAIC_MESH),
    (lambda p, d, lay, acc, kw: lay in POW2_BAD_LAYOUTS or kw.get("from") == "column", MGPU_WARPGROUP),
    *[(lambda p, d, lay, acc, kw, q=q: p == q, lim) for q in sorted(MGPU_MISSING_0_9 | MGPU_MISSING_0_12)
      for lim in _mgpu_missing(q)],
    (lambda p, d, lay, acc, kw: p in ("erf", "atan2"), MGPU_MATH_LAYOUT),
    (lambda p, d, lay, acc, kw: lay in POW2_BAD_LAYOUTS or kw.get("from") == "column"
     or p in ("reduce_sum", "reduce_max", "reduce_min"), MGPU_LAYOUT),
    (lambda p, d, lay, acc, kw: acc, MGPU_ACCURACY),
    (lambda p, d, lay, acc, kw: d[0] == "bool", MGPU_BOOL),
    (lambda p, d, lay, acc, kw: d[-1] in ("int8", "uint8") and p in EIGHT_BIT_ARITHMETIC, MGPU_8BIT),
    (lambda p, d, lay, acc, kw: p in COMPARISONS, MGPU_BOOL_OUT),
    (lambda p, d, lay, acc, kw: p in COMPARISONS, MGPU_BOOL_BYTES),
    (lambda p, d, lay, acc, kw: p == "convert_element_type" and kw.get("to") == "bool", MGPU_TO_BOOL),
    (lambda p, d, lay, acc, kw: p in ("reduce_sum", "reduce_max", "reduce_min"), MGPU_AXES),
    (lambda p, d, lay, acc, kw: p == "iota", MGPU_IOTA),
    (lambda p, d, lay, acc, kw: p == "rem" and d[-1] in F, MGPU_FLOAT_REM),
    (lambda p, d, lay, acc, kw: p == "select_n" and d[-1] == "bfloat16", MGPU_SELECT_LAYOUTS),
    (lambda p, d, lay, acc, kw: p == "reshape" and kw.get("to") == "1024", MGPU_COPY_256_0_9),
]


# ---------------------------------------------------------------- blocks and grids

IndexMap = Callable[..., tuple[int, ...]]


@dataclass(frozen=True)
class Operand:
    """One operand of the kernel: the whole array, its block and where block (i, j) comes from."""

    shape: tuple[int, ...]
    dtype: str
    block: tuple[int, ...]
    index: IndexMap
    kind: str = "normal"  # RandArg's value domain


def _tile(i: int, j: int) -> tuple[int, int]:
    return (i, j)


def _rows(i: int, j: int) -> tuple[int, int]:
    return (i, 0)


def _cols(i: int, j: int) -> tuple[int, int]:
    return (0, j)


def _swapped(i: int, j: int) -> tuple[int, int]:
    return (j, i)


@dataclass(frozen=True)
class Layout:
    """A 2-D elementwise arrangement: arrays of ``shape`` in ``block``s, a grid of shape/block."""

    name: str
    shape: tuple[int, int]
    block: tuple[int, int]

    @property
    def grid(self) -> tuple[int, int]:
        return (self.shape[0] // self.block[0], self.shape[1] // self.block[1])


LAYOUTS = {
    "tile": Layout("tile", (16, 256), (8, 128)),  # Mosaic TPU's (8, 128) tile; powers of two
    "lane": Layout("lane", (16, 130), (8, 130)),  # lane block = the whole lane dimension; not a power of two
    "odd": Layout("odd", (10, 14), (5, 7)),  # neither a tile multiple nor the whole array
}


def _out_shape(grid: tuple[int, ...], block: tuple[int, ...], out_index: IndexMap) -> tuple[int, ...]:
    """The output array: every block ``out_index`` places, side by side."""
    top = [0] * len(block)
    for ij in itertools.product(*(range(g) for g in grid)):
        top = [max(t, a + 1) for t, a in zip(top, out_index(*ij), strict=True)]
    return tuple(t * b for t, b in zip(top, block, strict=True))


def _pallas(fn: Callable[..., Any], ins: Sequence[Operand], grid: tuple[int, ...], out_index: IndexMap,
            interpret: bool, lead: int = 0) -> Callable[..., Any]:
    """``fn`` over the values of one block of each operand, as a ``pallas_call`` over ``grid``:
    the output's block is what ``fn`` returns for the input blocks, placed by ``out_index``
    (``lead``: in an output with that many more leading dimensions, one per program along the
    grid's first ``lead`` axes, squeezed out of the block: a (1, 128) block is then a whole
    (1, 128) slab, which every backend takes whatever its tiling)."""
    blocks = [jax.ShapeDtypeStruct(o.block, o.dtype) for o in ins]
    out_block = jax.eval_shape(fn, *blocks)
    out_shape = grid[:lead] + _out_shape(grid, out_block.shape, out_index)
    out_spec = pl.BlockSpec((None,) * lead + out_block.shape, lambda *ij: (*ij[:lead], *out_index(*ij)))

    def kernel(*refs: Any) -> None:
        *in_refs, o_ref = refs
        o_ref[...] = fn(*(r[...] for r in in_refs))

    def f(*xs: Any) -> Any:
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(out_shape, out_block.dtype), grid=grid,
                              in_specs=[pl.BlockSpec(o.block, o.index) for o in ins],
                              out_specs=out_spec, interpret=interpret)(*xs)
    return f


def _mosaic_gpu(fn: Callable[..., Any], ins: Sequence[Operand], grid: tuple[int, ...], out_index: IndexMap,
                lead: int = 0) -> Callable[..., Any]:
    """The same kernel written for Mosaic GPU where ``pl.pallas_call`` has no Mosaic GPU lowering
    (jax 0.12): ``plgpu.kernel`` over the whole arrays, ``plgpu.emit_pipeline`` over the same grid
    with the same ``BlockSpec``s (one CTA steps through the blocks), the same body."""
    from jax.experimental.pallas import mosaic_gpu as plgpu

    blocks = [jax.ShapeDtypeStruct(o.block, o.dtype) for o in ins]
    out_block = jax.eval_shape(fn, *blocks)
    out_shape = grid[:lead] + _out_shape(grid, out_block.shape, out_index)
    out_spec = pl.BlockSpec((None,) * lead + out_block.shape, lambda *ij: (*ij[:lead], *out_index(*ij)))

    def body(*refs: Any) -> None:
        def step(_: Any, *block_refs: Any) -> None:
            *in_refs, o_ref = block_refs
            o_ref[...] = fn(*(r[...] for r in in_refs))
        plgpu.emit_pipeline(step, grid=grid, in_specs=[pl.BlockSpec(o.block, o.index) for o in ins],
                            out_specs=[out_spec])(*refs)

    def f(*xs: Any) -> Any:
        return plgpu.kernel(body, out_type=jax.ShapeDtypeStruct(out_shape, out_block.dtype))(*xs)
    return f


def _blockwise(ref: Callable[..., Any], ins: Sequence[Operand], grid: tuple[int, ...],
               out_index: IndexMap, lead: int = 0) -> Callable[..., Any]:
    """The float64 reference of the kernel: ``ref`` over the same blocks, placed the same way."""
    def reference(*xs: np.ndarray) -> np.ndarray:
        out: np.ndarray | None = None
        for ij in itertools.product(*(range(g) for g in grid)):  # noqa: B007
            parts = []
            for x, o in zip(xs, ins, strict=True):
                at = o.index(*ij)
                parts.append(x[tuple(slice(a * b, (a + 1) * b) for a, b in zip(at, o.block, strict=True))])
            got = np.asarray(ref(*parts))
            if out is None:
                out = np.zeros(grid[:lead] + _out_shape(grid, got.shape, out_index), got.dtype)
            at = out_index(*ij)
            where = tuple(slice(a * b, (a + 1) * b) for a, b in zip(at, got.shape, strict=True))
            out[ij[:lead] + where] = got
        assert out is not None
        return out
    return reference


def _limits(primitive: str, dtypes: Sequence[str], layout: str, accuracy: bool,
            params: dict[str, Any]) -> list[Limitation]:
    """The limitations of ``KNOWN`` that concern this harness."""
    return [lim for when, lim in KNOWN if when(primitive, tuple(dtypes), layout, accuracy, params)]


def prim(primitive: str, fn: Callable[..., Any], ref: Callable[..., Any], ins: Sequence[Operand],
         grid: tuple[int, ...], *, dtype: str, layout: str, out_index: IndexMap = _tile,
         params: dict[str, Any] | None = None, tol: tuple[float, float] | None = None,
         compare: str | None = None, accuracy: bool = False, lead: int = 0) -> None:
    """One harness: ``fn`` (the primitive, over block values) inside a kernel over ``grid``."""
    def build(interpret: bool) -> Callable[..., Any]:
        return _pallas(fn, ins, grid, out_index, interpret, lead)

    args = [RandArg(o.shape, o.dtype, o.kind) for o in ins]
    lims = _limits(primitive, [o.dtype for o in ins] + [dtype], layout, accuracy, params or {})
    define(FAMILY, primitive, build(True), args, dtype=dtype, group=GROUP, catalog=CATALOG,
           params={"layout": layout, **(params or {})}, reference=_blockwise(ref, ins, grid, out_index, lead),
           tol=tol, compare=compare, limitations=lims,
           pallas=Kernel(build, ALL, mosaic_gpu=lambda: _mosaic_gpu(fn, ins, grid, out_index, lead)))


def _tolerance(primitive: str, dt: str) -> tuple[float, float] | None:
    """The measured accuracy table's bound (docs/accuracy.md) where it has one; half precision
    without one gets the catalog's usual band."""
    measured = ulps.tolerance(primitive, dt) if dt in ("float32", "bfloat16", "float16") else None
    if measured is None and dt in ("bfloat16", "float16"):
        return (5e-2, 5e-2)
    return measured


def elementwise(primitive: str, fn: Callable[..., Any], ref: Callable[..., Any], dtypes: Sequence[str],
                kinds: Sequence[str], *, layouts: Sequence[str] = ("tile", "lane"), params: dict[str, Any] | None = None,
                tol: Callable[[str], tuple[float, float] | None] | None = None, accuracy: bool = False,
                out_dtype: Callable[[str], str] | None = None) -> None:
    """``primitive`` at its first dtype in every layout, at the others in ``tile``. ``kinds``: one
    value domain per operand."""
    for k, dt in enumerate(dtypes):
        for name in (layouts if k == 0 else ("tile",)):
            lay = LAYOUTS[name]
            ins = [Operand(lay.shape, dt, lay.block, _tile, kind) for kind in kinds]
            t = tol(dt) if tol is not None else _tolerance(primitive, dt)
            prim(primitive, fn, ref, ins, lay.grid, dtype=dt, layout=name, params=params, tol=t, accuracy=accuracy)


# ---------------------------------------------------------------- elementwise unary

F = ("float32", "bfloat16", "float16")
F32 = ("float32",)
I = ("int32", "int8", "uint8")


def _acosh(x: Any) -> Any:
    return lax.acosh(x + 1.5)  # the domain x >= 1


UNARY: dict[str, tuple[Callable[..., Any], Callable[..., Any], tuple[str, ...], str]] = {
    # primitive: (lax function, float64 reference, dtypes (first: the main one), domain)
    "neg": (lax.neg, np.negative, F + ("int32",), "normal"),
    "abs": (lax.abs, np.abs, F + ("int32",), "normal"),
    "sign": (lax.sign, np.sign, F + ("int32",), "nonzero"),
    "floor": (lax.floor, np.floor, F, "normal"),
    "ceil": (lax.ceil, np.ceil, F, "normal"),
    "round": (lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), np.round, F, "normal"),
    "exp": (lax.exp, np.exp, F, "normal"),
    "exp2": (lax.exp2, np.exp2, F, "normal"),
    "log": (lax.log, np.log, F, "positive"),
    "log1p": (lax.log1p, np.log1p, F, "positive"),
    "expm1": (lax.expm1, np.expm1, F, "normal"),
    "sqrt": (lax.sqrt, np.sqrt, F, "positive"),
    "rsqrt": (lax.rsqrt, lambda x: 1 / np.sqrt(x), F, "positive"),
    "cbrt": (lax.cbrt, np.cbrt, F, "normal"),
    "sin": (lax.sin, np.sin, F, "normal"),
    "cos": (lax.cos, np.cos, F, "normal"),
    "tan": (lax.tan, np.tan, F, "unit"),
    "asin": (lax.asin, np.arcsin, F, "unit"),
    "acos": (lax.acos, np.arccos, F, "unit"),
    "atan": (lax.atan, np.arctan, F, "normal"),
    "sinh": (lax.sinh, np.sinh, F, "unit"),
    "cosh": (lax.cosh, np.cosh, F, "unit"),
    "tanh": (lax.tanh, np.tanh, F, "normal"),
    "asinh": (lax.asinh, np.arcsinh, F, "normal"),
    "acosh": (_acosh, lambda x: np.arccosh(x + 1.5), F, "positive"),
    "atanh": (lax.atanh, np.arctanh, F, "unit"),
    "logistic": (lax.logistic, sp.expit, F, "normal"),
    "erf": (lax.erf, sp.erf, F, "normal"),
    "erfc": (lax.erfc, sp.erfc, F, "normal"),
    "erf_inv": (lax.erf_inv, sp.erfinv, F, "unit"),
    "lgamma": (lax.lgamma, sp.gammaln, F, "positive"),
    "digamma": (lax.digamma, sp.digamma, F, "positive"),
    "is_finite": (lax.is_finite, np.isfinite, F, "normal"),
    "square": (lax.square, np.square, F + ("int32",), "normal"),
    "integer_pow": (lambda x: lax.integer_pow(x, 3), lambda x: x ** 3, F + ("int32",), "normal"),
    "not": (lax.bitwise_not, np.invert, ("int32", "int8", "uint8", "bool"), "bits"),
    "population_count": (lax.population_count, None, ("int32", "int8", "uint8"), "bits"),
    "clz": (lax.clz, None, ("int32", "int8", "uint8"), "bits"),
}
#: Where the tolerance is not the accuracy table's: composites whose primitive's bound is not the table's own.
UNARY_TOL = {"acosh": lambda dt: None if dt == "float32" else (5e-2, 5e-2),
             "integer_pow": lambda dt: (1e-6, 1e-6) if dt == "float32" else ((2e-2, 2e-2) if dt in F else None),
             # relative error blows up at their zeros, the absolute stays small (docs/accuracy.md: the special
             # family's bound); the accuracy table's ULP bound holds on 0.12 only (0.10.2: 2e-2 relative at x~1, 2)
             "lgamma": lambda dt: (1e-5, 1e-5) if dt == "float32" else (5e-2, 5e-2),
             "digamma": lambda dt: (1e-5, 2e-5) if dt == "float32" else (5e-2, 5e-2)}


def _popcount(x: np.ndarray) -> np.ndarray:
    bits = x.dtype.itemsize * 8
    u = x.astype(np.dtype(f"uint{bits}"))
    return np.array([bin(int(v)).count("1") for v in u.ravel()], dtype=x.dtype).reshape(x.shape)


def _clz(x: np.ndarray) -> np.ndarray:
    bits = x.dtype.itemsize * 8
    u = x.astype(np.dtype(f"uint{bits}"))
    return np.array([bits - int(v).bit_length() for v in u.ravel()], dtype=x.dtype).reshape(x.shape)


_REFS = {"population_count": _popcount, "clz": _clz}
#: One primitive per family is also run in the ``odd`` layout.
ODD = {"exp", "add", "lt", "and", "convert_element_type", "select_n"}

for name, (fn, ref, dtypes, kind) in UNARY.items():
    elementwise(name, fn, ref or _REFS[name], dtypes, (kind,),
                layouts=("tile", "lane", "odd") if name in ODD else ("tile", "lane"), tol=UNARY_TOL.get(name))


# ---------------------------------------------------------------- the accuracy= parameter

ACCURATE = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log1p": np.log1p, "expm1": np.expm1,
            "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "cbrt": np.cbrt, "sin": np.sin, "cos": np.cos,
            "tan": np.tan, "tanh": np.tanh, "logistic": sp.expit}
for name, ref in ACCURATE.items():
    fn = getattr(lax, name)
    kind = UNARY[name][3]
    for mode, accuracy in (("highest", lax.AccuracyMode.HIGHEST),
                           ("tolerance", lax.Tolerance(atol=1e-6, rtol=1e-6, ulps=4))):
        if mode == "tolerance" and name not in ("exp", "tanh", "log"):
            continue
        elementwise(name, lambda x, fn=fn, accuracy=accuracy: fn(x, accuracy=accuracy), ref, F32, (kind,),
                    layouts=("tile",), params={"accuracy": mode}, accuracy=True)


# ---------------------------------------------------------------- elementwise binary

def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if not np.issubdtype(a.dtype, np.integer):
        return a / b
    return np.trunc(a.astype(np.float64) / b.astype(np.float64)).astype(a.dtype)


def _rem(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if not np.issubdtype(a.dtype, np.integer):
        return np.fmod(a, b)
    return (a - _int_div(a, b) * b).astype(a.dtype)


def _shift_left(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    bits = a.dtype.itemsize * 8
    return np.where(b < bits, np.left_shift(a, np.minimum(b, bits - 1)), 0).astype(a.dtype)


def _shift_right_logical(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    bits = a.dtype.itemsize * 8
    u = a.view(np.dtype(f"uint{bits}"))
    return np.where(b < bits, np.right_shift(u, np.minimum(b, bits - 1).astype(u.dtype)), 0).astype(u.dtype).view(a.dtype)


def _shift_right_arithmetic(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    bits = a.dtype.itemsize * 8
    return np.right_shift(a, np.minimum(b, bits - 1)).astype(a.dtype)


BINARY: dict[str, tuple[Callable[..., Any], Callable[..., Any], tuple[str, ...], tuple[str, str]]] = {
    "add": (lax.add, np.add, F + I, ("normal", "normal")),
    "sub": (lax.sub, np.subtract, F + ("int32",), ("normal", "normal")),
    "mul": (lax.mul, np.multiply, F + ("int32", "int8"), ("normal", "normal")),
    "div": (lax.div, _int_div, F + ("int32",), ("normal", "nonzero")),
    "rem": (lax.rem, _rem, F + ("int32",), ("normal", "nonzero")),
    "pow": (lax.pow, np.power, F, ("positive", "normal")),
    "max": (lax.max, np.maximum, F + ("int32", "uint8"), ("normal", "normal")),
    "min": (lax.min, np.minimum, F + ("int32", "uint8"), ("normal", "normal")),
    "atan2": (lax.atan2, np.arctan2, F, ("normal", "normal")),
    "nextafter": (lax.nextafter, np.nextafter, ("float32",), ("normal", "normal")),
    "igamma": (lax.igamma, sp.gammainc, ("float32",), ("positive", "positive")),
    "and": (lax.bitwise_and, np.bitwise_and, ("int32", "int8", "uint8", "bool"), ("bits", "bits")),
    "or": (lax.bitwise_or, np.bitwise_or, ("int32", "int8", "uint8", "bool"), ("bits", "bits")),
    "xor": (lax.bitwise_xor, np.bitwise_xor, ("int32", "int8", "uint8", "bool"), ("bits", "bits")),
    "shift_left": (lax.shift_left, _shift_left, ("int32", "int8", "uint8"), ("bits", "small_int")),
    "shift_right_logical": (lax.shift_right_logical, _shift_right_logical, ("int32", "int8", "uint8"),
                            ("bits", "small_int")),
    "shift_right_arithmetic": (lax.shift_right_arithmetic, _shift_right_arithmetic, ("int32", "int8"),
                               ("bits", "small_int")),
}
BINARY_TOL = {"pow": lambda dt: (1e-5, 1e-5) if dt == "float32" else (5e-2, 5e-2),
              "igamma": lambda dt: (1e-5, 1e-6)}

for name, (fn, ref, dtypes, kinds) in BINARY.items():
    elementwise(name, fn, ref, dtypes, kinds, layouts=("tile", "lane", "odd") if name in ODD else ("tile", "lane"),
                tol=BINARY_TOL.get(name))


# ---------------------------------------------------------------- comparisons (a bool result)

COMPARE = {"eq": (lax.eq, np.equal), "ne": (lax.ne, np.not_equal), "lt": (lax.lt, np.less),
           "le": (lax.le, np.less_equal), "gt": (lax.gt, np.greater), "ge": (lax.ge, np.greater_equal)}
for name, (fn, ref) in COMPARE.items():
    # small integers: equal elements occur (eq, ne, le see both outcomes)
    elementwise(name, fn, ref, ("float32", "int32", "bfloat16") if name in ("lt", "eq") else ("float32", "int32"),
                ("normal", "normal"), layouts=("tile", "lane", "odd") if name in ODD else ("tile", "lane"))


# ---------------------------------------------------------------- select_n, clamp

def _select(c: Any, a: Any, b: Any) -> Any:
    return lax.select_n(c > 0, a, b)


def _clamp(x: Any) -> Any:
    return lax.clamp(jnp.asarray(-1, x.dtype), x, jnp.asarray(1, x.dtype))


for k, dt in enumerate(("float32", "int32", "bfloat16")):
    for name in (("tile", "lane", "odd") if k == 0 else ("tile",)):
        lay = LAYOUTS[name]
        ins = [Operand(lay.shape, "float32", lay.block, _tile), Operand(lay.shape, dt, lay.block, _tile),
               Operand(lay.shape, dt, lay.block, _tile)]
        prim("select_n", _select, lambda c, a, b: np.where(c > 0, b, a), ins, lay.grid, dtype=dt, layout=name)
    elementwise("clamp", _clamp, lambda x: np.clip(x, -1, 1), (dt,), ("normal",),
                layouts=("tile", "lane") if k == 0 else ("tile",))


# ---------------------------------------------------------------- conversions

CONVERT = [("float32", "bfloat16"), ("float32", "float16"), ("float32", "int32"), ("int32", "float32"),
           ("bfloat16", "float32"), ("float16", "float32"), ("int8", "int32"), ("int32", "int8"),
           ("uint8", "float32"), ("float32", "uint8"), ("bool", "int32"), ("float32", "bool")]


def _convert_ref(to: str) -> Callable[..., Any]:
    def ref(x: np.ndarray) -> np.ndarray:
        if to == "bool":
            return x != 0
        if to in ("int32", "int8", "uint8") and x.dtype.kind == "f":
            return np.trunc(x).astype(to)  # float to integer truncates (in range here)
        if to in ("bfloat16", "float16", "float32"):
            return x.astype(np.float64)
        return x.astype(to)
    return ref


for k, (frm, to) in enumerate(CONVERT):
    # float to uint8: non-negative values (a negative float to unsigned is implementation-defined)
    kind = "positive" if to == "uint8" else "normal"
    elementwise("convert_element_type", lambda x, to=to: lax.convert_element_type(x, to), _convert_ref(to), (frm,),
                (kind,), layouts=("tile", "lane", "odd") if k == 0 else ("tile",), params={"to": to},
                tol=lambda dt, to=to: (1e-2, 1e-2) if to in ("bfloat16", "float16") else None)

BITCAST = [("float32", "int32"), ("int32", "float32"), ("float32", "uint32"), ("bfloat16", "int16"),
           ("float16", "int16"), ("int8", "uint8")]
for frm, to in BITCAST:
    elementwise("bitcast_convert_type", lambda x, to=to: lax.bitcast_convert_type(x, to),
                lambda x, frm=frm, to=to: np.asarray(x).astype(np.dtype(jnp.dtype(frm))).view(np.dtype(jnp.dtype(to))),
                (frm,), ("bits" if frm not in F else "normal",), layouts=("tile",), params={"to": to})


# ---------------------------------------------------------------- reductions over a block axis

def _reduction(name: str, fn: Callable[..., Any], ref: Callable[..., Any], dtypes: Sequence[str], kind: str = "normal",
               tol: tuple[float, float] | None = None) -> None:
    """Each block of rows reduced along its lanes (axis 1): a (rows, 1) block per program, the
    grid over the rows only; and along its sublanes (axis 0) over (8, 128) blocks."""
    for k, dt in enumerate(dtypes):
        arrangements = (("tile", (16, 128), (8, 128), 1), ("lane", (16, 130), (8, 130), 1), ("sublanes", (16, 256), (8, 128), 0))
        for layout, shape, block, axis in (arrangements if k == 0 else arrangements[:1]):
            grid = (shape[0] // block[0], shape[1] // block[1])
            ins = [Operand(shape, dt, block, _tile, kind)]
            t = tol if dt == "float32" else ((5e-2, 5e-2) if dt in ("bfloat16", "float16") else None)
            prim(name, lambda x, fn=fn, axis=axis: fn(x, axis), lambda x, ref=ref, axis=axis: ref(x, axis), ins, grid,
                 dtype=dt, layout=layout, params={"axis": axis}, tol=t, lead=int(axis == 0),
                 out_index=_cols if axis == 0 else _tile)


_reduction("reduce_sum", lambda x, a: jnp.sum(x, axis=a, keepdims=True),
           lambda x, a: np.sum(x, axis=a, keepdims=True), ("float32", "bfloat16", "int32"), tol=(1e-5, 1e-5))
_reduction("reduce_max", lambda x, a: jnp.max(x, axis=a, keepdims=True),
           lambda x, a: np.max(x, axis=a, keepdims=True), ("float32", "bfloat16", "int32"))
_reduction("reduce_min", lambda x, a: jnp.min(x, axis=a, keepdims=True),
           lambda x, a: np.min(x, axis=a, keepdims=True), ("float32", "int32"))
_reduction("reduce_and", lambda x, a: jnp.all(x, axis=a, keepdims=True),
           lambda x, a: np.all(x, axis=a, keepdims=True), ("bool",))
_reduction("reduce_or", lambda x, a: jnp.any(x, axis=a, keepdims=True),
           lambda x, a: np.any(x, axis=a, keepdims=True), ("bool",))
_reduction("argmax", lambda x, a: jnp.argmax(x, axis=a, keepdims=True).astype(jnp.int32),
           lambda x, a: np.argmax(x, axis=a, keepdims=True).astype(np.int32), ("float32", "int32"))


# ---------------------------------------------------------------- iota, broadcast_in_dim, reshape, transpose

def _iota(dim: int) -> Callable[..., Any]:
    def fn(x: Any) -> Any:
        return x + lax.broadcasted_iota(x.dtype, x.shape, dim)
    return fn


for dt in ("int32", "float32"):
    for dim in (0, 1):
        for name in (("tile", "lane") if dt == "int32" else ("tile",)):
            lay = LAYOUTS[name]
            elementwise_ref = (lambda x, dim=dim: x + np.broadcast_to(
                np.arange(x.shape[dim]).reshape((-1, 1) if dim == 0 else (1, -1)), x.shape))
            prim("iota", _iota(dim), elementwise_ref, [Operand(lay.shape, dt, lay.block, _tile)], lay.grid, dtype=dt,
                 layout=name, params={"dimension": dim})


def _broadcast(axis: int) -> Callable[..., Any]:
    def fn(x: Any) -> Any:
        shape = (x.shape[0], 128) if axis == 1 else (8, x.shape[1])
        return lax.broadcast_in_dim(x, shape, (0, 1))
    return fn


for dt in ("float32", "bfloat16", "int32"):
    # a (8, 1) column broadcast along the lanes; a (1, 128) row along the sublanes
    prim("broadcast_in_dim", _broadcast(1), lambda x: np.broadcast_to(x, (x.shape[0], 128)),
         [Operand((16, 1), dt, (8, 1), _rows)], (2, 2), dtype=dt, layout="tile", params={"from": "column"})
    if dt == "float32":
        prim("broadcast_in_dim", _broadcast(0), lambda x: np.broadcast_to(x, (8, x.shape[1])),
             [Operand((1, 256), dt, (1, 128), _cols)], (2, 2), dtype=dt, layout="tile", params={"from": "row"})

for dt in ("float32", "bfloat16", "int32"):
    for to in ((4, 256), (16, 64), (1024,)):
        if dt != "float32" and to != (4, 256):
            continue
        # each program's reshaped block is a whole (squeezed) slab of the output, legal for every
        # backend; a 1-D block is the program's stretch of a 1-D output (a squeezed second-minor
        # dimension of 1 is not the array's: Mosaic TPU's block rule refuses it)
        flat = len(to) == 1
        prim("reshape", lambda x, to=to: x.reshape(to), lambda x, to=to: x.reshape(to),
             [Operand((16, 256), dt, (8, 128), _tile)], (2, 2), dtype=dt, layout="tile",
             out_index=(lambda i, j: (2 * i + j,)) if flat else (lambda i, j: (0, 0)), lead=0 if flat else 2,
             params={"to": "x".join(map(str, to))})

for dt in ("float32", "bfloat16", "int32"):
    for layout, shape, block in (("tile", (16, 256), (8, 128)), ("square", (256, 256), (128, 128)),
                                 ("lane", (16, 130), (8, 130))):
        if dt != "float32" and layout != "square":
            continue
        grid = (shape[0] // block[0], shape[1] // block[1])
        # square: the grid transposed too (block (i, j) lands at (j, i)); else each program's block a slab
        square = layout == "square"
        prim("transpose", lambda x: x.T, lambda x: x.T, [Operand(shape, dt, block, _tile)], grid, dtype=dt,
             layout=layout, out_index=_swapped if square else (lambda i, j: (0, 0)), lead=0 if square else 2)


# ---------------------------------------------------------------- dot_general

def _dot(trans_b: bool, acc: str | None) -> Callable[..., Any]:
    dims = (((1,), (1,)), ((), ())) if trans_b else (((1,), (0,)), ((), ()))

    def fn(a: Any, b: Any) -> Any:
        return lax.dot_general(a, b, dims, preferred_element_type=acc)
    return fn


def _dot_ref(trans_b: bool, out: str) -> Callable[..., Any]:
    def ref(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        if x.dtype.kind in "iu":  # accumulate exactly, then wrap to the result's width
            return (x.astype(np.int64) @ (y.T if trans_b else y).astype(np.int64)).astype(out)
        return x @ (y.T if trans_b else y)
    return ref


DOT = [("float32", None, "float32"), ("bfloat16", "float32", "float32"), ("bfloat16", None, "bfloat16"),
       ("float16", "float32", "float32"), ("int8", "int32", "int32"), ("int32", None, "int32")]
for dt, acc, out in DOT:
    for layout, (m, k, n), (bm, bk, bn), trans_b in (("tile", (16, 128, 256), (8, 128, 128), False),
                                                     ("tile", (16, 128, 256), (8, 128, 128), True),
                                                     ("small", (16, 32, 32), (8, 32, 16), False)):
        if (dt, acc) != ("float32", None) and (trans_b or layout != "tile"):
            continue
        a = Operand((m, k), dt, (bm, bk), _rows, "small_int" if dt in I else "normal")
        b = (Operand((n, k), dt, (bn, bk), lambda i, j: (j, 0), "small_int" if dt in I else "normal") if trans_b
             else Operand((k, n), dt, (bk, bn), _cols, "small_int" if dt in I else "normal"))
        ref = _dot_ref(trans_b, out)
        tol = {"float32": (2e-5, 2e-5), "bfloat16": (2e-2, 2e-2), "float16": (2e-3, 2e-3)}.get(dt)
        if out == "bfloat16":
            tol = (2e-2, 2e-2)
        prim("dot_general", _dot(trans_b, acc), ref, [a, b], (m // bm, n // bn), dtype=dt, layout=layout,
             params={"acc": acc or dt, **({"rhs": "transposed"} if trans_b else {})}, tol=tol)
