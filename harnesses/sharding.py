"""Sharded programs over meshes from 1x2 to 16x16 (and 3-axis meshes up to 256 devices):
shard_map collectives (psum over one axis and over all, all_gather, psum_scatter,
all_to_all, ppermute), jit-level sharding constraints, a reshard onto another mesh of the
same size (the axes reversed and renamed), and on explicit-axis meshes (shardings in the
types) a reduction over a sharded axis and a reshard swapping the sharded axes; all under
both partitioners.

Every harness is lowered and exported for cpu, cuda, rocm and tpu from this host whatever
its mesh size (an AbstractMesh when the host has fewer devices) and checked structurally
by the ``sharding`` stage (partition count, the replica groups of every collective, the
arguments' PartitionSpecs); meshes of at most 8 devices also compile and run on the
host's forced CPU devices, and the gathered global result is compared with a NumPy
reference on the unsharded global input. The functions read the mesh from context
(``jax.sharding.get_abstract_mesh()``): the pipeline enters the concrete or abstract mesh.
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P

from farm.catalog import CustomArg, Limitation, define

FAMILY = "sharding"
MESHES = (("x", 1, "y", 2), ("x", 2, "y", 4), ("x", 2, "y", 2, "z", 2), ("x", 4, "y", 8), ("x", 8, "y", 16),
          ("x", 16, "y", 16), ("x", 4, "y", 8, "z", 8))
PARTITIONERS = ("shardy", "gspmd")


def _mesh_of(flat: tuple) -> tuple[tuple[str, int], ...]:
    return tuple(zip(flat[::2], flat[1::2]))


def _cols(mesh: tuple[tuple[str, int], ...]) -> tuple[str, ...]:
    """The axes the second dimension is sharded over: every axis but x."""
    return tuple(n for n, _ in mesh[1:])


def _smap(body, out_cols: bool, rows: bool = False):
    """shard_map over the context mesh: input P("x", cols), output P(None | "x", cols)."""
    def fun(a):
        mesh = jax.sharding.get_abstract_mesh()
        cols = tuple(mesh.axis_names[1:])
        out = P("x" if rows else None, cols if out_cols else None)
        return jax.shard_map(body, mesh=mesh, in_specs=P("x", cols), out_specs=out)(a)
    return fun


def _ring(b):
    n = lax.axis_size("x")
    return lax.ppermute(b, "x", [(i, (i + 1) % n) for i in range(n)])


def _all_axes_psum(b):
    return lax.psum(b, tuple(jax.sharding.get_abstract_mesh().axis_names))


def _constrained(a):
    mesh = jax.sharding.get_abstract_mesh()
    y = lax.with_sharding_constraint(a * 2, NamedSharding(mesh, P(None, tuple(mesh.axis_names))))
    return y + 1


#: name: (function, global shape from (X, C), reference from (a, X, C), collective axes from the mesh)
OPS = {
    "psum": (_smap(lambda b: lax.psum(b, "x"), True), lambda X, C: (2 * X, 2 * C),
             lambda a, X, C: a.reshape(X, 2, 2 * C).sum(0), lambda m: ("x",)),
    "psum_all": (_smap(_all_axes_psum, False), lambda X, C: (2 * X, 2 * C),
                 lambda a, X, C: a.reshape(X, 2, C, 2).sum((0, 2)), lambda m: tuple(n for n, _ in m)),
    "all_gather": (_smap(lambda b: lax.all_gather(b, "x", tiled=True, to="invarying"), True),
                   lambda X, C: (2 * X, 2 * C), lambda a, X, C: a, lambda m: ("x",)),
    "psum_scatter": (_smap(lambda b: lax.psum_scatter(b, "x", tiled=True), True, rows=True),
                     lambda X, C: (X * X, 2 * C), lambda a, X, C: a.reshape(X, X, 2 * C).sum(0), lambda m: ("x",)),
    "all_to_all": (_smap(lambda b: lax.all_to_all(b, "x", 0, 1, tiled=True), True, rows=True),
                   lambda X, C: (X * X, 2 * C),
                   lambda a, X, C: a.reshape(X, X, C, 2).transpose(1, 2, 0, 3).reshape(X, C * X * 2),
                   lambda m: ("x",)),
    "ppermute": (_smap(_ring, True, rows=True), lambda X, C: (2 * X, 2 * C),
                 lambda a, X, C: np.roll(a.reshape(X, 2, 2 * C), 1, 0).reshape(2 * X, 2 * C), lambda m: ("x",)),
    "sharding_constraint": (_constrained, lambda X, C: (2 * X, 2 * C), lambda a, X, C: a * 2 + 1, lambda m: ()),
}

#: all_gather's ``to='invarying'`` is new in jax 0.10.0 (jax-ml/jax c99d000; 0.9.2 refuses the value).
NEEDS = {"all_gather": {"lax.all_gather(to='invarying')": ">=0.10"}}

#: Found by these harnesses: over a mesh axis of size 1 (x in a 1x2 mesh) JAX keeps psum,
#: all_gather, psum_scatter and ppermute as collectives of 1-device groups but lowers
#: all_to_all to no collective at all.
TRIVIAL_AXIS = Limitation("all_to_all over a mesh axis of size 1 lowers to no collective: nothing to check",
                          stage="sharding", error="no collective over")


#: Found by these harnesses (jax 0.10.2): jit without in_shardings, traced with sharded
#: arguments, lowers the argument shardings into the module but records
#: ``Exported.in_shardings_hlo = (None,)``; deserializing reads them back from the module
#: (``{devices=[16,16]<=[256]}``), so the artifact and the in-memory export disagree.
IN_SHARDINGS_NOT_RECORDED = Limitation(
    "jax.export records in_shardings_hlo=None for sharded arguments of a jit without in_shardings, while the "
    "module carries them: the deserialized artifact has them", stage="serialize", error="in_shardings_hlo",
    jax=">0.9.2,<0.12")  # measured: 0.9.2 and 0.12 record them, 0.10.2 does not (docs/versions.md)


def _other_mesh(mesh: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """A mesh of the same devices with the axes' sizes reversed and renamed (X, Y, ...)."""
    return tuple((n.upper(), k) for (n, _), (_, k) in zip(mesh, reversed(mesh)))


