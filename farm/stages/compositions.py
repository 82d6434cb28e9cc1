"""The ``composition`` stage: a harness's deserialized export called as users call it, inside
larger programs: ``jit`` with ``NamedSharding`` in and out shardings on every device of the host,
``vmap``, ``grad`` (the artifact serialized with its vjp), the bodies of ``scan``, ``cond`` and
a ``while`` loop, another export that calls it (serialized and called in turn: a nested export),
and ``jit`` with every argument donated. One record per composition (its platform is the
composition's name), each carrying what it returned and what it is to be held against; the
verdict is ``farm.judge.compositions``'s.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from farm.results import Record
from farm.stages.compile import checked_jit, side_by_side_safe
from farm.stages.record import Timer, failure

#: Every composition, in the order they run.
COMPOSITIONS = ("jit_sharded", "vmap", "grad", "scan", "cond", "while", "nested", "donated")


def leaves(tree: Any) -> list[np.ndarray]:
    import jax

    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def _shardings(h: Any, exported: Any, dyn: list[Any], plain: Any) -> tuple[Any, Any]:
    """(in, out) ``NamedSharding``s: a sharded harness's are the artifact's own on its mesh
    (``Exported.in_shardings_jax``: what a user calling it does); any other harness's are over
    every device, each leading dimension split where it divides evenly, else replicated."""
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    devices = jax.devices()
    if h.mesh:
        sizes, names = tuple(n for _, n in h.mesh), tuple(a for a, _ in h.mesh)
        kind = jax.sharding.AxisType.Explicit if h.axis_types == "explicit" else jax.sharding.AxisType.Auto
        mesh = jax.make_mesh(sizes, names, axis_types=(kind,) * len(names), devices=devices[:h.devices])  # as exported
        try:
            outs = jax.tree.unflatten(exported.out_tree, exported.out_shardings_jax(mesh))
        except ValueError:  # an output resharded onto another mesh (4x2 on a 2x4 one): the artifact's own, unnamed
            outs = None
        return tuple(exported.in_shardings_jax(mesh)), outs
    mesh = Mesh(np.array(devices), ("x",))

    def split(x: Any) -> Any:
        shape = np.shape(x)
        return NamedSharding(mesh, P("x") if shape and shape[0] % len(devices) == 0 else P())

    return tuple(split(x) for x in dyn), (None if plain is None else jax.tree.map(split, plain))


def _specs(exported: Any, side: str, mesh: Any) -> str:
    """Where an artifact says its inputs or outputs live on ``mesh`` (their ``PartitionSpec``s;
    ``in_shardings_hlo`` is None per value under Shardy, so the specs JAX reads back are compared)."""
    try:
        return str([getattr(s, "spec", s) for s in getattr(exported, f"{side}_shardings_jax")(mesh)])
    except ValueError as e:  # an output resharded onto another mesh: what JAX says about it
        return f"ValueError: {e}"


def _zeros(plain: Any) -> Any:
    """Zeros shaped as the call's outputs, as host arrays: ``jnp.zeros_like`` on each output ran
    an op-by-op program per output (a compile each, as many as the compositions themselves);
    a typed key has no host form, so it stays jax's."""
    import jax
    import jax.numpy as jnp

    def zero(x: Any) -> Any:
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.extended):
            return jnp.zeros_like(x)
        return np.zeros(x.shape, x.dtype)

    return jax.tree.map(zero, plain)


def _together_safe(exported: Any) -> bool:
    """Whether copies of the artifact's module may run side by side in one program
    (``compile.side_by_side_safe``: jaxlib 0.10.2's split LAPACK batches deadlock there)."""
    try:
        return side_by_side_safe(exported.mlir_module())
    except Exception:  # noqa: BLE001  no text to read: each on its own
        return False


def _floating(xs: list[Any]) -> bool:
    return bool(xs) and all(np.asarray(x).dtype.kind == "f" for x in xs)


