"""farm.analysis.shapes and triage's symbolic-only clusters: a failure seen only with
symbolic dimensions (the harness's static stages pass), or only in one platform's symbolic
lowering, is its own cluster, labelled so, never merged with a failure its static stages
share. The failures are real: sin's lowering planted wrong for symbolic shapes on every
platform, on tpu alone, and for every shape (``FARM_PLANT``), each run in its own process."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from farm.analysis import shapes
from farm.analysis.clusters import signed

ROOT = Path(__file__).resolve().parents[1]
PLANTS = {"all": "symbolic_only:sin:all", "tpu": "symbolic_only:sin:tpu", "static": "wrong_lowering:sin:all"}


def _outcome(plant: str) -> dict[str, Any]:
    """sin float32 at static and symbolic shapes, run as a worker runs it, under ``plant``."""
    code = ("import json\nfrom farm.faults import plant_from_env\nplant_from_env()\n"
            "from farm import catalog\nfrom farm.pipeline import run_harness\nfrom farm.results import Options\n"
            "h = catalog.select(catalog.Filters.parse(primitive='sin', dtype='float32'))[0]\n"
            "o = run_harness(h, Options(repeats=1, shapes=('static', 'symbolic')))\n"
            "d = o.to_dict()\nd['artifacts'] = []  # bytes: not JSON, and triage reads none\n"
            "print(json.dumps({'harness': h.describe(), 'outcome': d}, default=str))\n")
    env = {**os.environ, "FARM_PLANT": plant, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def planted_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One run per plant (named after it) in a SQLite file, written by the farm's own writer."""
    from farm.results import Outcome
    from farm.store import open_store, writes
    from tests.helpers.triage import ENV

    url = f"sqlite:///{tmp_path_factory.mktemp('symbolic-triage') / 'farm.db'}"
    store = open_store(url)
    for name, plant in PLANTS.items():
        got = _outcome(plant)
        with store.session() as s:
            run = writes.create_run(s, env=ENV, name=name, platforms=["cpu", "cuda", "rocm", "tpu"], run_on=["cpu"],
                                    total=1)
            writes.Writer(s, run, writes.harness_ids(s, [got["harness"]])).write([Outcome.from_dict(got["outcome"])])
            writes.finish_run(s, run, "finished")
    yield url
    store.dispose()


def _triage(url: str, run: str, **kw: Any) -> dict[str, Any]:
    from farm.reports.triage import triage
    from farm.store import open_store

    store = open_store(url)
    try:
        with store.session() as s:
            return triage(s, run, **kw)
    finally:
        store.dispose()


def test_symbolic_only_failures_are_their_own_labelled_clusters(planted_db: str) -> None:
    [every] = _triage(planted_db, "all")["clusters"]
    [one] = _triage(planted_db, "tpu")["clusters"]
    assert every["signature"]["stage"] == one["signature"]["stage"] == "symbolic_call"
    assert every["signature"]["scope"] == "symbolic-only" and every["platforms"] == ["cpu", "cuda", "rocm", "tpu"]
    assert one["signature"]["scope"] == "symbolic-only on tpu" and one["platforms"] == ["tpu"]
    assert "<symbolic-only>" in every["summary"] and "<symbolic-only on tpu>" in one["summary"]
    assert every["key"] != one["key"]  # the same error text on tpu: another cluster all the same


def test_a_symbolic_failure_the_static_stages_share_is_not_symbolic_only(planted_db: str) -> None:
    broken = _triage(planted_db, "static")["clusters"]
    stages = {c["signature"]["stage"] for c in broken}
    assert "compare" in stages and "symbolic_call" in stages  # the rule is wrong at every shape
    assert all(c["signature"]["scope"] == "" for c in broken)
    [sym] = [c for c in broken if c["signature"]["stage"] == "symbolic_call"]
    [only] = _triage(planted_db, "all")["clusters"]
    assert sym["key"] != only["key"]
    # what keeps them apart is the scope alone: the same signature otherwise
    from farm.analysis.signatures import Signature

    assert dataclasses.replace(Signature.from_dict(only["signature"]), scope="") == Signature.from_dict(sym["signature"])
    static = _triage(planted_db, "static", shapes="static")["clusters"]
    assert static and all(shapes.kind_of(c["signature"]["stage"]) == "static" for c in static)
    assert [c["key"] for c in _triage(planted_db, "static", shapes="symbolic")["clusters"]] == [sym["key"]]


def test_farm_triage_prints_the_label(planted_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    from farm.cli import main

    assert main(["triage", "tpu", "--db", planted_db]) in (0, 1)
    out = capsys.readouterr().out
    assert "<symbolic-only on tpu>" in out
    assert main(["triage", "tpu", "--shapes", "static", "--db", planted_db]) == 0
    assert "symbolic" not in capsys.readouterr().out


def _row(stage: str, platform: str, status: str, harness: str = "h", run: int = 1) -> dict[str, Any]:
    return {"run_id": run, "harness": harness, "fingerprint": f"fp-{harness}", "primitive": "sin", "stage": stage,
            "platform": platform, "status": status, "error_type": "Mismatch", "error": "b=3, vs the reference: x"}


def test_scopes_from_a_harness_s_rows_in_one_run() -> None:
    rows = [_row("symbolic_export", "export", "error", "a"), _row("symbolic_export", "tpu", "error", "a"),
            _row("symbolic_call", "cpu", "fail", "b"), _row("symbolic_call", "cuda", "fail", "b"),
            _row("symbolic_call", "tpu", "fail", "c"), _row("compare", "cpu", "fail", "c"),
            _row("symbolic_serialize", "export", "fail", "d"),
            _row("symbolic_call", "tpu", "fail", "e", run=2), _row("compare", "cpu", "fail", "e", run=1)]
    got = shapes.scopes(rows)
    assert got == {(1, "fp-a"): "symbolic-only on tpu",  # the four-platform export sunk by tpu's
                   (1, "fp-b"): "symbolic-only", (1, "fp-d"): "symbolic-only",
                   (2, "fp-e"): "symbolic-only on tpu"}  # another run's static failure is not this run's
    scoped = {(r["harness"], r["stage"]): s.scope for s, r in signed(rows)}
    assert scoped[("c", "compare")] == "" and scoped[("c", "symbolic_call")] == ""
    assert scoped[("a", "symbolic_export")] == "symbolic-only on tpu"


def test_a_signature_without_a_scope_keeps_its_key() -> None:
    """Acknowledgements are stored by key: a static failure's key must not change."""
    import hashlib

    from farm.analysis.signatures import Signature

    s = Signature("compare", "fail", ("sin",), "Mismatch", "output N", "ulp≤16/all")
    text = json.dumps(["compare", "fail", ["sin"], "Mismatch", "output N", "ulp≤16/all"], separators=(",", ":"),
                      ensure_ascii=True)
    assert s.key == hashlib.sha256(text.encode()).hexdigest()[:12]
    assert dataclasses.replace(s, scope="symbolic-only").key != s.key


def test_failing_size() -> None:
    assert shapes.failing_size({"sizes": ["b=1", "b=3,n=2", "b=7"], "verdicts": {
        "b=1": {"reference": "ok"}, "b=7": {"reference": "fail"},
        "b=3,n=2": {"reference": "ok", "static": "fail"}}}) == "b=3,n=2"  # the first in call order
    assert shapes.failing_size({"sizes": ["b=1", "b=3", "b=7"], "reached": ["b=1"]}) == "b=3"  # raised at the second
    assert shapes.failing_size({}, "b=7,d4=5, vs the static lowering: ...") == "b=7,d4=5"
    assert shapes.failing_size({}, "something else") is None
