"""sharding: a sharded module checked against its mesh, structurally (no devices needed).

For a harness declared over a mesh (axis names and sizes), the lowered and the exported
modules must say so exactly, whatever the mesh size and whether or not this host could
run it:

- ``mhlo.num_partitions`` is the mesh size and ``mhlo.num_replicas`` is 1;
- every collective's replica groups (``all_reduce``, ``all_gather``, ``reduce_scatter``,
  ``all_to_all``) are exactly the groups of devices that differ only along the mesh axes
  the harness communicates over, and a ``collective_permute``'s pairs stay inside them;
- the entry function's arguments carry the declared PartitionSpecs (Shardy's
  ``sdy.sharding`` or GSPMD's ``mhlo.sharding``);
- every declared reshard is in the module as a sharding constraint (Shardy's
  ``sdy.sharding_constraint`` over the named ``sdy.mesh``, which may be another mesh of
  the same size, or GSPMD's ``@Sharding`` custom call) with exactly the declared spec.

The module is walked with the MLIR bindings that ship in jaxlib; ``expected_groups`` is
a pure function of the mesh. Device ids are the mesh's row-major (logical) ids.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from farm.results import Record
from farm.stages.record import Timer, failure

COLLECTIVES = ("stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.reduce_scatter", "stablehlo.all_to_all",
               "stablehlo.collective_permute")


@dataclass(frozen=True, slots=True)
class Sharded(Record):
    """facts: partitioner, mesh, num_partitions, collectives found, argument shardings."""

    @property
    def problems(self) -> list[str]:
        """Where the module's partitioning differs from its mesh's."""
        return list(self.facts.get("problems") or [])


def expected_groups(mesh: tuple[tuple[str, int], ...], axes: tuple[str, ...]) -> list[list[int]]:
    """The device groups a collective over ``axes`` of ``mesh`` must use: devices that agree
    on every other axis, each group in row-major order of ``axes``, groups ordered by
    their first device."""
    names = [n for n, _ in mesh]
    sizes = [s for _, s in mesh]
    ids = np.arange(int(np.prod(sizes))).reshape(sizes)
    inner = [names.index(a) for a in axes]
    outer = [i for i in range(len(names)) if i not in inner]
    moved = np.transpose(ids, outer + inner).reshape(-1, int(np.prod([sizes[i] for i in inner] or [1])))
    return sorted(moved.tolist())


def walk(module: Any) -> dict[str, Any]:
    """Partition counts, collectives (with their groups or pairs) and the entry function's
    argument shardings of an ``ir.Module``."""
    from jax._src.interpreters.mlir import ir

    attrs = module.operation.attributes
    facts: dict[str, Any] = {
        "num_partitions": _int_attr(attrs, "mhlo.num_partitions", ir),
        "num_replicas": _int_attr(attrs, "mhlo.num_replicas", ir), "collectives": [], "args": [],
        "meshes": {}, "constraints": []}

    def visit(op: Any) -> Any:
        name = op.name
        if name in COLLECTIVES:
            key = "source_target_pairs" if name == "stablehlo.collective_permute" else "replica_groups"
            facts["collectives"].append({"op": name.split(".", 1)[1],
                                         **_groups(op.attributes[key], ir, facts["meshes"], key)})
        elif name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == "main":
            if "arg_attrs" in op.attributes:
                facts["args"] = [_arg_sharding(str(a)) for a in ir.ArrayAttr(op.attributes["arg_attrs"])]
        elif name == "sdy.mesh":
            facts["meshes"][ir.StringAttr(op.attributes["sym_name"]).value] = _sdy_mesh(str(op.attributes["mesh"]))
        elif name == "sdy.sharding_constraint":
            facts["constraints"].append(_arg_sharding(str(op.attributes["sharding"])))
        elif name == "stablehlo.custom_call" and "mhlo.sharding" in op.attributes \
                and ir.StringAttr(op.attributes["call_target_name"]).value == "Sharding":
            facts["constraints"].append({"hlo": ir.StringAttr(op.attributes["mhlo.sharding"]).value})
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return facts


def _int_attr(attrs: Any, name: str, ir: Any) -> int | None:
    return ir.IntegerAttr(attrs[name]).value if name in attrs else None


#: jax 0.12 with Shardy names a collective's groups by mesh axes instead of listing them:
#: #stablehlo.replica_group_mesh_axes<mesh = @mesh_0, axes = [#stablehlo.axis_ref<name = "x">]>
_MESH_AXES = re.compile(r"#stablehlo\.replica_group_mesh_axes<mesh = @([\w.]+), axes = \[(.*)\]>")
_AXIS_REF = re.compile(r'axis_ref<name = "(\w+)"')


def _groups(attr: Any, ir: Any, meshes: dict[str, list[list[Any]]], key: str) -> dict[str, Any]:
    """A collective's device groups (or pairs) under ``key``: the listed ones, or those of the
    mesh axes it names (``mesh_axes`` then says which), read through the module's own mesh."""
    m = _MESH_AXES.fullmatch(str(attr))
    if m:
        mesh, axes = m.group(1), _AXIS_REF.findall(m.group(2))
        if mesh not in meshes:
            raise ValueError(f"a collective names mesh @{mesh}, which the module does not declare")
        if any(a not in [n for n, _ in meshes[mesh]] for a in axes):
            raise ValueError(f"a collective names axes {axes} that mesh @{mesh} {meshes[mesh]} lacks")
        return {key: expected_groups(tuple((n, k) for n, k in meshes[mesh]), tuple(axes)),
                "mesh_axes": {"mesh": mesh, "axes": axes}}
    dense = ir.DenseIntElementsAttr(attr)
    shape = ir.ShapedType(dense.type).shape
    flat = [int(dense[i]) for i in range(len(dense))]
    return {key: [flat[i * shape[1]:(i + 1) * shape[1]] for i in range(shape[0])] if len(shape) == 2 else [flat]}