def run(name: str, exported: Any, dyn: list[Any], plain: Any, h: Any, jitted: Any, with_vjp: Callable[[], Any]
        ) -> Record:
    """One composition's record: ``ok`` with ``handle`` (what it returned, what it is held
    against, as flat lists: per step for ``scan`` and per batch element for ``vmap``),
    ``skipped`` where it does not apply, ``error`` where it raised (JAX refusing it included).
    A sharded harness's artifact runs on its mesh only: every composition of it is inside a
    ``jit`` with its argument shardings."""
    import warnings

    import jax
    import jax.numpy as jnp
    from jax import export, lax
    from jax.sharding import NamedSharding, PartitionSpec as P

    timer = Timer()
    want = leaves(plain)
    ins, outs = _shardings(h, exported, dyn, plain)
    mesh = ins[0].mesh if ins else None

    def jit(fn: Callable[..., Any], lead: int = 0, **kw: Any) -> Callable[..., Any]:
        """``fn`` jitted; a sharded harness's with its argument shardings (``lead`` replicated scalars first)."""
        if not h.mesh:
            return jax.jit(fn, **kw)
        return jax.jit(fn, in_shardings=(NamedSharding(mesh, P()),) * lead + tuple(ins), **kw)

    try:
        with timer(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Some donated buffers were not usable": said by the record, not stderr
            if name == "jit_sharded":
                got = leaves(checked_jit(jax.jit(exported.call, in_shardings=ins, out_shardings=outs), *dyn))
            elif name == "vmap":
                if not dyn:
                    return Record("composition", name, "skipped", error="no argument to batch",
                                  facts={"reason": "no arguments"})
                batched = [np.stack([x, x]) for x in dyn]
                vm = jax.vmap(exported.call)
                res = leaves(checked_jit(jax.jit(vm, in_shardings=tuple(NamedSharding(mesh, P(None, *s.spec)) for s in ins))
                                         if h.mesh else jax.jit(vm), *batched))
                got, want = [r[i] for i in range(2) for r in res], want + want
            elif name == "grad":
                if not _floating(dyn) or not _floating(want):
                    return Record("composition", name, "skipped", error="not differentiated: an input or output "
                                  "is not a real floating array", facts={"reason": "not floating"})

                def total(f: Callable[..., Any]) -> Callable[..., Any]:
                    return lambda *a: sum(jnp.sum(o.astype(jnp.float32)) for o in jax.tree.leaves(f(*a)))

                argnums = tuple(range(len(dyn)))
                both = None
                if _together_safe(exported):  # both gradients in one program (one compile); never two
                    # copies of a LAPACK call jaxlib splits
                    try:
                        w, g = checked_jit(jit(lambda *a: (jax.grad(total(jitted), argnums=argnums)(*a),
                                                           jax.grad(total(with_vjp().call), argnums=argnums)(*a))), *dyn)
                        both = leaves(w), leaves(g)
                    except Exception:  # noqa: BLE001  each on its own below, so the record says which side raised
                        pass
                if both is not None:
                    want, got = both
                else:
                    try:  # what the composition is held against first: where JAX cannot differentiate the
                        # harness's own function (a while loop with dynamic bounds, a rule it lacks), nothing to compose
                        want = leaves(checked_jit(jit(jax.grad(total(jitted), argnums=argnums)), *dyn))
                    except Exception as e:  # noqa: BLE001
                        why = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:300]
                        return Record("composition", name, "skipped", error=f"not differentiable here: {why}",
                                      facts={"reason": "the harness's own function is not differentiable"})
                    got = leaves(checked_jit(jit(jax.grad(total(with_vjp().call), argnums=argnums)), *dyn))
            elif name == "scan":
                steps = leaves(checked_jit(jit(lambda *a: lax.scan(lambda c, _: (c, exported.call(*a)), 0, None,
                                                                   length=2)[1]), *dyn))
                got, want = [s[i] for i in range(2) for s in steps], want + want
            elif name == "cond":
                zeros = _zeros(plain)
                got = leaves(checked_jit(jit(lambda p, *a: lax.cond(p, lambda: exported.call(*a), lambda: zeros), lead=1),
                                         True, *dyn))
            elif name == "while":
                zeros = _zeros(plain)
                got = leaves(checked_jit(jit(lambda n, *a: lax.fori_loop(0, n, lambda i, c: exported.call(*a), zeros),
                                             lead=1), 2, *dyn))
            elif name == "nested":
                # a sharded artifact: the outer function has its shardings too, and its own artifact
                # is called as the inner one is (inside jit with them, on their mesh)
                inner = jax.jit(lambda *a: exported.call(*a), in_shardings=ins, out_shardings=outs) if h.mesh \
                    else jax.jit(lambda *a: exported.call(*a))
                outer = export.deserialize(export.export(inner, platforms=("cpu",))(*dyn).serialize())
                got = leaves(checked_jit(jax.jit(outer.call, in_shardings=ins, out_shardings=outs) if h.mesh
                                         else jax.jit(outer.call), *dyn))
                if h.mesh:  # the outer artifact must say where its values live as the inner one does
                    kept = {k: (_specs(exported, k, mesh), _specs(outer, k, mesh)) for k in ("in", "out")}
                    return Record("composition", name, "ok", timer.seconds, handle=(got, want),
                                  facts={"outputs": len(got), "shardings": {k: {"inner": a, "outer": b}
                                                                             for k, (a, b) in kept.items()}})
            elif name == "donated":
                fresh = [jnp.array(x) for x in dyn]
                got = leaves(checked_jit(jit(exported.call, donate_argnums=tuple(range(len(fresh)))), *fresh))
            else:
                raise ValueError(f"unknown composition {name!r}")
    except Exception as e:  # JAX refusing a composition is an error record: the judge knows which are documented
        return raised(name, e, timer.seconds)
    return Record("composition", name, "ok", timer.seconds, facts={"outputs": len(got)}, handle=(got, want))


