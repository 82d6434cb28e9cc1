"""A composition failure (``farm sweep --compositions``: a ``composition`` record) as a
standalone script.

The failure is in how an artifact is used, not in the artifact: the script reads the farm's
own serialized export (``export.bin``) and the inputs the farm drew (``inputs.npz``), calls the
artifact on its own (inside ``jit`` with its shardings, for a sharded harness: on its mesh),
then inside the composition that failed, as ``farm.stages.compositions`` does, and holds one
against the other under the harness's tolerance. ``grad`` is held against ``jax.grad`` of the
harness's function, written out as ``jax.lax`` code, and differentiates that function's own
export serialized with its vjp. A typed-key composition (``jit_sharded:rbg``) builds the
farm's typed-key artifact (``k, x -> split(k)[0], x + uniform(split(k)[1])``) itself.

A composition that raised is reproduced by the error it must still raise (a documented refusal
too: its script says the refusal is still there). The script runs on the 8 forced host
devices the farm's workers have, with the partitioner the harness was exported with. A planted
fault (``FARM_PLANT=vmap_exported``) lives in the farm's process, not in jax: its script
runs plain jax and says "fixed", which is what tells a planted fault from a JAX bug.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from farm.errors import FarmError
from farm.repro import emit
from farm.repro.case import Case, artifact
from farm.repro.script import Check, Script
from farm.repro.write import Written, _environment, _story, header, npz, verify, write_needs

#: The compositions' code in the script, mirroring ``farm.stages.compositions.run`` (the
#: script needs no farm); ``composed`` returns (what the composition gave, what it is held against).
CODE = '''
import functools  # noqa: E402
from jax import export  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

COMPOSITION = {composition!r}  # what failed ("call": the artifact's own call; "vmap:rbg": a typed key's vmap)
MESH = {mesh!r}  # the harness's mesh ((axis, size), ...); (): every device on one axis "x"
AXIS_TYPES = {axis_types!r}
KEY_IMPL = {impl!r}


@functools.cache
def artifact():
    """The farm's serialized export (deserializing it needs the flatbuffers package, an optional dependency of jax)."""
    return export.deserialize(bytearray((HERE / "export.bin").read_bytes()))


def leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def shardings(exp, args, plain):
    """(in, out) NamedShardings: a sharded artifact's own on its mesh; else every leading
    dimension split over every device where it divides, else replicated."""
    devices = jax.devices()
    if MESH:
        kind = jax.sharding.AxisType.Explicit if AXIS_TYPES == "explicit" else jax.sharding.AxisType.Auto
        mesh = jax.make_mesh(tuple(n for _, n in MESH), tuple(a for a, _ in MESH), axis_types=(kind,) * len(MESH),
                             devices=devices[:exp.nr_devices])
        try:
            outs = jax.tree.unflatten(exp.out_tree, exp.out_shardings_jax(mesh))
        except ValueError:  # an output resharded onto another mesh: the artifact's own
            outs = None
        return tuple(exp.in_shardings_jax(mesh)), outs
    mesh = Mesh(np.array(devices), ("x",))
    split = lambda x: NamedSharding(mesh, P("x") if np.shape(x) and np.shape(x)[0] % len(devices) == 0 else P())
    return tuple(split(x) for x in args), (None if plain is None else jax.tree.map(split, plain))


def own(exp, args):
    """The artifact called on its own: inside jit (a sharded one's with its shardings)."""
    if not MESH:
        return jax.jit(exp.call)(*args)
    ins, outs = shardings(exp, args, None)
    return jax.jit(exp.call, in_shardings=ins, out_shardings=outs)(*args)