def _onto_other_mesh(a):
    """a + 1, returned sharded over another mesh of the same size: a reshard between meshes."""
    here = jax.sharding.get_abstract_mesh()
    other = _other_mesh(tuple(zip(here.axis_names, here.axis_sizes)))
    names = tuple(n for n, _ in other)
    target = jax.sharding.AbstractMesh(tuple(k for _, k in other), names, axis_types=here.axis_types)
    return jax.jit(lambda b: b + 1, out_shardings=NamedSharding(target, P(names[0], names[1:])))(a)


def _swap(a):
    """On an explicit mesh: a * 2 resharded from P(x, cols) to P(cols, x)."""
    cols = tuple(jax.sharding.get_abstract_mesh().axis_names[1:])
    return jax.sharding.reshard(a * 2, P(cols, "x"))


#: Each harness: (function, global shape, reference, constraints the module must carry);
#: shapes and constraints from the mesh. Square inputs of the mesh size divide every way.
RESHARDS = {
    "reshard_mesh": ("auto", _onto_other_mesh, lambda a: a + 1,
                     lambda m: [(_other_mesh(m), (_other_mesh(m)[0][0], tuple(n for n, _ in _other_mesh(m)[1:])))]),
    "explicit_reduce": ("explicit", lambda a: jnp.sum(a, axis=0), lambda a: a.sum(0),
                        lambda m: [(m, (_cols(m),))]),
    "explicit_reshard": ("explicit", _swap, lambda a: a * 2, lambda m: [(m, (_cols(m), "x"))]),
}


#: Found by these harnesses (jax 0.10.2, XLA CPU): under GSPMD a jit whose output is
#: sharded over another mesh of the same devices with other axis sizes (2x4 onto 4x2)
#: fails to compile (an IndivisibleError from the mesh of the input); Shardy compiles and
#: runs it, and both lower the same reshard.
GSPMD_MESH_RESHARD = Limitation(
    "GSPMD cannot compile a reshard onto a mesh of the same devices with other axis sizes (Shardy can)",
    platforms=("cpu",), stage="compile", error="is incompatible with mesh_shape")


#: jax 0.12.0.1 and 0.9.2: Shardy refuses the same program with the same error; 0.10.2's compiles
#: it (version sweeps and the Bazel family test; not yet reduced to a standalone repro, so not a
#: finding yet). 0.11 not measured.
SHARDY_MESH_RESHARD = Limitation(
    "Shardy (jax 0.9.2 and 0.12, not 0.10) too refuses to compile a reshard onto a mesh of the same devices with "
    "other axis sizes", platforms=("cpu",), stage="compile", error="is incompatible with mesh_shape",
    jax="!=0.10.*,!=0.11.*")

#: Where it was seen: the only mesh here that runs and changes axis sizes (1x2 onto 2x1
#: compiles; meshes over 8 devices do not compile on this host).
MESH_RESHARD_LIMITS = {("gspmd", "reshard_mesh", "2x4"): [GSPMD_MESH_RESHARD],
                       ("shardy", "reshard_mesh", "2x4"): [SHARDY_MESH_RESHARD]}


def _input(shape: tuple[int, int], tag: str) -> CustomArg:
    def make(rng: np.random.Generator) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)
    return CustomArg(f"sharded:{tag}:{shape[0]}x{shape[1]}", make, shape, "float32")


for flat in MESHES:
    mesh = _mesh_of(flat)
    X = mesh[0][1]
    C = int(np.prod([s for _, s in mesh[1:]]))
    size = X * C
    label = "x".join(str(s) for _, s in mesh)
    for op, (fun, shape_of, ref, axes_of) in OPS.items():
        shape = shape_of(X, C)
        axes = axes_of(mesh)
        lims = [IN_SHARDINGS_NOT_RECORDED] + ([TRIVIAL_AXIS] if X == 1 and op == "all_to_all" else [])
        for part in PARTITIONERS:
            define(FAMILY, op, fun, [_input(shape, op)], dtype="float32", group=f"sharding_{op}",
                   params={"mesh": label, "partitioner": part}, shapes=[shape], devices=size, mesh=mesh,
                   in_specs=[("x", _cols(mesh))], collective_axes=axes, partitioner=part,
                   reference=lambda a, X=X, C=C, ref=ref: ref(a, X, C), tol=(2e-5, 1e-5), limitations=lims,
                   needs=NEEDS.get(op))

    for op, (axis_types, fun, ref, constraints_of) in RESHARDS.items():
        shape = (size, size)
        for part in PARTITIONERS:
            define(FAMILY, op, fun, [_input(shape, op)], dtype="float32", group=f"sharding_{op}",
                   params={"mesh": label, "partitioner": part, "axes": axis_types}, shapes=[shape], devices=size,
                   mesh=mesh, in_specs=[("x", _cols(mesh))], partitioner=part, axis_types=axis_types,
                   constraints=constraints_of(mesh), reference=ref, tol=(2e-5, 1e-5),
                   limitations=[IN_SHARDINGS_NOT_RECORDED] + (
                       MESH_RESHARD_LIMITS.get((part, op, label), [])))
