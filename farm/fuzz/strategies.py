"""Hypothesis strategies, one per primitive family, that draw valid cases (``farm.catalog.cases.Case``).

Shapes reach what the catalog's hand-chosen 20x20 and 3x4 never do: zero- and one-sized
axes, sizes around vector widths (7, 8, 15, 16, 17, 31, 33, 127, 129...) and long axes,
with the element count capped (``MAX_ELEMENTS``) so one case stays well under a second.
Params cover axes, broadcast dimensions, padding (negative and interior), strides,
dimension numbers in any order, precision and preferred element types. Values: see
``farm.catalog.cases.VALUE_KINDS``. Hypothesis shrinks toward the first choice of each
``sampled_from`` and toward 0, so a failure shrinks to small shapes and plain values.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from hypothesis import strategies as st

from farm.catalog.cases import VALUE_KINDS, Case
from farm.catalog.dtypes import FLOAT, INTEGER

#: Most elements one operand may have.
MAX_ELEMENTS = 1 << 15
#: Sizes near vector widths and block sizes, where a lowering's tail handling lives.
EDGE_SIZES = (0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 257, 1023, 1025, 4097)

UNARY_FLOAT = ("sin", "cos", "tan", "exp", "exp2", "expm1", "log", "log1p", "tanh", "sqrt", "rsqrt", "cbrt",
               "abs", "neg", "floor", "ceil", "sign", "atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh",
               "atanh", "erf", "erfc", "logistic", "is_finite", "square", "round")
UNARY_INT = ("abs", "neg", "sign", "square", "not", "population_count", "clz")
BINARY_FLOAT = ("add", "sub", "mul", "div", "max", "min", "pow", "atan2", "rem", "nextafter")
BINARY_INT = ("add", "sub", "mul", "max", "min", "and", "or", "xor")
REDUCE_FLOAT = ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "argmax", "argmin")
REDUCE_INT = ("reduce_sum", "reduce_max", "reduce_min", "argmax", "argmin")
SHAPE_OPS = ("pad", "slice", "concatenate", "rev", "transpose")
DOT_OPS = ("dot_general", "conv_general_dilated")
DEFAULT_DTYPES = ("float32", "bfloat16", "float16", "int32")

#: family -> (primitives it draws for float dtypes, for integer dtypes)
FAMILIES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "elementwise_unary": (UNARY_FLOAT, UNARY_INT),
    "elementwise_binary": (BINARY_FLOAT, BINARY_INT),
    "reduction": (REDUCE_FLOAT, REDUCE_INT),
    "shape": (SHAPE_OPS, SHAPE_OPS),
    "dot_conv": (DOT_OPS, ("dot_general",)),
}


def primitives_of(family: str) -> tuple[str, ...]:
    fl, it = FAMILIES[family]
    return tuple(dict.fromkeys(fl + it))


def dims() -> st.SearchStrategy[int]:
    """One axis length: an edge size (shrinks to 0), any small length, or a long one."""
    return st.one_of(st.sampled_from(EDGE_SIZES), st.integers(0, 40), st.integers(41, 5000))


def fit(shape: Sequence[int], cap: int = MAX_ELEMENTS) -> tuple[int, ...]:
    """``shape`` with its longest axes halved until it has at most ``cap`` elements."""
    s = list(shape)
    while math.prod(s) > cap:
        i = max(range(len(s)), key=lambda k: s[k])
        s[i] //= 2
    return tuple(s)


@st.composite
def shapes(draw: Callable, min_rank: int = 0, max_rank: int = 4) -> tuple[int, ...]:
    rank = draw(st.integers(min_rank, max_rank))
    return fit([draw(dims()) for _ in range(rank)])


#: Value kinds for sums and products (dot, conv, reduce_sum/prod): no infinities or huge
#: values, whose result depends on the order of accumulation (max + max - max), which the
#: float64 reference cannot share with any device.
ACCUMULATING_KINDS = tuple(k for k in VALUE_KINDS if k not in ("special", "huge"))
ACCUMULATING = ("reduce_sum", "reduce_prod", "dot_general", "conv_general_dilated")


@st.composite
def values(draw: Callable, accumulating: bool = False) -> tuple[str, float]:
    kind = draw(st.sampled_from(ACCUMULATING_KINDS if accumulating else VALUE_KINDS))
    return kind, (0.0 if kind == "normal" else draw(st.sampled_from((0.1, 0.5, 1.0))))


def _case(draw: Callable, family: str, prim: str, dtype: str, shapes_: Sequence[Sequence[int]],
          **params: object) -> Case:
    kind, density = draw(values(prim in ACCUMULATING))
    return Case(family, prim, dtype, tuple(tuple(s) for s in shapes_), tuple(sorted(params.items())), kind, density,
                draw(st.integers(0, 3)))


@st.composite
def elementwise_unary(draw: Callable, dtype: str, prim: str) -> Case:
    return _case(draw, "elementwise_unary", prim, dtype, [draw(shapes())], op=prim)


@st.composite
def elementwise_binary(draw: Callable, dtype: str, prim: str) -> Case:
    x = draw(shapes())
    bcast = None
    y = x
    if x and draw(st.booleans()):  # y broadcast into x: some of x's axes, each full or 1
        keep = sorted(draw(st.sets(st.integers(0, len(x) - 1), max_size=len(x))))
        bcast = tuple(keep)
        y = tuple(x[i] if draw(st.booleans()) else 1 for i in keep)
    return _case(draw, "elementwise_binary", prim, dtype, [x, y], op=prim, bcast=bcast)


@st.composite
def reduction(draw: Callable, dtype: str, prim: str) -> Case:
    if prim in ("argmax", "argmin"):
        x = draw(shapes(min_rank=1))
        axis = draw(st.integers(0, len(x) - 1))
        x = x[:axis] + (max(1, x[axis]),) + x[axis + 1:]  # an arg-reduction over no elements is invalid
        return _case(draw, "reduction", prim, dtype, [fit(x)], op=prim, axes=(axis,))
    x = draw(shapes())
    # mostly over at least one axis (reducing over none is a copy)
    axes = tuple(sorted(draw(st.sets(st.integers(0, len(x) - 1), min_size=1, max_size=len(x))))) if x else ()
    return _case(draw, "reduction", prim, dtype, [x], op=prim, axes=axes)


@st.composite
def shape_op(draw: Callable, dtype: str, prim: str) -> Case:
    x = draw(shapes(min_rank=1 if prim in ("concatenate", "slice") else 0))
    n = len(x)
    if prim == "pad":
        config = []
        for d in x:
            lo, hi, inner = draw(st.integers(-3, 4)), draw(st.integers(-3, 4)), draw(st.integers(0, 2))
            if d + max(d - 1, 0) * inner + lo + hi < 0:
                lo = hi = 0
            config.append((lo, hi, inner))
        x = fit(x, MAX_ELEMENTS // 8)  # interior padding multiplies the size
        config = [c if d + max(d - 1, 0) * c[2] + c[0] + c[1] >= 0 else (0, 0, c[2]) for d, c in zip(x, config)]
        return _case(draw, "shape", prim, dtype, [x], config=tuple(config))
    if prim == "slice":
        start, limit, strides = [], [], []
        for d in x:
            a = draw(st.integers(0, d))
            start.append(a)
            limit.append(draw(st.integers(a, d)))
            strides.append(draw(st.integers(1, 4)))
        return _case(draw, "shape", prim, dtype, [x], start=tuple(start), limit=tuple(limit), strides=tuple(strides))
    if prim == "concatenate":
        dim = draw(st.integers(0, n - 1))
        rest = math.prod(x[:dim] + x[dim + 1:])
        y = x[:dim] + (min(draw(dims()), MAX_ELEMENTS // max(rest, 1)),) + x[dim + 1:]
        return _case(draw, "shape", prim, dtype, [x, y], dimension=dim)
    if prim == "rev":
        return _case(draw, "shape", prim, dtype, [x], dimensions=tuple(sorted(draw(st.sets(st.integers(0, max(n - 1, 0)),
                                                                                            max_size=n)))) if n else ())
    return _case(draw, "shape", prim, dtype, [x], permutation=tuple(draw(st.permutations(range(n)))))


@st.composite
def dot_general(draw: Callable, dtype: str) -> Case:
    small = st.one_of(st.sampled_from((0, 1, 2, 3, 4, 7, 8, 16, 17, 33)), st.integers(0, 64), st.integers(65, 1025))
    batch = [draw(small) for _ in range(draw(st.integers(0, 2)))]
    contract = [draw(small) for _ in range(draw(st.integers(0, 2)))]
    lfree = [draw(small) for _ in range(draw(st.integers(0, 2)))]
    rfree = [draw(small) for _ in range(draw(st.integers(0, 2)))]
    lhs_roles = [("b", i) for i in range(len(batch))] + [("c", i) for i in range(len(contract))] + \
        [("f", i) for i in range(len(lfree))]
    rhs_roles = [("b", i) for i in range(len(batch))] + [("c", i) for i in range(len(contract))] + \
        [("f", i) for i in range(len(rfree))]
    lhs_roles = draw(st.permutations(lhs_roles))
    rhs_roles = draw(st.permutations(rhs_roles))
    size = {"b": batch, "c": contract}
    lhs = fit([(size.get(r) or lfree)[i] for r, i in lhs_roles])
    rhs = [(size.get(r) or rfree)[i] for r, i in rhs_roles]
    # a shared axis halved on one side by ``fit`` must be halved on the other too
    shared = {(r, i): lhs[k] for k, (r, i) in enumerate(lhs_roles) if r != "f"}
    rhs = fit([shared.get((r, i), rhs[k]) for k, (r, i) in enumerate(rhs_roles)])
    shared = {(r, i): rhs[k] for k, (r, i) in enumerate(rhs_roles) if r != "f"}
    lhs = tuple(shared.get((r, i), lhs[k]) for k, (r, i) in enumerate(lhs_roles))

    def pos(roles, role):  # noqa: ANN001, ANN202
        return tuple(roles.index((role, i)) for i in range(len(size[role])))

    dims_ = ((pos(lhs_roles, "c"), pos(rhs_roles, "c")), (pos(lhs_roles, "b"), pos(rhs_roles, "b")))
    precision = draw(st.sampled_from((None, "DEFAULT", "HIGH", "HIGHEST")))
    preferred = draw(st.sampled_from((None, "float32"))) if dtype in ("bfloat16", "float16") else None
    return _case(draw, "dot_conv", "dot_general", dtype, [lhs, rhs], dims=dims_, precision=precision,
                 preferred=preferred)


@st.composite
def conv(draw: Callable, dtype: str) -> Case:
    """2-D NCHW/OIHW convolutions: strides, explicit padding, dilations and feature groups."""
    groups = draw(st.sampled_from((1, 1, 2, 3)))
    n, cin, cout = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    k = [draw(st.integers(1, 4)) for _ in range(2)]
    rd = [draw(st.integers(1, 3)) for _ in range(2)]
    ld = [draw(st.integers(1, 2)) for _ in range(2)]
    strides = [draw(st.integers(1, 3)) for _ in range(2)]
    padding, spatial = [], []
    for i in range(2):
        lo, hi, size = draw(st.integers(0, 3)), draw(st.integers(0, 3)), draw(st.integers(1, 40))
        reach, need = (size - 1) * ld[i] + 1 + lo + hi, (k[i] - 1) * rd[i] + 1
        padding.append((lo, hi + max(0, need - reach)))  # the window must fit at least once
        spatial.append(size)
    return _case(draw, "dot_conv", "conv_general_dilated", dtype,
                 [(n, cin * groups, *spatial), (cout * groups, cin, *k)], strides=tuple(strides),
                 padding=tuple(padding), lhs_dilation=tuple(ld), rhs_dilation=tuple(rd), groups=groups)


def _for(family: str, dtype: str, prim: str) -> st.SearchStrategy[Case]:
    if family == "elementwise_unary":
        return elementwise_unary(dtype, prim)
    if family == "elementwise_binary":
        return elementwise_binary(dtype, prim)
    if family == "reduction":
        return reduction(dtype, prim)
    if family == "shape":
        return shape_op(dtype, prim)
    return dot_general(dtype) if prim == "dot_general" else conv(dtype)


def cases(families: Sequence[str], dtypes: Sequence[str], primitives: Sequence[str] = ()) -> st.SearchStrategy[Case]:
    """Cases of the given families and dtypes (and primitives, if any): a family, then a
    dtype, then a primitive, each drawn uniformly (so 31 unary ops do not crowd out a reduction)."""
    allowed = frozenset(primitives) or None
    by_family = []
    for fam in families:
        fl, it = FAMILIES[fam]
        by_dtype = []
        for dt in dtypes:
            pool = it if dt in INTEGER else fl if dt in FLOAT else ()
            prims = [_for(fam, dt, p) for p in pool if allowed is None or p in allowed]
            if prims:
                by_dtype.append(st.one_of(*prims))
        if by_dtype:
            by_family.append(st.one_of(*by_dtype))
    return st.one_of(*by_family) if by_family else st.nothing()
