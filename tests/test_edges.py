"""The edge-values check (``--edges``, farm.pipeline.edges): each operand at its dtype's edge
values, then all together, judged against the float64 jaxpr reference; what JAX and SciPy
choose differently is data (conventions, taken out of the variant), JAX's known bugs are data
(findings: the variant must fail with their elements and pass without them)."""
from __future__ import annotations

import numpy as np
import pytest

from farm import catalog
from farm.catalog import known, special
from farm.pipeline import run_harness
from farm.pipeline.edges import chosen
from farm.results import Options
from farm.stages import edges


def _one(name: str) -> catalog.Harness:
    return catalog.select(catalog.Filters.parse(name=name))[0]


def _edges(h: catalog.Harness) -> dict[str, tuple[str, str | None, dict]]:
    o = run_harness(h, Options(platforms=("cpu",), repeats=1, edges="all"))
    return {r.platform: (r.status, r.error, dict(r.facts)) for r in o.records if r.stage == "edge_values"}


def test_variants_fill_each_operand_then_all_with_every_edge_value() -> None:
    x, n = np.zeros((3, 4), np.float32), np.zeros(5, np.int32)
    vs = dict(edges.variants([x, n, np.zeros(3, bool)]))
    # bool has no edge values; 19 float values take two turns of 12 elements, 11 integer ones three of 5
    assert list(vs) == ["arg0", "arg0@12", "arg1", "arg1@5", "arg1@10", "all", "all@5", "all@10"]
    assert set(np.concatenate([vs["arg0"][0], vs["arg0@12"][0]]).ravel().view(np.uint32).tolist()) >= \
        set(special.values("float32").view(np.uint32).tolist())  # every value met, NaN and -0 included
    got = vs["arg0"][0]
    assert np.isnan(got).any() and np.isinf(got).any() and (got == np.finfo(np.float32).max).any()
    assert (np.signbit(got) & (got == 0)).any()  # -0
    assert (vs["arg0"][1] == 0).all()  # the other operand as drawn
    met = np.concatenate([vs[k][1] for k in ("arg1", "arg1@5", "arg1@10")])
    assert np.iinfo(np.int32).min in met and np.iinfo(np.int32).max in met
    assert not np.array_equal(vs["all"][0], vs["arg0"][0])  # together, in other combinations


def test_a_clean_primitive_passes_every_variant() -> None:
    got = _edges(_one("atan2_float32_3x4_3x4"))
    assert {"arg0", "arg0@12", "arg1", "arg1@12", "all", "all@12"} == set(got)
    assert all(s == "ok" for s, _, _ in got.values()), got


def test_a_known_jax_bug_is_the_expected_failure_and_nothing_else_is_excused() -> None:
    """zeta(s, inf) is NaN (jax-ml/jax#38637): the variant fails with those elements, passes
    without them; the conventions (q <= 0) are taken out before it runs."""
    got = _edges(_one("zeta_float32_3x4_3x4"))
    status, _, facts = got["arg1"]
    assert status == "expected_fail" and "38637" in facts["limitation"] and facts["covered"] >= 1
    assert facts["excused"] >= 1  # q <= 0: outside the domain JAX implements


def test_a_finding_that_does_not_show_leaves_the_variant_ok_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """A finding over elements JAX gets right (add at x = 0, as if it were a bug) explains
    nothing: the variant is ok, and says the finding was not seen there."""
    fake = known.EdgeValue("add", "a pretend bug at y = 0", lambda x, y: x == 0, finding=True)
    monkeypatch.setattr(known, "EDGE_VALUES", known.EDGE_VALUES + (fake,))
    status, _, facts = _edges(_one("add_float32_3x4_3x4"))["arg0"]
    assert status == "ok" and facts["finding_not_seen"] == "a pretend bug at y = 0" and facts["covered"] >= 1


