"""variants: the symbolic variant of a harness, the specs it is exported with and the sizes
it is called at.

Three kinds, most symbolic first:

- ``declared``: a harness written with symbolic dimensions (``Harness.poly``): its own specs,
  constraints, points and violating points;
- ``dims``: JAX's ``vmap_*`` construction (a new leading ``b`` over every dynamic argument)
  with every other dimension symbolic as well, one variable per distinct size
  (``"b, 3, 4"`` → ``"b, d3, d4"``: equal sizes stay equal, so a contraction still matches),
  where the primitive's shape rule allows it. A comparison the rule cannot decide
  (``'d6' < '3'`` for top_k with k = 3) becomes the constraint that holds at the harness's
  own sizes (``d6 >= 3``), and a size that breaks it is a violating point;
- ``leading``: the ``vmap_*`` construction alone, where the cpu export refuses symbolic
  inner dimensions (a reshape to fixed sizes); ``facts.widen`` says why.

Sizes of 1 stay static: they broadcast, and a symbolic 1 would change what is computed.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from farm.catalog import Harness, Point
from farm.catalog.args import RandArg, StaticArg
from farm.catalog.specs import holds, label, shape

#: The leading dimension's sizes: 1, a prime, and a size that is not a power of two.
SIZES = (1, 3, 7)
#: Primitives (and the api catalog's functions built on one) whose variant maps only their first
#: argument: a convolution's batched kernel makes its feature-group count symbolic, which
#: jax.export refuses ("Convolutions with non-static ... feature_group_count"); a batch of inputs
#: under one kernel is what is exported. (jnp.convolve/correlate, polymul, scipy.signal's
#: convolve, correlate, convolve2d and correlate2d take the kernel second.)
FIRST_ONLY = frozenset({"conv_general_dilated", "convolve", "correlate", "polymul", "convolve2d", "correlate2d"})
#: How many undecidable comparisons ``widen`` turns into constraints before it gives up.
MAX_CONSTRAINTS = 3
_COMPARISON = re.compile(r"comparison '(.+?)' (>=|<=|>|<|==|!=) '(.+?)' is inconclusive")
@dataclass(frozen=True)
class Variant:
    """A harness with symbolic dimensions over its dynamic arguments."""

    harness: Harness
    fun: Callable[..., Any]  # over the dynamic arguments
    specs: tuple[str, ...]  # per dynamic argument, e.g. "b, d3, d4" or "3, 4"
    dtypes: tuple[str, ...]
    static: dict[int, Any]  # argument index -> value
    dyn: tuple[int, ...]  # the dynamic arguments' indices, in order
    mapped: tuple[bool, ...] = ()  # per dynamic argument: over the leading b (vmap kinds)
    kind: str = "leading"  # leading | dims | declared
    constraints: tuple[str, ...] = ()
    points: tuple[Point, ...] = tuple((("b", n),) for n in SIZES)
    violations: tuple[Point, ...] = ()
    #: per dynamic argument (vmap kinds): the shape of one row, as a spec over the dims
    rows_spec: tuple[str, ...] = ()
    facts: dict[str, Any] = field(default_factory=dict)
    one: Callable[..., Any] | None = None  # the function of one row, before the map (what a reproducer writes out)
    #: rows drawn so far, by point: every platform's call and verdict at a size use the same
    #: arguments, drawn once (read-only: nothing may change them under another's feet)
    drawn: dict[Any, list[np.ndarray]] = field(default_factory=dict, init=False, compare=False, repr=False)
    #: what the judge made of it so far (``farm.judge.symbolic``): the jaxpr at each point, and
    #: the reference's verdict on outputs that several platforms' calls share (the same arrays)
    judged: dict[Any, Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    def rows(self, point: Point | int) -> list[np.ndarray]:
        """The dynamic arguments at ``point`` (drawn once per point, then the same arrays)."""
        got = self.drawn.get(point)
        if got is None:
            got = self.drawn[point] = self._rows(point)
            for a in got:
                a.setflags(write=False)
        return got

    def _rows(self, point: Point | int) -> list[np.ndarray]:
        """The dynamic arguments at ``point``. A vmap kind stacks ``b`` independent draws (the
        first draw where an argument is not mapped), each drawn at the point's inner sizes."""
        env = dict(((("b", point),) if isinstance(point, int) else point))
        h = self.harness
        if self.kind == "declared":
            assert h.poly is not None
            if h.poly.maker is not None:
                return [np.asarray(a) for a in h.poly.maker(env, _rng(h, 0))]
            shapes = {i: shape(s, env) for i, s in zip(self.dyn, self.specs)}
            return [np.asarray(a) for i, a in enumerate(_draw(h, 0, shapes)) if i not in self.static]
        shapes = {i: shape(s, env) for i, s in zip(self.dyn, self.rows_spec)} if self.rows_spec else None
        draws = [_draw(h, i, shapes) for i in range(env["b"])]
        dyn = self.dyn
        mapped = self.mapped or (True,) * len(dyn)
        return [np.stack([np.asarray(d[i]) for d in draws]) if m else np.asarray(draws[0][i])
                for i, m in zip(dyn, mapped)]



