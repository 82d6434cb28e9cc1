"""The effects family and its ``effects_export`` stage (docs/effects.md): what JAX refuses
and the bug it has, what the callbacks printed and received, the branch each platform's
artifact takes, and a sweep through Ray storing it all."""
from __future__ import annotations

import dataclasses

import pytest

from farm import catalog
from farm.catalog import Harness
from farm.pipeline.effects import run_effects

MULTI = ("cpu+cuda+rocm+tpu", "cpu+cuda")
SINGLE = ("cpu", "cuda", "rocm", "tpu")


def _one(variant: str) -> Harness:
    hs = [h for h in catalog.select(catalog.Filters.parse(family="effects")) if dict(h.key.params)["variant"] == variant]
    assert len(hs) == 1, [h.name for h in hs]
    return hs[0]


def _by_platform(h: Harness) -> dict[str, object]:
    return {r.platform: r for r in run_effects(h, h.make_args())}


def test_the_debug_print_type_error_is_found_on_multi_platform_exports_not_on_cpu_alone() -> None:
    """The stage finds the TypeError by itself (no limitation applied yet) on the
    four-platform and cpu+cuda exports; cpu alone is JAX's clean refusal at export time;
    the limitation naming the finding turns it into expected_fail, and without it the bug
    is an error."""
    from farm.pipeline import run_harness
    from farm.results import Options

    h = _one("print")
    raw = _by_platform(h)
    for label in MULTI:
        assert raw[label].status == "error" and raw[label].error_type == "TypeError", raw[label]
        assert "can only concatenate list" in raw[label].error and raw[label].facts["failed_at"] == "export"
    assert raw["cpu"].error_type == "NotImplementedError" and raw["cpu"].facts["failed_at"] == "export"
    assert "serialization of host_callbacks" in raw["cpu"].error
    assert all(raw[p].status == "not_runnable_here" for p in ("cuda", "rocm", "tpu"))  # no such backend here

    judged = {r.platform: r for r in run_harness(h, Options(repeats=1)).records if r.stage == "effects_export"}
    for label in MULTI:
        assert judged[label].status == "expected_fail" and "findings.md" in judged[label].facts["limitation"]
    assert judged["native"].status == "ok"
    bare = dataclasses.replace(h, limitations=())
    plain = {r.platform: r.status for r in run_harness(bare, Options(repeats=1)).records
             if r.stage == "effects_export"}
    assert all(plain[label] == "error" for label in MULTI)


def test_python_callbacks_are_refused_by_jax_with_its_own_errors() -> None:
    """io_callback and pure_callback: JAX refuses multi-platform lowering; no TypeError."""
    raw = _by_platform(_one("pure"))
    assert all("multi-platform lowering for python_callback" in raw[label].error for label in MULTI)
    assert raw["cpu"].error_type == "NotImplementedError"


def test_printed_values_and_the_order_of_ordered_effects_are_checked() -> None:
    """What jax.debug.print wrote and what the callbacks received, in order, pass as
    declared; a planted wrong value or wrong order fails; an unordered callback is a multiset."""
    printing = _one("print")
    got = _by_platform(printing)["native"]
    assert got.status == "ok" and got.facts["observed"]["native"]["printed"] == ["x=[0. 1. 2.] sum=3.0"]
    wrong_value = dataclasses.replace(printing, effects=dataclasses.replace(
        printing.effects, printed=("x=[0. 1. 3.] sum=4.0",)))
    rec = _by_platform(wrong_value)["native"]
    assert rec.status == "fail" and "printed" in rec.error

    seq = _one("ordered_sequence")
    got = _by_platform(seq)["native"]
    assert got.status == "ok"
    assert [tag for tag, _ in got.facts["observed"]["native"]["calls"]] == ["third", "first", "second"]
    calls = seq.effects.calls
    reordered = dataclasses.replace(seq, effects=dataclasses.replace(seq.effects, calls=(calls[1], calls[0], calls[2])))
    rec = _by_platform(reordered)["native"]
    assert rec.status == "fail" and "in this order" in rec.error
    wrong = ((calls[0][0], (9.0, 9.0, 9.0)), *calls[1:])
    assert _by_platform(dataclasses.replace(seq, effects=dataclasses.replace(seq.effects, calls=wrong)))[
        "native"].status == "fail"

    unordered = _one("unordered")
    doubled = dataclasses.replace(unordered, effects=dataclasses.replace(
        unordered.effects, calls=unordered.effects.calls * 2))
    assert _by_platform(unordered)["native"].status == "ok"
    assert _by_platform(doubled)["native"].status == "fail"  # a multiset still counts the calls