def composed(name, args):
    """(what the composition gave, what it is held against), as flat lists of arrays."""
    exp = artifact()
    if name == "call":
        return leaves(own(exp, args)), None
    plain = own(exp, args)
    want = leaves(plain)
    ins, outs = shardings(exp, args, plain)
    mesh = ins[0].mesh if ins else None

    def jit(fn, lead=0, **kw):
        if not MESH:
            return jax.jit(fn, **kw)
        return jax.jit(fn, in_shardings=(NamedSharding(mesh, P()),) * lead + tuple(ins), **kw)

    zeros = jax.tree.map(jnp.zeros_like, plain)
    if name == "jit_sharded":
        return leaves(jax.jit(exp.call, in_shardings=ins, out_shardings=outs)(*args)), want
    if name == "vmap":
        vm = jax.vmap(exp.call)
        batched = [np.stack([x, x]) for x in args]
        fn = jax.jit(vm, in_shardings=tuple(NamedSharding(mesh, P(None, *s.spec)) for s in ins)) if MESH else jax.jit(vm)
        res = leaves(fn(*batched))
        return [r[i] for i in range(2) for r in res], want + want
    if name == "grad":
        total = lambda g: (lambda *a: sum(jnp.sum(o.astype(jnp.float32)) for o in jax.tree.leaves(g(*a))))
        argnums = tuple(range(len(args)))
        with_vjp = export.deserialize(bytearray(export.export(jax.jit(f), platforms=exp.platforms)(*args)
                                                .serialize(vjp_order=1)))
        return (leaves(jit(jax.grad(total(with_vjp.call), argnums=argnums))(*args)),
                leaves(jit(jax.grad(total(jax.jit(f)), argnums=argnums))(*args)))
    if name == "scan":
        steps = leaves(jit(lambda *a: lax.scan(lambda c, _: (c, exp.call(*a)), 0, None, length=2)[1])(*args))
        return [s[i] for i in range(2) for s in steps], want + want
    if name == "cond":
        return leaves(jit(lambda p, *a: lax.cond(p, lambda: exp.call(*a), lambda: zeros), lead=1)(True, *args)), want
    if name == "while":
        return leaves(jit(lambda n, *a: lax.fori_loop(0, n, lambda i, c: exp.call(*a), zeros), lead=1)(2, *args)), want
    if name == "nested":
        inner = jax.jit(lambda *a: exp.call(*a), in_shardings=ins, out_shardings=outs) if MESH \\
            else jax.jit(lambda *a: exp.call(*a))
        outer = export.deserialize(export.export(inner, platforms=("cpu",))(*args).serialize())
        call = jax.jit(outer.call, in_shardings=ins, out_shardings=outs) if MESH else jax.jit(outer.call)
        return leaves(call(*args)), want
    if name == "donated":
        return leaves(jit(exp.call, donate_argnums=tuple(range(len(args))))(*[jnp.array(x) for x in args])), want
    raise ValueError(f"unknown composition {{name!r}}")


def keyed(name, x):
    """A typed key of KEY_IMPL in and out of an artifact, through the composition ``name``."""
    def g(k, v):
        k1, k2 = jax.random.split(k)
        return k1, v + jax.random.uniform(k2, v.shape, v.dtype)

    flat = lambda out: [np.asarray(jax.random.key_data(out[0])), np.asarray(out[1])]
    key = jax.random.key(0, impl=KEY_IMPL)
    back = export.deserialize(export.export(jax.jit(g), platforms=("cpu",))(key, x).serialize())
    want = flat(back.call(key, x))
    mesh = jax.make_mesh((len(jax.devices()),), ("x",))
    rep = NamedSharding(mesh, P())
    split = NamedSharding(mesh, P("x") if np.shape(x) and np.shape(x)[0] % len(jax.devices()) == 0 else P())
    runs = {{
        "call": lambda: back.call(key, x),
        "jit_sharded": lambda: jax.jit(back.call, in_shardings=(rep, split), out_shardings=(rep, split))(key, x),
        "vmap": lambda: jax.tree.map(lambda a: a[0], jax.vmap(back.call)(jax.random.split(key, 2), np.stack([x, x]))),
        "scan": lambda: jax.tree.map(lambda a: a[1], lax.scan(lambda c, _: (c, back.call(key, x)), 0, None, length=2)[1]),
        "cond": lambda: jax.jit(lambda p: lax.cond(p, lambda: back.call(key, x), lambda: (key, x)))(True),
        "while": lambda: jax.jit(lambda n: lax.fori_loop(0, n, lambda i, c: back.call(key, x), (key, x)))(2),
        "nested": lambda: export.deserialize(export.export(jax.jit(lambda a, b: back.call(a, b)),
                                                           platforms=("cpu",))(key, x).serialize()).call(key, x),
        "donated": lambda: jax.jit(back.call, donate_argnums=(0, 1))(jax.random.key(0, impl=KEY_IMPL), jnp.array(x)),
    }}
    return flat(runs[name]()), want


