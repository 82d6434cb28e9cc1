"""The mesh a sharded harness runs under: concrete when this host has the devices,
abstract otherwise (``jax.sharding.AbstractMesh``: lowering, export and the structural
``sharding`` stage need no devices, so a 16x16 mesh exports from a CPU-only host).

The harness functions read the mesh from context (``jax.sharding.get_abstract_mesh()``),
so one definition serves both.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from farm.catalog import Harness


def missing_api(h: Harness, devices_here: int) -> str | None:
    """What this jax lacks to enter ``h``'s mesh (an older release: 0.5.3 has no
    ``jax.sharding.use_abstract_mesh``), said as the reason the harness is skipped; None: nothing."""
    import jax

    fits = h.devices <= devices_here
    need = ["jax.sharding.AxisType", "jax.make_mesh"]
    need += ["jax.set_mesh"] if fits else ["jax.sharding.use_abstract_mesh", "jax.sharding.AbstractMesh"]
    where = "on this host's devices" if fits else \
        f"abstractly (the mesh has {h.devices} devices, this host {devices_here})"
    for name in need:
        obj: Any = jax
        for part in name.split(".")[1:]:
            obj = getattr(obj, part, None)
        if obj is None:
            return f"jax {jax.__version__} has no {name}: the farm enters a mesh {where} with it"
    return None


@contextmanager
def mesh_context(h: Harness, devices_here: int) -> Iterator[bool]:
    """Enter ``h``'s mesh (and partitioner); yields True when the mesh is abstract."""
    if not h.mesh:
        yield False
        return
    import jax
    from jax._src import config  # noqa: PLC0415  (the partitioner switch is a context manager only here)

    names = tuple(n for n, _ in h.mesh)
    sizes = tuple(s for _, s in h.mesh)
    kind = jax.sharding.AxisType.Explicit if h.axis_types == "explicit" else jax.sharding.AxisType.Auto
    auto = (kind,) * len(names)
    flag = nullcontext() if not h.partitioner else config.use_shardy_partitioner(h.partitioner == "shardy")
    with flag:
        if h.devices <= devices_here:
            mesh = jax.make_mesh(sizes, names, axis_types=auto, devices=jax.devices()[:h.devices])
            with jax.set_mesh(mesh):
                yield False
        else:
            with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh(sizes, names, axis_types=auto)):
                yield True


def spec(s: Any) -> Any:
    """A harness's spec tuple as a ``PartitionSpec``."""
    from jax.sharding import PartitionSpec

    return PartitionSpec(*s)


def sharded_args(h: Harness, dyn: list[Any], abstract: bool) -> list[Any]:
    """The dynamic arguments sharded by their declared specs over the context's mesh: shape
    and dtype structs on an abstract mesh, arrays placed on the devices of a concrete one
    (so the traced module carries the specs either way)."""
    import jax
    from jax.sharding import NamedSharding

    specs = list(h.in_specs) + [()] * (len(dyn) - len(h.in_specs))
    if abstract:
        mesh = jax.sharding.get_abstract_mesh()
        return [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=NamedSharding(mesh, spec(s)))
                for a, s in zip(dyn, specs)]
    mesh = jax.sharding.get_mesh()
    return [jax.device_put(a, NamedSharding(mesh, spec(s))) for a, s in zip(dyn, specs)]


def hlo_specs(h: Harness, dyn: list[Any]) -> tuple[str | None, ...]:
    """The HLO sharding strings the declared specs mean on the context's mesh (what an
    exported artifact's ``in_shardings_hlo`` and a GSPMD module must say)."""
    import jax
    from jax.sharding import NamedSharding

    mesh = jax.sharding.get_abstract_mesh()
    return tuple(str(NamedSharding(mesh, spec(s))._to_xla_hlo_sharding(len(a.shape)))  # noqa: SLF001
                 for a, s in zip(dyn, h.in_specs))


def hlo_constraints(h: Harness) -> tuple[str, ...]:
    """The HLO sharding strings of the harness's declared constraints (what a GSPMD
    module's ``@Sharding`` custom calls must say), each over its own mesh."""
    import jax
    from jax.sharding import NamedSharding

    out = []
    for mesh, s in h.constraints:
        abstract = jax.sharding.AbstractMesh(tuple(k for _, k in mesh), tuple(n for n, _ in mesh))
        out.append(str(NamedSharding(abstract, spec(s))._to_xla_hlo_sharding(len(s))))  # noqa: SLF001
    return tuple(out)