def _rng(h: Harness, i: int) -> np.random.Generator:
    return np.random.default_rng([int(h.fingerprint[:16], 16) ^ h.seed, i])


def _draw(h: Harness, i: int, shapes: dict[int, tuple[int, ...]] | None = None) -> list[Any]:
    """The harness's arguments, drawn with the i-th generator of its own seed (a random
    argument at ``shapes[index]`` where given)."""
    if h.arg_maker is not None:
        return h.arg_maker(int(h.fingerprint[:8], 16) + i)
    rng = _rng(h, i)
    out = []
    for k, a in enumerate(h.args):
        if isinstance(a, StaticArg):
            out.append(a.value)
        else:
            out.append((replace(a, shape=shapes[k]) if shapes and k in shapes else a).make(rng))
    return out


def variant(h: Harness) -> Variant | str:
    """The leading (or declared) symbolic variant of ``h``, or the reason it has none."""
    import jax

    if h.mesh:
        return "a sharded harness: its mesh fixes the shapes"
    if h.effects is not None:
        return ("a harness with side effects: vmap changes what its callbacks receive (pure_callback needs a "
                "vmap_method), so a leading variant is another program; the effects_export stage checks its exports")
    if h.devices > 1:
        return f"a {h.devices}-device harness: called on one device, its export would need device-count polymorphism"
    if dict(h.key.params).get("edge") == "all":
        return ("every operand's edge values in combination: their values are the point; the variants with one "
                "operand at its edges carry the symbolic check (at XLA's optimization level 0, which the checked "
                "calls use, an iterative function's loop over every pair outlasts the time limit: gammainc)")
    args = _draw(h, 0)
    static = {i: args[i] for i in h.static_argnums()}
    dyn = [i for i in range(len(args)) if i not in static]
    if not dyn:
        return "no dynamic argument to map over"
    arrays = [np.asarray(args[i]) for i in dyn]
    if any(a.dtype == object or not hasattr(args[i], "dtype") for i, a in zip(dyn, arrays)):
        return "an argument that is not an array (a PRNG key, a pytree)"

    def one(*row: Any) -> Any:
        full = list(args)
        for i, v in zip(dyn, row):
            full[i] = v
        return h.fun(*full)

    dtypes = tuple(str(a.dtype) for a in arrays)
    if h.poly is not None:
        p = h.poly
        if len(p.specs) != len(dyn):
            return f"its Poly has {len(p.specs)} specs for {len(dyn)} dynamic arguments"
        return Variant(h, one, p.specs, dtypes, static, tuple(dyn), kind="declared", constraints=p.constraints,
                       points=p.points, violations=p.violations, one=one)
    mapped = tuple(k == 0 or h.primitive not in FIRST_ONLY for k in range(len(arrays)))
    specs = tuple(", ".join(["b"] * m + [str(d) for d in a.shape]) for a, m in zip(arrays, mapped))
    fun = jax.vmap(one, in_axes=tuple(0 if m else None for m in mapped))
    return Variant(h, fun, specs, dtypes, static, tuple(dyn), mapped, one=one)