_HELD = {{}}


def prepare(inputs):
    """The composition, run: what it gave; what it is held against waits in EXPECTED()."""
    def run(*args):
        name = COMPOSITION.partition(":")[0]
        got, want = keyed(name, args[0]) if KEY_IMPL else composed(name, list(args))
        _HELD["want"] = want
        return got
    return run


def held():
    """Per output, what the composition is held against (computed by prepare's run)."""
    return [[w] for w in _HELD.get("want") or []]
'''


def write_composition(case: Case, out: Path) -> Written:
    """``repro.py`` for a composition failure, with the farm's ``export.bin`` and ``inputs.npz``.

    Raises:
        FarmError: no artifact to compose (its export failed), or a ``grad`` failure whose
            function cannot be written out as ``jax.lax`` code."""
    from farm.formats import iofile
    from farm.repro.candidate import traced_program

    rec, h = case.failure, case.harness
    name, _, impl = rec.platform.partition(":")
    blob = artifact(case.outcome, "export")
    if blob is None and not impl:
        raise FarmError(f"{h.name}: the composition failed but the farm kept no export artifact to compose")
    io = artifact(case.outcome, "io")
    inputs = [np.asarray(a) for a in iofile.unpack(io)[0]] if io else traced_program(h)[1]
    code = None
    if name == "grad":
        try:
            code = emit.function(traced_program(h)[0].closed)
        except (emit.Unemittable, AttributeError) as e:
            raise FarmError(f"{h.name}: its grad composition is held against jax.grad of its function, which "
                            f"cannot be written as jax.lax code here ({e})") from None
    if blob is not None:
        (out / "export.bin").write_bytes(blob)
    npz(out / "inputs.npz", {f"in{i}": a for i, a in enumerate(inputs)})
    settings = {**case.settings, "XLA_FLAGS": " ".join(filter(None, (case.settings.get("XLA_FLAGS", ""),
                                                                     "--xla_force_host_platform_device_count=8")))}
    if h.partitioner:
        settings["JAX_USE_SHARDY_PARTITIONER"] = "1" if h.partitioner == "shardy" else "0"
    if rec.status in ("error", "expected_fail") and rec.error_type not in (None, "Mismatch"):
        chk = Check("error", error_type=rec.error_type)
    else:  # the judge's own tolerance (farm.judge.compositions)
        from farm.judge import Computation, allowed, of_harness, rtol_atol

        rtol, atol = rtol_atol(of_harness(h, "cpu")) if name != "grad" else \
            (allowed(Computation(None, "gradient", dtypes=(h.dtype,))).rtol,) * 2
        chk = Check("values", "jax.grad of the harness's function" if name == "grad" else
                    "the artifact called on its own", float(rtol), float(atol), exact=h.compare == "exact" and name != "grad")
    prepare = CODE.format(composition=rec.platform, mesh=tuple(h.mesh), axis_types=h.axis_types, impl=impl)
    title = f"Reproducer for {h.name}: its exported artifact inside `{rec.platform}` {rec.status}"
    story = _story(case) + ("\nThe failure is in how the artifact is used: this script calls the farm's own "
                            "artifact (export.bin) on the inputs the farm drew, on its own and inside the "
                            "composition (farm/stages/compositions.py), and holds one against the other.")
    script = Script(title, story, settings, "cpu", chk, code=code, inputs=f'[load("inputs.npz")[f"in{{i}}"] '
                    f'for i in range({len(inputs)})]', expected="held()", header=header(case.needs), prepare=prepare)
    path = out / "repro.py"
    path.write_text(script.render())
    (out / "environment.json").write_text(json.dumps(_environment(case), indent=1, default=str) + "\n")
    if case.needs is not None:
        write_needs(case.needs, out)
    return verify(path, needs=case.needs)
