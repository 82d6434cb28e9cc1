"""farm fuzz: cases drawn from a seed, valid, run as a run of kind fuzz; a planted
shape-dependent fault found and shrunk, and a clean run of the same cases finding nothing."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from farm.catalog.cases import Case, define_case
from farm.cli import main
from farm.fuzz import generate, strategies
from farm.fuzz.campaign import Plan, draw
from farm.fuzz.probe import Probe
from farm.fuzz.shrink import shrink, signatures
from farm.fuzz.worker_catalog import define
from farm.results import BAD, Options, Outcome, Record

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLANT = "odd_reduction:reduce_sum"


def test_the_same_seed_draws_the_same_cases_and_another_seed_others() -> None:
    plan = Plan.parse(None, None, None, seed=3, cases=25, per_round=5)
    a, b = draw(plan), draw(plan)
    assert [h.fingerprint for h in a.harnesses] == [h.fingerprint for h in b.harnesses]
    assert len(a.harnesses) == 25 and len({h.fingerprint for h in a.harnesses}) == 25  # duplicates dropped
    assert {a.cases[h.fingerprint].family for h in a.harnesses[:5]} == set(strategies.FAMILIES)  # interleaved
    other = draw(dataclasses.replace(plan, seed=4))
    assert [h.fingerprint for h in other.harnesses] != [h.fingerprint for h in a.harnesses]


def test_drawn_cases_are_valid_programs() -> None:
    """Every family's cases trace (shapes, axes, padding, dimension numbers agree)."""
    for fam in strategies.FAMILIES:
        for c in generate.draw_round(strategies.cases([fam], strategies.DEFAULT_DTYPES), 11, 0, 15) + [
                Case(fam, p, "int32", ((3,),) * (1 + (fam == "elementwise_binary")), (("bcast", None), ("op", p)))
                for p in strategies.FAMILIES[fam][1] if fam.startswith("elementwise")]:
            h = define_case(c, catalog="fuzz_test")
            args = h.make_args()
            statics = h.static_argnums()
            dyn = [a for i, a in enumerate(args) if i not in statics]
            assert [tuple(np.shape(a)) for a in dyn] == [tuple(s) for s in c.shapes], h.name
            jax.eval_shape(lambda *d, h=h, args=args: _call(h, args, d), *dyn)


def _call(h, args, dyn):  # noqa: ANN001, ANN202
    it = iter(dyn)
    return h.fun(*[a if i in h.static_argnums() else next(it) for i, a in enumerate(args)])


def test_a_case_is_its_data_every_field_changes_the_harness() -> None:
    """Cases are deduplicated by fingerprint: no field may be left out of it."""
    base = Case("reduction", "reduce_sum", "float32", ((17, 3),), (("axes", (0,)), ("op", "reduce_sum")))
    fps = {define_case(base, catalog="fuzz_test").fingerprint}
    for change in (dict(dtype="float16"), dict(shapes=((19, 3),)), dict(params=(("axes", (1,)), ("op", "reduce_sum"))),
                   dict(values="special", density=0.5), dict(values="special", density=0.1), dict(seed=1)):
        fps.add(define_case(dataclasses.replace(base, **change), catalog="fuzz_test").fingerprint)
    assert len(fps) == 7
    assert Case.from_dict(json.loads(base.to_json())) == base


def test_special_values_land_where_asked() -> None:
    c = Case("elementwise_unary", "sin", "float32", ((64,),), (("op", "sin"),), "special", 0.5)
    x = define_case(c, catalog="fuzz_test").make_args()[0]
    assert x.shape == (64,) and not np.isfinite(x).all() and np.isfinite(x).any()


_PLANTED = """
import numpy as np, jax
from jax import lax
from farm.faults import plant_from_env
plant_from_env()
f = lambda x: lax.reduce_sum(x, (0,))
print([float(jax.jit(f)(np.ones((n, 2), np.float32))[0]) for n in (16, 17, 18, 19, 15)])
"""