#: Shardy: #sdy.sharding<@mesh, [{"x"}, {"y", "z"}, {}]>; GSPMD: mhlo.sharding = "{devices=[4,2]<=[8]}"
_SDY = re.compile(r'#sdy\.sharding<@?([\w.]*), \[(.*?)\]')
_SDY_AXIS = re.compile(r'"(\w+)"=(\d+)')


def _sdy_mesh(text: str) -> list[list[Any]]:
    """An ``sdy.mesh``'s axes, [[name, size], ...], from its printed ``#sdy.mesh<["x"=2, ...]>``
    (a mesh with its own device order is refused: its groups would be read wrong)."""
    if "device_ids" in text:
        raise ValueError(f"an sdy.mesh with explicit device_ids is not read yet: {text[:200]}")
    return [[n, int(k)] for n, k in _SDY_AXIS.findall(text)]
_HLO = re.compile(r'mhlo\.sharding = "([^"]*)"')


def _arg_sharding(text: str) -> dict[str, Any]:
    """One argument's sharding annotation: Shardy axes per dimension, or the HLO string."""
    m = _SDY.search(text)
    if m:
        dims = re.findall(r"\{([^{}]*)\}", m.group(2))
        return {"sdy": [[a.strip().strip('"') for a in d.split(",") if a.strip()] for d in dims], "mesh": m.group(1)}
    m = _HLO.search(text)
    return {"hlo": m.group(1)} if m else {}


def check(facts: dict[str, Any], mesh: tuple[tuple[str, int], ...], axes: tuple[str, ...],
          in_specs: tuple[Any, ...], hlo_specs: tuple[str | None, ...] = (),
          constraints: tuple[tuple[tuple[Any, tuple[Any, ...]], str], ...] = ()) -> list[str]:
    """What in ``facts`` disagrees with the mesh, the collective axes and the specs (pure)."""
    size = int(np.prod([s for _, s in mesh]))
    problems = []
    if facts["num_partitions"] != size or facts["num_replicas"] not in (1, None):
        problems.append(f"num_partitions={facts['num_partitions']} num_replicas={facts['num_replicas']}, "
                        f"the mesh has {size} devices")
    want = expected_groups(mesh, axes) if axes else None
    for c in facts["collectives"]:
        if want is None:
            problems.append(f"{c['op']} found, the harness declares no collective")
        elif "replica_groups" in c and sorted(sorted(g) for g in c["replica_groups"]) != want:
            problems.append(f"{c['op']} replica groups {_short(c['replica_groups'])} are not the groups of "
                            f"axes {axes}: {_short(want)}")
        elif "source_target_pairs" in c:
            group_of = {d: i for i, g in enumerate(want) for d in g}
            if any(group_of.get(s) != group_of.get(t) for s, t in c["source_target_pairs"]):
                problems.append(f"{c['op']} pairs {_short(c['source_target_pairs'])} cross the groups of axes {axes}")
    if axes and not facts["collectives"]:
        problems.append(f"no collective over {axes} in the module")
    problems += _check_args(facts["args"], in_specs, hlo_specs)
    problems += [_missing(c, hlo, facts) for c, hlo in constraints if not _has_constraint(c, hlo, facts)]
    return problems


