"""The judge's one entry (farm.judge): ``verdict`` by the record's stage through one table,
the other names it lends, and no caller outside the package reaching into its modules."""
from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import numpy as np
import pytest

from farm import judge
from farm.results import STAGES, Record

ROOT = Path(__file__).resolve().parents[1]
MODULES = {p.stem for p in (ROOT / "farm" / "judge").glob("*.py") if p.stem != "__init__"}


def test_every_stage_in_the_table_is_a_stage_and_its_judge_takes_the_record() -> None:
    assert set(judge.BY_STAGE) <= set(STAGES)
    for stage, (module, name) in judge.BY_STAGE.items():
        fn = getattr(import_module(f"farm.judge.{module}"), name)
        assert "rec" in inspect.signature(fn).parameters, stage


def test_the_public_names_resolve_and_none_is_a_module_of_the_package() -> None:
    for name, module in judge.PUBLIC.items():
        assert getattr(judge, name) is getattr(import_module(f"farm.judge.{module}"), name)
    assert not set(judge.PUBLIC) & MODULES  # a loaded submodule would shadow the name
    with pytest.raises(AttributeError):
        judge.no_such_judge  # noqa: B018


def test_verdict_dispatches_on_the_stage() -> None:
    ok = Record("determinism", "any", "ok", facts={"differs": []})
    assert judge.verdict(ok).status == "ok"
    assert judge.verdict(Record("symbolic_serialize", "export", "ok", facts={"changed": True})).status == "fail"
    with pytest.raises(KeyError):
        judge.verdict(Record("trace", "cpu", "ok"))


def _reaches_in(tree: ast.AST) -> list[str]:
    """The imports of a farm.judge module (not the package) in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("farm.judge."):
                found.append(node.module)
            elif node.module == "farm.judge":
                found += [f"farm.judge.{a.name}" for a in node.names if a.name in MODULES]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("farm.judge.")]
    return found


def test_no_module_outside_the_judge_imports_its_modules() -> None:
    outside = {}
    for d in ("farm", "workers", "dashboards"):
        for path in (ROOT / d).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if not rel.startswith("farm/judge/") and (hits := _reaches_in(ast.parse(path.read_text(), rel))):
                outside[rel] = hits
    assert outside == {}


def test_a_lost_jobs_record_loads_no_jax() -> None:
    code = "import sys; from farm.judge import lost_record; print(sorted({'jax', 'scipy'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_band_comes_from_the_one_tolerance_function() -> None:
    """A comparison's band (``Allowed``) is made by ``farm.judge.tolerance.allowed`` alone; the other
    modules hand on what it gave (``outputs``: the (rtol, atol) it was called with; ``accumulation``:
    a sum's band, made by it), and nothing outside the package compares with a band of its own."""
    makers: dict[str, int] = {}
    for path in (ROOT / "farm").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Allowed":
                key = str(path.relative_to(ROOT))
                makers[key] = makers.get(key, 0) + 1
    assert set(makers) <= {"farm/judge/tolerance.py", "farm/judge/kernel.py", "farm/judge/outputs.py",
                           "farm/judge/accumulation.py"}, makers
    assert makers["farm/judge/outputs.py"] == 1 and makers["farm/judge/accumulation.py"] == 1
    from farm.judge import accumulation, tolerance
    band = accumulation.Band("reduce_sum", 8, np.ones(3))
    assert "allowed" in inspect.getsource(accumulation.band) and band.band.shape == (3,)
    assert set(tolerance.KINDS) == {"elementwise", "accumulating", "solve", "conditioned", "sum", "product",
                                    "gradient", "invariant", "declared"}
    for kind in tolerance.KINDS:  # every kind gives a band, none raises
        c = tolerance.Computation("float32", kind, frozenset({"sin"}), terms=4, magnitude=2.0, cond=10.0,
                                  dtypes=("float32",), floor=(1e-3, 1e-3))
        assert isinstance(tolerance.allowed(c), tolerance.Allowed)
