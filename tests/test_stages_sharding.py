"""Sharded programs for topologies larger than the host: lowered and exported for 256
devices from this CPU host over an AbstractMesh, checked structurally (partition count,
replica groups, argument shardings) under both partitioners; meshes that fit the host's
8 forced CPU devices also run and match the reference. A planted wrong replica grouping
is caught by the structural check on a mesh too large to execute."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from farm import catalog
from farm.stages.sharding import check, expected_groups

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = """
import json, sys
from farm import catalog
from farm import faults
from farm.pipeline import run_harness
faults.plant_from_env()
out = {}
for h in catalog.select(catalog.Filters.parse(family="sharding")):
    if any(h.name.endswith(s) for s in sys.argv[1].split(",")):
        out[h.name] = {f"{r.stage}/{r.platform}": [r.status, r.error] for r in run_harness(h).records}
print(json.dumps(out))
"""


def sweep(names: str, plant: str = "") -> dict[str, dict[str, list]]:
    """Run the named sharding harnesses in a fresh process with 8 forced host devices."""
    env = {**os.environ, "FARM_PLANT": plant, "PYTHONPATH": ROOT,
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    p = subprocess.run([sys.executable, "-c", SCRIPT, names], env=env, capture_output=True, text=True, timeout=300,
                       cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def status(recs: dict[str, list], key: str) -> str:
    return recs[key][0]


def test_expected_groups_follow_the_mesh_axes() -> None:
    mesh = (("x", 2), ("y", 4))
    assert expected_groups(mesh, ("x",)) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert expected_groups(mesh, ("y",)) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert expected_groups(mesh, ("x", "y")) == [list(range(8))]
    big = expected_groups((("x", 16), ("y", 16)), ("x",))
    assert len(big) == 16 and big[1][:3] == [1, 17, 33]


def test_check_names_a_wrong_grouping_and_a_wrong_partition_count() -> None:
    mesh = (("x", 2), ("y", 4))
    facts = {"num_partitions": 8, "num_replicas": 1, "args": [{"sdy": [["x"], ["y"]]}],
             "collectives": [{"op": "all_reduce", "replica_groups": [[0, 4], [1, 5], [2, 6], [3, 7]]}]}
    assert check(facts, mesh, ("x",), (("x", "y"),)) == []
    assert check(facts, mesh, ("y",), (("x", "y"),))[0].startswith("all_reduce replica groups")
    assert "num_partitions=4" in check({**facts, "num_partitions": 4}, mesh, ("x",), (("x", "y"),))[0]
    assert "argument 0 is sharded" in check(facts, mesh, ("x",), (("y", "x"),))[0]


def test_check_names_a_missing_or_wrong_reshard() -> None:
    mesh, other = (("x", 2), ("y", 4)), (("X", 4), ("Y", 2))
    facts = {"num_partitions": 8, "num_replicas": 1, "args": [{"sdy": [["x"], ["y"]], "mesh": "mesh"}],
             "collectives": [], "meshes": {"mesh": [["x", 2], ["y", 4]], "mesh_0": [["X", 4], ["Y", 2]]},
             "constraints": [{"sdy": [["X"], ["Y"]], "mesh": "mesh_0"}]}
    onto_other = (((other, ("X", "Y")), "{devices=[4,2]<=[8]}"),)
    assert check(facts, mesh, (), (("x", "y"),), constraints=onto_other) == []
    same_names_other_mesh = (((mesh, ("x", "y")), "{devices=[2,4]<=[8]}"),)  # the constraint is over mesh_0
    assert check(facts, mesh, (), (("x", "y"),), constraints=same_names_other_mesh)[0].startswith("no sharding")
    swapped = (((other, ("Y", "X")), "{devices=[2,4]<=[8]}"),)
    assert "no sharding constraint [['Y'], ['X']]" in check(facts, mesh, (), (("x", "y"),), constraints=swapped)[0]
    gspmd = {**facts, "constraints": [{"hlo": "{devices=[4,2]<=[8]}"}]}
    assert check(gspmd, mesh, (), (("x", "y"),), constraints=onto_other) == []
    assert check(gspmd, mesh, (), (("x", "y"),), constraints=swapped)


BIG = "psum_float32_32x32_mesh=16x16_partitioner={p}"
GATHER = "all_gather_float32_32x32_mesh=16x16_partitioner=shardy"
THREE_AXES = "psum_all_float32_8x128_mesh=4x8x8_partitioner=shardy"
SMALL = "psum_float32_4x8_mesh=2x4_partitioner=shardy"
ONTO_OTHER_MESH = "reshard_mesh_float32_256x256_axes=auto_mesh=16x16_partitioner={p}"
EXPLICIT_SMALL = "explicit_reshard_float32_8x8_axes=explicit_mesh=2x4_partitioner={p}"
EXPLICIT_BIG = "explicit_reduce_float32_256x256_axes=explicit_mesh=4x8x8_partitioner=gspmd"


@pytest.fixture(scope="module")
def clean() -> dict[str, dict[str, list]]:
    return sweep(",".join([BIG.format(p="shardy"), BIG.format(p="gspmd"), GATHER, THREE_AXES, SMALL,
                           ONTO_OTHER_MESH.format(p="shardy"), ONTO_OTHER_MESH.format(p="gspmd"),
                           EXPLICIT_SMALL.format(p="shardy"), EXPLICIT_SMALL.format(p="gspmd"), EXPLICIT_BIG]))


def test_reshards_between_meshes_and_explicit_axes_lower_and_check_everywhere(clean) -> None:
    names = [ONTO_OTHER_MESH.format(p="shardy"), ONTO_OTHER_MESH.format(p="gspmd"), EXPLICIT_BIG,
             EXPLICIT_SMALL.format(p="shardy"), EXPLICIT_SMALL.format(p="gspmd")]
    for name in names:
        recs = next(v for k, v in clean.items() if k.endswith(name))
        for p in ("cpu", "cuda", "rocm", "tpu", "export"):
            assert status(recs, f"sharding/{p}") == "ok", (name, p, recs[f"sharding/{p}"])
    for part in ("shardy", "gspmd"):  # the explicit 2x4 mesh fits the host: it runs and matches
        recs = next(v for k, v in clean.items() if k.endswith(EXPLICIT_SMALL.format(p=part)))
        assert status(recs, "execute/cpu") == "ok" and status(recs, "compare/cpu") == "ok"


def test_a_256_device_mesh_lowers_exports_and_checks_on_every_platform(clean) -> None:
    for part in ("shardy", "gspmd"):
        recs = next(v for k, v in clean.items() if k.endswith(BIG.format(p=part)))
        for p in ("cpu", "cuda", "rocm", "tpu", "export"):
            assert status(recs, f"sharding/{p}") == "ok", (part, p, recs[f"sharding/{p}"])
        assert status(recs, "export/export") == "ok"
        assert status(recs, "execute/cpu") == "not_runnable_here"  # only execution needs the devices
        assert "compare/cpu" not in recs
    three = next(v for k, v in clean.items() if k.endswith(THREE_AXES))
    assert all(status(three, f"sharding/{p}") == "ok" for p in ("cpu", "tpu", "export"))


def test_a_mesh_that_fits_the_host_also_runs_and_matches_the_reference(clean) -> None:
    recs = next(v for k, v in clean.items() if k.endswith(SMALL))
    assert status(recs, "sharding/cpu") == "ok" and status(recs, "execute/cpu") == "ok"
    assert status(recs, "compare/cpu") == "ok"
    assert status(recs, "crossexec/tpu") == "ok"


def test_planted_wrong_replica_groups_are_caught_on_a_mesh_too_large_to_run(clean) -> None:
    planted = sweep(",".join([BIG.format(p="shardy"), GATHER]), plant="wrong_groups:allreduce")
    recs = next(v for k, v in planted.items() if k.endswith(BIG.format(p="shardy")))
    for p in ("cpu", "cuda", "rocm", "tpu"):
        assert status(recs, f"sharding/{p}") == "fail"
        assert "are not the groups of axes ('x',)" in recs[f"sharding/{p}"][1]
    assert status(recs, "execute/cpu") == "not_runnable_here"  # nothing else could have seen it
    gather = next(v for k, v in planted.items() if k.endswith(GATHER))  # all_gather's rule is not changed
    assert status(gather, "sharding/cpu") == "ok"


def test_mesh_harnesses_are_data() -> None:
    hs = catalog.select(catalog.Filters.parse(family="sharding"))
    sizes = {h.devices for h in hs}
    assert {2, 8, 32, 128, 256} <= sizes
    assert {h.partitioner for h in hs} == {"shardy", "gspmd"}
    assert all(h.mesh and h.in_specs for h in hs)
    assert any(len(h.mesh) == 3 and h.devices == 256 for h in hs)


def test_groups_named_by_mesh_axes_are_read_through_the_modules_mesh() -> None:
    """jax 0.12 with Shardy writes a collective's groups as mesh axes
    (``#stablehlo.replica_group_mesh_axes``) instead of listing them: the stage reads them
    through the module's own ``sdy.mesh``, so a collective over the wrong axis still differs
    from the harness's groups, and an axis or mesh the module does not declare is an error."""
    from farm.stages.sharding import _groups

    class Attr:
        def __init__(self, text: str) -> None:
            self.text = text

        def __str__(self) -> str:
            return self.text

    def attr(mesh: str, *axes: str) -> Attr:
        refs = ", ".join(f'#stablehlo.axis_ref<name = "{a}">' for a in axes)
        return Attr(f"#stablehlo.replica_group_mesh_axes<mesh = @{mesh}, axes = [{refs}]>")

    meshes = {"mesh_0": [["x", 2], ["y", 4]]}
    got = _groups(attr("mesh_0", "x"), None, meshes, "replica_groups")
    assert got == {"replica_groups": expected_groups((("x", 2), ("y", 4)), ("x",)),
                   "mesh_axes": {"mesh": "mesh_0", "axes": ["x"]}}
    assert got["replica_groups"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    facts = {"num_partitions": 8, "num_replicas": 1, "args": [], "constraints": [],
             "collectives": [{"op": "all_reduce", **_groups(attr("mesh_0", "y"), None, meshes, "replica_groups")}]}
    assert any("are not the groups of axes ('x',)" in p for p in check(facts, (("x", 2), ("y", 4)), ("x",), ()))
    with pytest.raises(ValueError, match="does not declare"):
        _groups(attr("mesh_9", "x"), None, meshes, "replica_groups")
    with pytest.raises(ValueError, match="lacks"):
        _groups(attr("mesh_0", "z"), None, meshes, "replica_groups")


def test_check_options_this_xla_refuses_are_left_out(monkeypatch) -> None:  # noqa: ANN001
    """jaxlib 0.12's XLA has no xla_cpu_use_fusion_emitters: the check stages compile without
    the option it refuses (and only that one), and say which options they used."""
    import jax
    import numpy as np

    from farm.stages import compile as comp

    monkeypatch.setattr(comp, "_UNKNOWN_OPTIONS", set())
    monkeypatch.setattr(comp, "_CHECKED", type(comp._CHECKED)())
    lowered = jax.jit(lambda x: x + 1).lower(np.ones(3, np.float32))
    # asked of this XLA once: what it names, it takes
    monkeypatch.setattr(comp, "_PROBED", False)
    assert lowered.compile(compiler_options=comp.check_options()) is not None
    # a refusal met while compiling (no probe before it) is learned there too
    monkeypatch.setattr(comp, "_UNKNOWN_OPTIONS", set())
    monkeypatch.setattr(comp, "_PROBED", True)
    seen = []

    class Refusing:
        args_info, in_tree = lowered.args_info, lowered.in_tree

        def compile(self, compiler_options=None):  # noqa: ANN001, ANN201
            seen.append(dict(compiler_options or {}))
            if "xla_cpu_use_fusion_emitters" in (compiler_options or {}):
                raise RuntimeError("INVALID_ARGUMENT: No such compile option: 'xla_cpu_use_fusion_emitters'")
            return lowered.compile(compiler_options=compiler_options)

    exe = comp._executable(Refusing(), b"module")
    assert list(np.asarray(exe(np.ones(3, np.float32)))) == [2.0, 2.0, 2.0]
    assert "xla_cpu_use_fusion_emitters" in seen[0] and "xla_cpu_use_fusion_emitters" not in seen[1]
    assert comp.check_options() == {k: v for k, v in comp.CHECK_OPTIONS.items() if k != "xla_cpu_use_fusion_emitters"}

    class Broken(Refusing):
        def compile(self, compiler_options=None):  # noqa: ANN001, ANN201
            raise RuntimeError("INVALID_ARGUMENT: No such compile option: 'xla_something_else'")

    with pytest.raises(RuntimeError, match="xla_something_else"):  # not one of ours: raised
        comp._executable(Broken(), b"other module")


def test_a_jax_without_the_mesh_api_skips_the_harness_with_the_reason(monkeypatch) -> None:  # noqa: ANN001
    """jax 0.5.3 has no jax.sharding.use_abstract_mesh: a sharded harness whose mesh is larger
    than this host is ``skipped`` saying so (it was the farm's own AttributeError at trace), and
    one whose mesh fits is skipped only when jax.set_mesh is missing."""
    import jax

    from farm.pipeline import harness as pipeline_harness
    from farm.pipeline import run_harness
    from farm.results import Options

    hs = [h for h in catalog.select(catalog.Filters.parse(family="sharding")) if h.mesh]
    small = min(hs, key=lambda h: h.devices)
    big = max(hs, key=lambda h: h.devices)
    have = jax.device_count()  # what this process's jax sees (an earlier test in it may have set it)
    assert big.devices > have
    monkeypatch.delattr(jax.sharding, "use_abstract_mesh")
    out = run_harness(big, Options(platforms=("cpu",)))
    assert [(r.stage, r.status, r.error_type) for r in out.records] == [("trace", "skipped", "NotInThisJax")]
    assert "has no jax.sharding.use_abstract_mesh" in out.records[0].error and out.worst == "skipped"
    if small.devices <= have:  # a mesh that fits needs only jax.set_mesh
        assert run_harness(small, Options(platforms=("cpu",))).records[0].status == "ok"
    monkeypatch.setattr(pipeline_harness, "_device_count", lambda: small.devices)  # fits, whatever jax sees
    monkeypatch.delattr(jax, "set_mesh")
    out = run_harness(small, Options(platforms=("cpu",)))
    assert out.records[0].status == "skipped" and "has no jax.set_mesh" in out.records[0].error