def test_platform_dependent_takes_each_platforms_branch() -> None:
    """Each platform's module relabelled for the CPU, the multi-platform artifacts with the
    cpu's place swapped, and their deserialized copies each take that platform's branch; a
    planted swap of two branches fails naming the branch taken."""
    h = _one("branches")
    recs = _by_platform(h)
    assert {p: r.status for p, r in recs.items()} == {p: "ok" for p in ("native", *MULTI, *SINGLE)}
    for k, p in enumerate(SINGLE, 1):
        want = [float(v + k) for v in range(3)]
        if p != "cpu":
            for name in ("relabelled", "deserialized relabelled"):
                seen = recs[p].facts["observed"][name]
                assert seen["branch"] == p and seen["outputs"] == [want]
            assert recs["cpu+cuda+rocm+tpu"].facts["observed"][f"as {p}"]["outputs"] == [want]
        else:
            assert recs["cpu+cuda+rocm+tpu"].facts["observed"]["deserialized exported"]["outputs"] == [want]
    swapped = dataclasses.replace(h, effects=dataclasses.replace(h.effects, branches={
        **h.effects.branches, "cuda": h.effects.branches["tpu"], "tpu": h.effects.branches["cuda"]}))
    bad = _by_platform(swapped)
    assert bad["cuda"].status == "fail" and "the tpu branch" in bad["cuda"].error  # as the plant says
    assert bad["rocm"].status == "ok"


@pytest.mark.filterwarnings("ignore")
def test_farm_sweep_family_effects_on_ray_stores_the_stage(tmp_path, ray_local, capsys) -> None:  # noqa: ANN001
    """`farm sweep --family effects` through Ray: clean (exit 0), every configuration's
    record stored, the finding an expected_fail."""
    from farm.cli import main
    from farm.store import open_store, queries

    db = f"sqlite:///{tmp_path / 'farm.db'}"
    assert main(["sweep", "--db", db, "--family", "effects", "--workers", "2", "--format", "json"]) == 0
    capsys.readouterr()
    store = open_store(db)
    with store.session() as s:
        rows = queries.results(s, queries.resolve_run(s, "latest").id)
    got = {(x["harness"], x["stage"], x["platform"]): x["status"] for x in rows}
    hs = catalog.select(catalog.Filters.parse(family="effects"))
    for h in hs:
        assert {p for (n, st, p) in got if n == h.name and st == "effects_export"} == {"native", *MULTI, *SINGLE}
        assert got[(h.name, "effects_export", "native")] == "ok"
    assert got[(_one("print").name, "effects_export", "cpu+cuda+rocm+tpu")] == "expected_fail"
    assert all(got[(_one("branches").name, "effects_export", p)] == "ok" for p in (*MULTI, *SINGLE))
    assert not [k for k, v in got.items() if v in ("fail", "error", "crashed", "timeout", "unexpected_pass")]


def test_effects_harnesses_have_no_symbolic_variant_and_say_why() -> None:
    """vmap over a callback is another program (pure_callback refuses it without a
    vmap_method): the symbolic variant is skipped with its reason, counted, not a false fail."""
    from farm.pipeline.symbolic import run_symbolic

    for variant in ("pure", "print", "ordered"):
        (rec,) = run_symbolic(_one(variant))
        assert rec.status == "skipped" and "side effects" in rec.facts["reason"]