def test_a_finding_never_excuses_another_wrong_element(monkeypatch: pytest.MonkeyPatch) -> None:
    """zeta's finding covers q = inf; planted beside it, a wrong convention taken away (q <= 0
    judged again): the variant still fails, naming both errors."""
    monkeypatch.setattr(known, "EDGE_VALUES", tuple(e for e in known.EDGE_VALUES
                                                    if not (e.primitive == "zeta" and not e.finding)))
    status, error, _ = _edges(_one("zeta_float32_3x4_3x4"))["arg1"]
    assert status == "fail" and "without the" in error and "known finding" in error


@pytest.mark.slow(reason="runs each finding's standalone reproducer in a fresh interpreter (~2 s each)")
def test_every_edge_finding_still_reproduces_standalone() -> None:
    """Each finding names its repro (docs/repros); it exits 1 while JAX is wrong. One that exits
    0 on the installed jax is stale data: remove the finding (or bound it with ``jax=``)."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    scripts = sorted({m for e in known.EDGE_VALUES + known.API_EDGE_VALUES + known.STATS_EDGE_VALUES
                      if e.finding and known.holds_on(e.jax)
                      for m in re.findall(r"docs/repros/\w+\.py", e.description)})
    assert len(scripts) >= 5
    for script in scripts:
        p = subprocess.run([sys.executable, script], cwd=root, capture_output=True, text=True, timeout=120)
        assert p.returncode == 1, (script, p.stdout[-800:], p.stderr[-800:])


def test_a_wrong_answer_at_an_edge_value_is_a_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the zeta finding's data removed, its NaN at q = inf is a plain fail: nothing else hides it."""
    monkeypatch.setattr(known, "EDGE_VALUES", tuple(e for e in known.EDGE_VALUES if not (e.primitive == "zeta"
                                                                                          and e.finding)))
    got = _edges(_one("zeta_float32_3x4_3x4"))
    assert got["arg1"][0] == "fail" and "differ from the float64 reference" in got["arg1"][1]


def test_an_accumulation_over_overflowing_values_has_no_unique_answer() -> None:
    from farm.judge.edges import _unanswerable

    x = np.ones((2, 2), np.float32)
    got = _unanswerable(_jaxpr(lambda a, b: a @ b, x, x), [np.array([[np.inf, 1], [1, 1]], np.float32), x])
    assert got is not None and "order" in got
    assert _unanswerable(_jaxpr(lambda a, b: a @ b, x, x), [x, x]) is None  # finite: judged as ever
    assert _unanswerable(_jaxpr(lambda a, b: a + b, x, x), [x * np.inf, x]) is None  # elementwise: one answer


def _jaxpr(f, *args):  # noqa: ANN001, ANN202
    import jax

    return jax.make_jaxpr(f)(*args)


def test_restored_puts_back_only_the_covered_elements() -> None:
    drawn = [np.arange(4, dtype=np.float32), np.ones(4, np.float32)]
    edge = [np.array([np.inf, 0, -1, 2], np.float32), np.full(4, np.nan, np.float32)]
    out, n = edges.restored(edge, drawn, [lambda a, b: a == np.inf, lambda a, b: a < 0])
    assert n == 2 and out[0].tolist()[1:2] == [0] and out[0][0] == 0 and out[0][2] == 2
    assert np.isnan(out[1][1]) and out[1][0] == 1  # every operand of a covered element
    # a scalar fed to every element of a matrix is put back where any element it feeds is covered
    out, n = edges.restored([np.float32(5), np.array([[1, np.inf], [2, 3]], np.float32)],
                            [np.float32(0), np.zeros((2, 2), np.float32)], [lambda a, b: np.isinf(b)])
    assert n == 1 and out[0] == 0 and out[1].tolist() == [[1, 0], [2, 3]]


def test_representative_takes_one_harness_per_primitive_and_never_the_special_value_ones() -> None:
    hs = catalog.load()
    picked = [h for h in hs if chosen(h, "representative")]
    assert len({h.primitive for h in picked}) == len(picked)
    assert not any(h.key.group == "special_values" for h in hs if chosen(h, "all"))
    assert not any(chosen(h, "off") for h in hs[:50])
    assert "edges" not in Options().to_dict() and "edges" not in Options().key_fields()
    with pytest.raises(ValueError, match="edges"):
        Options(edges="some")
