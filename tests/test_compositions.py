"""The compositions check (``--compositions``, ``farm.pipeline.compositions``): a harness's
deserialized export inside jit with shardings, vmap, grad, scan, cond, while, a nested export and
with donated arguments, each against its own call; a planted batching rule wrong only under vmap
of an exported call is caught, and nothing is flagged without it."""
from __future__ import annotations

import numpy as np
import pytest

from farm import catalog
from farm.judge.compositions import REFUSALS
from farm.pipeline import run_harness
from farm.pipeline.compositions import composed
from farm.results import Options
from farm.stages.compositions import COMPOSITIONS, KEY_IMPLS
from tests.helpers.fresh import run_json


SCRIPT = """
import json, os
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
from farm.faults import plant_from_env
plant_from_env()
from farm import catalog
from farm.pipeline import run_harness
from farm.results import Options
hs = catalog.load()
pick = [next(h for h in hs if h.name == "sin_float32_3x4"),
        next(h for h in hs if h.family == "sharding" and h.partitioner == "shardy" and h.devices == 8),
        next(h for h in hs if h.family == "sharding" and h.partitioner == "gspmd"),
        next(h for h in hs if h.family == "export_features" and "prng_key" in h.name)]
out = {}
for h in pick:
    recs = [r for r in run_harness(h, Options(compositions="all", repeats=1)).records if r.stage == "composition"]
    out[h.name] = {r.platform: [r.status, r.error] for r in recs}
    out[h.name]["shardings"] = next((r.facts.get("shardings") for r in recs if r.platform == "nested"), None)
print(json.dumps(out))
"""


def test_every_composition_runs_and_agrees_and_the_known_refusals_are_expected() -> None:
    got = run_json(SCRIPT)
    sin, shardy, gspmd, key = (dict(v) for v in got.values())
    nested = shardy.pop("shardings")
    for by in (sin, gspmd, key):
        by.pop("shardings")
    assert set(sin) == set(COMPOSITIONS)
    # a sharded artifact inside another export, itself called inside jit with the shardings: the
    # outer artifact says where its values live as the inner one does (not replicated)
    assert shardy["nested"][0] == "ok"
    assert nested["in"]["inner"] == nested["in"]["outer"] and "P(" in nested["in"]["inner"]
    for by in (sin, shardy, key):
        bad = {c: v for c, v in by.items() if v[0] not in ("ok", "expected_fail", "skipped")}
        assert bad == {}, bad
        assert by["vmap"][0] == "expected_fail"  # JAX has no batching rule for call_exported
        assert by["jit_sharded"][0] == by["scan"][0] == by["while"][0] == by["donated"][0] == "ok"
    assert sin["grad"][0] == "ok" and sin["nested"][0] == "ok"
    # typed keys of every implementation, in and out, through every composition (a key has no grad)
    for impl in KEY_IMPLS:
        assert {c: key[f"{c}:{impl}"][0] for c in COMPOSITIONS if c != "grad"} == \
            {c: "expected_fail" if c == "vmap" else "ok" for c in COMPOSITIONS if c != "grad"}, impl
    # the GSPMD artifact's own call inside jit with its shardings: the JAX bug, as data, and nothing composed
    assert gspmd["call"][0] == "expected_fail" and all(v[0] == "skipped" for c, v in gspmd.items() if c != "call")


def test_a_batching_rule_wrong_only_under_vmap_of_an_exported_call_is_caught() -> None:
    got = run_json(SCRIPT, "vmap_exported")
    sin, shardy, _, key = got.values()
    for by in (sin, shardy, key):
        by.pop("shardings")
        assert by["vmap"][0] == "fail" and "differ" in by["vmap"][1]
        assert all(v[0] in ("ok", "skipped") for c, v in by.items() if c.partition(":")[0] != "vmap")  # only vmap sees it
    assert all(key[f"vmap:{impl}"][0] == "fail" for impl in KEY_IMPLS)  # a typed key's batch too


def test_representative_takes_the_families_about_artifacts_and_one_harness_per_primitive() -> None:
    hs = catalog.load()
    picked = [h for h in hs if composed(h, "representative")]
    assert {h.name for h in hs if h.family in ("export_features", "sharding")} <= {h.name for h in picked}
    others = [h for h in picked if h.family not in ("export_features", "sharding")]
    assert len({h.primitive for h in others}) == len(others)  # one per primitive
    assert {h.primitive for h in picked} == {h.primitive for h in hs}  # every primitive at least once
    assert not any(composed(h, "off") for h in hs[:50]) and all(composed(h, "all") for h in hs[:50])
    assert "compositions" not in Options().to_dict() and "compositions" not in Options().key_fields()
    with pytest.raises(ValueError, match="compositions"):
        Options(compositions="some")


def test_a_refusal_explains_only_its_own_error() -> None:
    vmap = next(lim for lim in REFUSALS if lim.platforms == ("vmap",))
    assert vmap.expects("error", "NotImplementedError", "Batching rule for 'call_exported' not implemented")
    assert not vmap.expects("error", "ValueError", "something else went wrong")
    assert not vmap.applies("scan", "float32")


def test_a_nested_export_that_moves_a_sharding_is_a_fail_showing_both() -> None:
    from farm.judge.compositions import composition
    from farm.results import Record

    h = next(h for h in catalog.load() if h.family == "sharding" and h.partitioner == "shardy")
    x = [np.ones(3, np.float32)]
    kept = {"in": {"inner": "[P('x', 'y')]", "outer": "[P('x', 'y')]"}, "out": {"inner": "[None]", "outer": "[None]"}}
    assert composition(h, Record("composition", "nested", "ok", handle=(x, x), facts={"shardings": kept})).status == "ok"
    moved = {**kept, "in": {"inner": "[P('x', 'y')]", "outer": "[P(None, None)]"}}
    rec = composition(h, Record("composition", "nested", "ok", handle=(x, x), facts={"shardings": moved}))
    assert rec.status == "fail" and "P('x', 'y')" in rec.error and "P(None, None)" in rec.error


@pytest.mark.parametrize("together", [True, False])
def test_grad_in_one_program_still_sees_an_artifact_whose_gradient_differs(monkeypatch, together: bool) -> None:  # noqa: ANN001
    """``grad`` compiles the artifact's gradient and the function's own in one program where it
    may (``_together_safe``): a vjp that differs from the function's (here the artifact of 2 sin
    under sin's name) fails either way, and an honest one passes either way."""
    import jax
    from jax import export

    from farm.judge import compositions as judge
    from farm.stages import compositions as stage

    monkeypatch.setattr(stage, "_together_safe", lambda exported: together)
    h = next(h for h in catalog.load() if h.name == "sin_float32_3x4")
    x = [np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)]

    def artifact(f):  # noqa: ANN001, ANN202
        return export.deserialize(bytearray(export.export(jax.jit(f), platforms=("cpu",))(*x).serialize(vjp_order=1)))

    own = artifact(jax.numpy.sin)
    plain = own.call(*x)
    for vjp, want in ((own, "ok"), (artifact(lambda a: 2 * jax.numpy.sin(a)), "fail")):
        rec = stage.run("grad", own, x, plain, h, jax.jit(jax.numpy.sin), lambda vjp=vjp: vjp)
        assert judge.composition(h, rec).status == want, (together, rec.status, rec.error)