def widen(v: Variant, export: Callable[[Variant, bool], Exception | None]) -> Variant:
    """``v`` with every inner dimension of size > 1 symbolic, where ``export(candidate,
    everywhere)`` (None when it succeeds; ``everywhere``: for every platform, else the cpu
    alone) accepts it: constraints are added while some platform's comparison is
    undecidable; a platform that refuses otherwise keeps the variant when the cpu accepts it
    (that refusal is the finding). ``v`` itself, with the reason in ``facts["widen"]``,
    where the cpu refuses."""
    if v.kind != "leading":
        return v
    sizes = sorted({d for s in v.specs for d in _inner(s) if d > 1})
    if not sizes:
        return replace(v, facts={**v.facts, "widen": "no inner dimension larger than 1"})
    env = {f"d{n}": n for n in sizes}
    rows_spec = tuple(", ".join(f"d{d}" if d > 1 else str(d) for d in _inner(s)) for s in v.specs)
    specs = tuple(", ".join((["b"] if m else []) + ([r] if r else [])) for r, m in
                  zip(rows_spec, v.mapped or (True,) * len(v.specs)))
    constraints: tuple[str, ...] = ()
    regen = v.harness.arg_maker is None and all(isinstance(a, (RandArg, StaticArg)) for a in v.harness.args)
    while True:
        cand = replace(v, kind="dims", specs=specs, rows_spec=rows_spec, constraints=constraints)
        err = export(cand, True)
        c = None if err is None else _constraint(str(err), env)
        if c is not None and c not in constraints and len(constraints) < MAX_CONSTRAINTS:
            constraints += (c,)
            continue
        if err is not None:
            err = export(cand, False)
        if err is not None:
            why = f"{type(err).__name__}: {(str(err).splitlines() or [''])[0][:300]}"  # some errors have no message
            return replace(v, facts={**v.facts, "widen": why})
        return replace(cand, points=_points(env, constraints, regen),
                       violations=_violations(env, constraints) if regen else ())


def _inner(spec: str) -> list[int]:
    return [int(d) for d in spec.split(",") if d.strip() and d.strip() != "b"]


def _constraint(error: str, env: dict[str, int]) -> str | None:
    """The constraint that decides an inconclusive comparison the way it falls at the
    harness's own sizes (``'d6' < '3'`` is false at d6 = 6: ``d6 >= 3``)."""
    m = _COMPARISON.search(error)
    if m is None:
        return None
    lhs, op, rhs = m.groups()
    try:
        at_own = holds(f"({lhs}) {op} ({rhs})", env)
    except Exception:
        return None
    negate = {">=": "<", "<=": ">", ">": "<=", "<": ">=", "==": "!=", "!=": "=="}
    op = op if at_own else negate[op]
    if op == "!=":
        return None  # JAX's constraints are >=, <= and ==
    if op in (">", "<"):  # strict: one step inside
        return f"{lhs} >= {rhs} + 1" if op == ">" else f"{lhs} <= {rhs} - 1"
    return f"{lhs} {op} {rhs}"


def _points(env: dict[str, int], constraints: tuple[str, ...], regen: bool) -> tuple[Point, ...]:
    """b = 1 and 3 at the harness's own inner sizes; b = 7 with every inner size one larger
    where the arguments can be drawn at other sizes (``regen``: a custom maker draws one
    shape) and the constraints allow. A size where the computation itself is not defined (a
    reshape to fixed sizes) is the judge's to recognise."""
    own = tuple(sorted(env.items()))
    pts = [(("b", 1), *own), (("b", 3), *own)]
    bumped = {k: n + 1 for k, n in env.items()}
    if regen and all(holds(c, bumped) for c in constraints):
        pts.append((("b", 7), *sorted(bumped.items())))
    else:
        pts.append((("b", 7), *own))
    return tuple(pts)


def _violations(env: dict[str, int], constraints: tuple[str, ...]) -> tuple[Point, ...]:
    """Per constraint, the harness's own sizes with one variable moved until it breaks (a
    dimension variable is at least 1); only where the arguments can be drawn at other sizes."""
    out = []
    for c in constraints:
        for k, n in env.items():
            if k not in c:
                continue
            for m in [*range(n - 1, 0, -1), *range(n + 1, 2 * n + 2)]:
                trial = {**env, k: m}
                if not holds(c, trial) and all(holds(o, trial) for o in constraints if o != c):
                    out.append((("b", 2), *sorted(trial.items())))
                    break
            else:
                continue
            break
    return tuple(out)