def test_planted_fault_depends_on_the_reduced_axis_length() -> None:
    env = {**os.environ, "FARM_PLANT": PLANT, "PYTHONPATH": ROOT}
    p = subprocess.run([sys.executable, "-c", _PLANTED], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[0] == "[16.0, 16.0, 18.0, 18.0, 15.0]"  # odd and > 16: one element short


def _odd_long_axis(c: Case) -> bool:
    return c.primitive == "reduce_sum" and any(c.shapes[0][a] % 2 and c.shapes[0][a] > 16 for a in c.param("axes"))


def _oracle(c: Case) -> Outcome:
    """What the planted fault does to a case's compare record, computed from the case alone:
    a cheap stand-in for the pipeline to test the replay and shrinking (the slow test runs it all)."""
    bad = _odd_long_axis(c)
    return Outcome("fp", "name", (Record("compare", "cpu", "fail" if bad else "ok", error_type="Mismatch" if bad else None,
                                         error="output 0: 3 of 3 elements differ" if bad else None),))


def test_shrinking_replays_the_round_and_reaches_the_smallest_failing_case() -> None:
    plan = Plan.parse("reduction", "float32,int32", "reduce_sum", seed=5, per_round=25)
    rounds = [(r, c) for r in range(6) for c in generate.draw_round(plan.strategy(r), plan.seed, r, plan.per_round)]
    r, first = next((r, c) for r, c in rounds if _odd_long_axis(c))
    key = define_case(first, catalog="fuzz_test").fingerprint
    known = {define_case(c, catalog="fuzz_test").fingerprint: _oracle(c) for _, c in rounds}
    target = next(iter(signatures(known[key], "reduce_sum")))
    ran: list[Case] = []
    res = shrink(plan.strategy(r), plan.seed, r, plan.per_round, target, known,
                 lambda c: ran.append(c) or _oracle(c), lambda c: define_case(c, catalog="fuzz_test").fingerprint,
                 max_runs=500)
    assert res.steps[0] == first  # the replay met the campaign's own case first, answered without running it
    assert first not in ran
    assert res.case is not None and _odd_long_axis(res.case)
    assert res.case.shapes == ((17,),) and res.case.values == "normal", res.case  # the smallest that fails
    assert res.runs == len(ran) > 0


@pytest.mark.slow(reason="a fuzz campaign and its shrinking, with and without the planted fault")
def test_campaign_finds_and_shrinks_the_planted_fault_and_without_it_the_case_passes(tmp_path, monkeypatch,
                                                                                     capsys) -> None:  # noqa: ANN001
    db = f"sqlite:///{tmp_path / 'f.db'}"
    found = tmp_path / "found"
    argv = ["fuzz", "--primitive", "reduce_sum", "--dtype", "int32", "--seed", "2", "--cases", "8", "--budget", "600s",
            "--workers", "1", "--db", db, "--found", str(found), "--format", "json"]
    monkeypatch.setenv("FARM_PLANT", PLANT)
    assert main(argv + ["--name", "planted"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["cases"] == 8 and res["bad"] >= 1
    assert res["per_stage"] == {"compare": res["bad"]}
    kept = [json.loads(p.read_text()) for p in found.glob("*.json")]
    assert len(kept) == 1 and kept[0]["signature"]["primitives"] == ["reduce_sum"]
    case = Case.from_dict(kept[0]["case"])
    original = Case.from_dict(kept[0]["original"])
    assert _odd_long_axis(case) and len(case.shapes[0]) == 1, case  # shrunk, and still what the fault needs
    assert strategies_size(case) <= strategies_size(original)
    assert kept[0]["found_with"]["seed"] == 2 and (found / ".hypothesis").is_dir()

    assert main(["runs", "--db", db, "--format", "json"]) == 0  # the store's readers see the run
    runs = json.loads(capsys.readouterr().out)
    assert [(r["name"], r["kind"], r["done"]) for r in runs] == [("planted", "fuzz", 8)]
    assert main(["triage", "planted", "--db", db, "--format", "json"]) == 0
    assert "reduce_sum" in capsys.readouterr().out

    # without the plant, the same pipeline passes the kept case and the case it came from
    monkeypatch.delenv("FARM_PLANT")
    probe = Probe(Options(repeats=1))
    try:
        for c in (case, original):
            h = define(c)
            o = probe.run(c, h.name, h.fingerprint)
            assert not [r for r in o.records if r.status in BAD], o
    finally:
        probe.close()


def strategies_size(c: Case) -> int:
    return sum(int(np.prod(s)) for s in c.shapes)


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min", "reduce_and", "reduce_or", "reduce_xor"])
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "bool"])
def test_reference_reduces_over_a_zero_sized_axis(op: str, dtype: str) -> None:
    """Found by fuzzing: the reference raised on an empty reduction; now it gives the identity
    jax gives (and a wrong identity is still a mismatch)."""
    from jax import lax

    from farm.judge.jaxpr import judge_jaxpr as judge

    if op in ("reduce_and", "reduce_or", "reduce_xor") and dtype == "float32":
        pytest.skip("bitwise reductions take integers and bools")
    x = np.zeros((0, 3, 2), np.dtype(dtype))
    f = lambda v: getattr(lax, op)(v, (0, 2))  # noqa: E731
    got = np.asarray(jax.jit(f)(x))
    assert got.shape == (3,)
    assert judge(jax.make_jaxpr(f)(x), [x], [got]).status == "ok"
    wrong = np.logical_not(got) if dtype == "bool" else np.zeros_like(got) if dtype == "float32" else got + 1
    assert judge(jax.make_jaxpr(f)(x), [x], [wrong]).status == "fail"


def test_kept_findings_are_catalog_harnesses_that_expect_their_failure() -> None:
    """``harnesses/found/*.json`` (written by farm fuzz, copied by a user) are the farm
    catalog's ``found`` family, each with the Limitation of the failure it was found with."""
    from farm import catalog
    from farm.analysis.signatures import Signature
    from farm.fuzz.found import entry

    found = catalog.select(catalog.Filters(family=("found",)))
    files = sorted(p for p in os.listdir(os.path.join(ROOT, "harnesses", "found")) if p.endswith(".json"))
    assert len(found) == len(files) >= 1
    for h in found:
        assert h.catalog == "farm" and h.source.startswith("found/") and h.limitations
        d = json.load(open(os.path.join(ROOT, "harnesses", h.source)))
        assert h.limitations[0].stage == d["expect"]["stage"] and h.limitation("cpu", d["expect"]["stage"])
        case = Case.from_dict(d["case"])
        # what farm fuzz writes is what harnesses/found.py reads back
        again = entry(case, Signature.from_dict(d["signature"]), platforms=d["expect"]["platforms"], original=case,
                      campaign={}, jax_version="x", runs=0)
        assert Case.from_dict(again["case"]) == case and again["expect"]["stage"] == d["expect"]["stage"]


@pytest.mark.slow(reason="two fuzz campaigns, each on a local Ray cluster of its own: the plant is in its workers' environment")
def test_fuzzing_with_symbolic_shapes_draws_specs_from_the_cases_and_finds_a_symbolic_only_fault(
        tmp_path, monkeypatch, capsys) -> None:  # noqa: ANN001
    """--shapes symbolic: each drawn case is exported with its dimensions symbolic (specs
    derived from its drawn shape) and called at several sizes; a lowering rule wrong only
    for symbolic shapes is found, and the same cases without it are clean."""
    from farm.store import open_store, queries

    argv = ["fuzz", "--primitive", "sin", "--dtype", "float32", "--seed", "4", "--cases", "3", "--budget", "600s",
            "--workers", "1", "--shapes", "symbolic", "--no-shrink", "--found", str(tmp_path / "found"),
            "--format", "json"]
    monkeypatch.setenv("FARM_PLANT", "symbolic_only:sin:all")
    assert main(argv + ["--db", f"sqlite:///{tmp_path / 'p.db'}"]) == 0
    res = json.loads(capsys.readouterr().out)
    drawn = draw(Plan.parse(None, "float32", "sin", seed=4, cases=3)).harnesses
    nonempty = sum(all(np.prod(s) > 0 for s in h.key.shapes) for h in drawn)  # an empty array shows no wrong value
    assert nonempty >= 1 and res["cases"] == 3 and res["bad"] == nonempty
    assert set(res["per_stage"]) == {"symbolic_call"}
    monkeypatch.delenv("FARM_PLANT")
    assert main(argv + ["--db", f"sqlite:///{tmp_path / 'c.db'}"]) == 0
    assert json.loads(capsys.readouterr().out)["bad"] == 0
    store = open_store(f"sqlite:///{tmp_path / 'c.db'}")
    with store.session() as s:
        rows = [r for r in queries.results(s, 1) if r["stage"] == "symbolic_export"]
    specs = {tuple(r["facts"]["specs"]) for r in rows}
    assert len(specs) == 3 and all(sp[0].startswith("b") for sp in specs)  # one spec per drawn shape
