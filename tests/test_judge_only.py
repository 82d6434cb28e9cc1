"""Only the judge (``farm.judge``) sets a verdict status: a walk of every module's syntax
tree finds no other place that gives a record, an outcome or a verdict one of
``fail``, ``expected_fail``, ``unexpected_pass``, ``crashed`` or ``timeout``."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERDICTS = {"fail", "expected_fail", "unexpected_pass", "crashed", "timeout"}
#: Calls whose first argument is a status (``rec.with_status("fail")``, ``Verdict("fail", ...)``).
FIRST = {"with_status", "Verdict"}


def _name(f: ast.expr) -> str:
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _verdicts_in(node: ast.AST) -> set[str]:
    """Verdict strings a status argument may take: the constant itself or either arm of a
    conditional (``"fail" if bad else "ok"``)."""
    if isinstance(node, ast.Constant) and node.value in VERDICTS:
        return {node.value}
    if isinstance(node, ast.IfExp):
        return _verdicts_in(node.body) | _verdicts_in(node.orelse)
    if isinstance(node, (ast.Tuple, ast.List)):
        return set().union(*(_verdicts_in(e) for e in node.elts)) if node.elts else set()
    return set()


def setters(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) of every place in ``tree`` that sets a verdict status."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _name(node.func)
            if name == "Limitation":  # the status a known gap expects: data the judge reads, not a verdict
                continue
            args = []
            if name in FIRST and node.args:
                args.append(node.args[0])
            if (name[:1].isupper() or name == "failed") and len(node.args) >= 3:  # Record(stage, platform, status)
                args.append(node.args[2])
            if name.lstrip("_")[:1].islower() and "record" in name.lower():  # a helper that makes a record: _record("execute", "timeout", why)
                args += node.args
            args += [k.value for k in node.keywords if k.arg == "status"]
            for a in args:
                for v in _verdicts_in(a):
                    found.append((node.lineno, f"{name}(... {v!r} ...)"))
        elif isinstance(node, ast.Assign) and any("status" in ast.unparse(t) for t in node.targets):
            for v in _verdicts_in(node.value):
                found.append((node.lineno, f"{ast.unparse(node.targets[0])} = {v!r}"))
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == "status":
                    found += [(node.lineno, f'{{"status": {s!r}}}') for s in _verdicts_in(v)]
    return found


#: Modules that make rows without judging anything, and why.
NOT_JUDGING = {
    "farm/bench/": "benchmark databases and the simulated fleet make synthetic rows",
    "farm/repro/same.py": "an expected_fail counts as the fail it is when one failure is matched with another",
}


def _modules() -> list[Path]:
    return sorted(p for d in ("farm", "workers") for p in (ROOT / d).rglob("*.py"))


def test_the_walk_finds_each_way_of_setting_a_verdict() -> None:
    src = '''
Record("compare", "cpu", "fail")
Compared(stage, platform, "ok" if good else "fail", error=e)
rec.with_status("expected_fail", facts=f)
Outcome.failed(fp, name, "timeout", why)
status, why = "crashed", "died"
x = {"status": "unexpected_pass"}
Verdict("fail", "reference")
Record(stage, platform, status="fail")
_record("execute", "crashed", why)
'''
    assert len(setters(ast.parse(src))) == 9
    assert setters(ast.parse('Record("compare", "cpu", "ok")\nif status == "fail": pass\n')) == []


def test_only_the_judge_sets_a_verdict_status() -> None:
    outside = {}
    for path in _modules():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("farm/judge/") or any(rel.startswith(p) for p in NOT_JUDGING):
            continue
        hits = setters(ast.parse(path.read_text(), rel))
        if hits:
            outside[rel] = hits
    assert outside == {}, "verdict statuses set outside farm.judge:\n" + "\n".join(
        f"  {rel}:{line}: {what}" for rel, hits in sorted(outside.items()) for line, what in hits)


def test_the_judge_sets_them() -> None:
    judged = {path.name for path in (ROOT / "farm" / "judge").glob("*.py") if setters(ast.parse(path.read_text()))}
    assert {"harness.py", "limitations.py", "stages.py", "stored.py", "jaxpr.py"} <= judged


def test_a_sunk_export_is_explained_by_the_platform_whose_error_it_carries() -> None:
    """jax 0.5.3: a bfloat16 four-platform symbolic export sunk by cpu and cuda fails with the
    cpu's error; cuda's own symbolic_export limitation names another, the cpu's lower one this:
    expected. An error neither names still fails against the first."""
    from jax import lax

    from farm import catalog
    from farm.catalog import Limitation
    from farm.judge.limitations import judge_record
    from farm.results import Record

    h = catalog.define("test", "sin", lax.sin, [catalog.RandArg((3,), "bfloat16")], dtype="bfloat16",
                       catalog="test_sunk", compare="none",
                       limitations=[Limitation("cuda's", platforms=("cuda",), stage="symbolic_export", error="^A: "),
                                    Limitation("cpu's", platforms=("cpu",), stage="lower", error="^B: ")])
    def sunk(err: str) -> Record:
        return Record("symbolic_export", "export", "error", error_type=err, error="x",
                      facts={"sunk_by": ["cuda", "cpu"]})
    assert judge_record(h, sunk("B")).status == "expected_fail"
    assert judge_record(h, sunk("A")).status == "expected_fail"
    got = judge_record(h, sunk("C"))
    assert got.status == "fail" and "cuda's" in got.error