#: The control-flow compositions, run as one program where they all run (one compile, not three).
CONTROL = ("scan", "cond", "while")


def control_flow(exported: Any, dyn: list[Any], plain: Any, h: Any) -> list[Record] | None:
    """``scan``, ``cond`` and ``while`` of the call in one program, one record each (their
    seconds: a third of it each); None where the program raises, or where copies of the module
    may not run side by side (``_together_safe``): the caller runs each on its own, so the
    records say which."""
    import jax
    from jax import lax
    from jax.sharding import NamedSharding, PartitionSpec as P

    if not _together_safe(exported):
        return None
    zeros = _zeros(plain)

    def together(p: Any, n: Any, *a: Any) -> Any:
        steps = lax.scan(lambda c, _: (c, exported.call(*a)), 0, None, length=2)[1]
        return (steps, lax.cond(p, lambda: exported.call(*a), lambda: zeros),
                lax.fori_loop(0, n, lambda i, c: exported.call(*a), zeros))

    timer = Timer()
    try:
        with timer():
            ins, _ = _shardings(h, exported, dyn, plain)
            jitted = jax.jit(together, in_shardings=(NamedSharding(ins[0].mesh, P()),) * 2 + tuple(ins)) \
                if h.mesh and ins else jax.jit(together)
            steps, cond, loop = checked_jit(jitted, True, 2, *dyn)
    except Exception:  # noqa: BLE001  one of them raises: each on its own
        return None
    want = leaves(plain)
    got = {"scan": ([s[i] for i in range(2) for s in leaves(steps)], want + want),
           "cond": (leaves(cond), want), "while": (leaves(loop), want)}
    return [Record("composition", c, "ok", timer.seconds / 3, facts={"outputs": len(got[c][0]), "together": list(CONTROL)},
                   handle=got[c]) for c in CONTROL]


#: The PRNG implementations whose typed keys go through every composition, in and out.
KEY_IMPLS = ("threefry2x32", "rbg", "unsafe_rbg")