def _dims(spec: tuple[Any, ...]) -> list[list[str]]:
    return [list(d) if isinstance(d, tuple) else ([] if d is None else [d]) for d in spec]


def _has_constraint(declared: tuple[Any, tuple[Any, ...]], hlo: str, facts: dict[str, Any]) -> bool:
    """Whether the module constrains some value to ``declared`` (mesh, spec): a Shardy
    constraint over an ``sdy.mesh`` with exactly that mesh's axes, or a GSPMD one with the
    declared spec's HLO sharding."""
    mesh, spec = declared
    want_mesh = [[n, k] for n, k in mesh]
    for c in facts["constraints"]:
        if "sdy" in c and facts["meshes"].get(c.get("mesh")) == want_mesh and c["sdy"] == _dims(spec):
            return True
        if c.get("hlo") == hlo:
            return True
    return False


def _missing(declared: tuple[Any, tuple[Any, ...]], hlo: str, facts: dict[str, Any]) -> str:
    mesh, spec = declared
    label = "x".join(f"{n}{k}" for n, k in mesh)
    return (f"no sharding constraint {_dims(spec)} over mesh {label} ({hlo}) in the module; "
            f"found {facts['constraints'][:4]}")


def _check_args(args: list[dict[str, Any]], in_specs: tuple[Any, ...], hlo_specs: tuple[str | None, ...]) -> list[str]:
    # a multi-platform export's entry function takes the platform index first
    args = args[len(args) - len(in_specs):] if len(args) > len(in_specs) else args
    out = []
    for i, spec in enumerate(in_specs):
        got = args[i] if i < len(args) else {}
        if "sdy" in got:
            want = [list(d) if isinstance(d, tuple) else ([] if d is None else [d]) for d in spec]
            if got["sdy"][:len(want)] != want or any(got["sdy"][len(want):]):
                out.append(f"argument {i} is sharded {got['sdy']}, declared {want}")
        elif "hlo" in got and i < len(hlo_specs) and hlo_specs[i] is not None and got["hlo"] != hlo_specs[i]:
            out.append(f"argument {i} is sharded {got['hlo']}, declared {hlo_specs[i]}")
        elif not got:
            out.append(f"argument {i} carries no sharding annotation")
    return out


def _short(groups: list[list[int]], n: int = 3) -> str:
    text = ", ".join(str(g if len(g) <= 8 else g[:8] + ["..."]) for g in groups[:n])
    return f"[{text}{', ...' if len(groups) > n else ''}] ({len(groups)} groups)"


def run(module: Any, platform: str, mesh: tuple[tuple[str, int], ...], axes: tuple[str, ...],
        in_specs: tuple[Any, ...], hlo_specs: tuple[str | None, ...] = (), partitioner: str = "",
        constraints: tuple[tuple[tuple[Any, tuple[Any, ...]], str], ...] = ()) -> Sharded:
    timer = Timer()
    try:
        with timer():
            facts = walk(module)
            problems = check(facts, mesh, axes, in_specs, hlo_specs, constraints)
        facts = {**facts, "mesh": [list(m) for m in mesh], "axes": list(axes), "partitioner": partitioner,
                 "collectives": [{**c, **{k: _short(v) for k, v in c.items() if k not in ("op", "mesh_axes")}}
                                 for c in facts["collectives"]]}
        if problems:
            facts["problems"] = problems
        return Sharded("sharding", platform, "ok", timer.seconds,
                       metrics={"collectives": float(len(facts["collectives"])),
                                 "constraints": float(len(facts["constraints"]))}, facts=facts)
    except Exception as e:
        return failure(Sharded, "sharding", platform, e, timer.seconds)