def typed_keys(x: Any) -> list[Record]:
    """For each PRNG implementation, an artifact with a typed key in and out (``k, x -> split(k)[0],
    x + uniform(split(k)[1])``), exported for the cpu, serialized and read back, then called in
    every composition: one record each, platform ``composition:impl`` (``jit_sharded:rbg``), holding
    the key's data and the values against the artifact's own call."""
    import jax
    import jax.numpy as jnp
    from jax import export, lax
    from jax.sharding import NamedSharding, PartitionSpec as P

    def f(k: Any, v: Any) -> Any:
        k1, k2 = jax.random.split(k)
        return k1, v + jax.random.uniform(k2, v.shape, v.dtype)

    def flat(out: Any) -> list[np.ndarray]:
        return [np.asarray(jax.random.key_data(out[0])), np.asarray(out[1])]

    mesh = jax.make_mesh((len(jax.devices()),), ("x",))
    rep = NamedSharding(mesh, P())
    split = NamedSharding(mesh, P("x") if np.shape(x) and np.shape(x)[0] % len(jax.devices()) == 0 else P())
    out: list[Record] = []
    for impl in KEY_IMPLS:
        key = jax.random.key(0, impl=impl)
        try:
            back = export.deserialize(export.export(jax.jit(f), platforms=("cpu",))(key, x).serialize())
            want = flat(back.call(key, x))
        except Exception as e:  # noqa: BLE001  the artifact itself: its own call record says so
            out.append(raised(f"call:{impl}", e, 0.0))
            continue
        runs = {
            "jit_sharded": lambda: jax.jit(back.call, in_shardings=(rep, split), out_shardings=(rep, split))(key, x),
            "vmap": lambda: jax.tree.map(lambda a: a[0], jax.vmap(back.call)(jax.random.split(key, 2), np.stack([x, x]))),
            "grad": None,  # a key has no derivative; the values' is the other compositions' business
            "scan": lambda: jax.tree.map(lambda a: a[1], lax.scan(lambda c, _: (c, back.call(key, x)), 0, None, length=2)[1]),
            "cond": lambda: jax.jit(lambda p: lax.cond(p, lambda: back.call(key, x), lambda: (key, x)))(True),
            "while": lambda: jax.jit(lambda n: lax.fori_loop(0, n, lambda i, c: back.call(key, x), (key, x)))(2),
            "nested": lambda: export.deserialize(export.export(jax.jit(lambda a, b: back.call(a, b)),
                                                               platforms=("cpu",))(key, x).serialize()).call(key, x),
            "donated": lambda: jax.jit(back.call, donate_argnums=(0, 1))(jax.random.key(0, impl=impl), jnp.array(x)),
        }
        for name, run_one in runs.items():
            if run_one is None:
                continue
            timer = Timer()
            try:
                with timer():
                    got = flat(run_one())
            except Exception as e:  # noqa: BLE001  JAX refusing it: the judge knows which are documented
                out.append(raised(f"{name}:{impl}", e, timer.seconds))
                continue
            out.append(Record("composition", f"{name}:{impl}", "ok", timer.seconds, facts={"key_impl": impl},
                              handle=(got, want)))
    return out


def raised(name: str, e: BaseException, seconds: float) -> Record:
    """The error record of a composition (or of the artifact's own call, ``name`` "call"): where
    the first line of the message only announces the rest (MLIR's "Cannot lower jaxpr with
    verifier errors:"), the next line is the error."""
    rec = failure(Record, "composition", name, e, seconds)
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        rec = rec.with_status(rec.status, error=f"{lines[0]} {lines[1]}"[:500])
    return rec


def own_call(exported: Any, dyn: list[Any], h: Any) -> Any:
    """The artifact called on its own: what every composition is held against; a sharded
    harness's inside a ``jit`` with its argument shardings (JAX calls a multi-device artifact
    only where that many devices are in context)."""
    import jax

    if not h.mesh:
        return checked_jit(jax.jit(exported.call), *dyn)
    ins, outs = _shardings(h, exported, dyn, None)
    return checked_jit(jax.jit(exported.call, in_shardings=ins, out_shardings=outs), *dyn)


__all__ = ["COMPOSITIONS", "CONTROL", "KEY_IMPLS", "control_flow", "leaves", "own_call", "raised", "run", "typed_keys"]
