"""What keys Bazel's harness family tests (//:farm_code) covers everything they run.

The family tests depend on the farm's result-shaping code only (``farm.cache.key.FARM_CODE``),
so that an edit to the store, the sweep driver or the dashboards does not re-run the whole farm
catalog under Bazel. That is sound only if every farm module the family test can import is in
the filegroup: these tests walk the import graph (grimp, every import statement, deferred ones
inside functions too) from ``tools/bazel/family_test.py`` and hold it against the BUILD file's
globs, and hold those globs against FARM_CODE.
"""
from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

import grimp
import pytest

from farm.cache import key as cachekey

ROOT = Path(__file__).resolve().parents[1]


def _filegroup_globs(build: str, name: str) -> list[str]:
    """The include patterns of ``filegroup(name = NAME, srcs = glob([...]))`` in BUILD text."""
    m = re.search(r'filegroup\(\s*name\s*=\s*"%s",\s*srcs\s*=\s*glob\(\s*(\[.*?\])' % re.escape(name), build, re.S)
    assert m, f"no filegroup {name!r} with a glob in BUILD.bazel"
    return ast.literal_eval(re.sub(r"#[^\n]*", "", m.group(1)))


def _entry_imports(path: Path) -> set[str]:
    """The farm/workers modules a script imports at its top level."""
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return {m for m in out if m.split(".")[0] in ("farm", "workers")}


def reached(entry: Path, graph: grimp.ImportGraph) -> set[str]:
    """Every farm module ``entry`` can import, with the packages above each (their __init__
    runs), and every module of each package it imports: a package may import its modules by
    name (``farm.pipeline``'s exports on first use, the check registry), which no import
    statement shows. (A package above an imported module is not itself imported: ``farm``.)"""
    todo = _entry_imports(entry) & graph.modules  # `from farm.pipeline import run_harness`: a name, not a module
    seen: set[str] = set()
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo |= set(graph.find_modules_directly_imported_by(m))
        if "." in m:  # `from farm import catalog` reads as importing `farm` too: the roots load nothing by name
            todo |= graph.find_children(m)
    parents = {".".join(m.split(".")[:i]) for m in seen for i in range(1, m.count(".") + 1)}
    return seen | parents


def _file(module: str) -> str:
    base = ROOT.joinpath(*module.split("."))
    return str((base / "__init__.py" if base.is_dir() else base.with_suffix(".py")).relative_to(ROOT))


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("farm", "workers", include_external_packages=False)


def test_every_module_a_family_test_reaches_keys_it(graph: grimp.ImportGraph) -> None:
    globs = _filegroup_globs((ROOT / "BUILD.bazel").read_text(), "farm_code")
    mods = reached(ROOT / "tools" / "bazel" / "family_test.py", graph)
    assert {"farm.pipeline", "farm.judge", "farm.stages", "farm.catalog"} <= {".".join(m.split(".")[:2]) for m in mods}
    missing = sorted(f for f in map(_file, mods) if not any(fnmatch.fnmatch(f, g) for g in globs))
    assert not missing, f"family tests import these, but //:farm_code leaves them out: {missing}"


def test_a_module_outside_the_filegroup_is_caught(graph: grimp.ImportGraph, tmp_path: Path) -> None:
    """The walk sees a deferred import inside a function: the check above can fail."""
    entry = tmp_path / "entry.py"
    entry.write_text("from farm.pipeline import run_harness\n")
    plain = reached(entry, graph)
    graph.add_import(importer="farm.pipeline", imported="farm.store.db")  # as `def f(): from farm.store import db`
    assert "farm.store.db" in reached(entry, graph) - plain
    globs = _filegroup_globs((ROOT / "BUILD.bazel").read_text(), "farm_code")
    assert not any(fnmatch.fnmatch(_file("farm.store.db"), g) for g in globs)


def test_the_filegroup_is_the_result_caches_farm_code() -> None:
    """One list of "the farm's code that shapes results": Bazel's key and the result cache's
    key may not drift apart (harnesses/ is its own Bazel package, keyed by its own filegroup)."""
    globs = _filegroup_globs((ROOT / "BUILD.bazel").read_text(), "farm_code")
    code = [g for g in globs if g.startswith(("farm/", "workers/"))]
    assert sorted(code) == sorted(p for p in cachekey.FARM_CODE if not p.startswith("harnesses/"))
    assert set(globs) - set(code) == {"pyproject.toml"}
    assert '"//:farm_code"' in (ROOT / "tools" / "bazel" / "harness_test.bzl").read_text()


def test_every_api_family_has_a_bazel_target() -> None:
    """`bazel test //harnesses:api` covers the api catalog: a family added to it (a new
    scipy.stats distribution) without a target would go unchecked there."""
    from farm import catalog

    build = (ROOT / "harnesses" / "BUILD.bazel").read_text()
    block = build[build.index("API_FAMILIES = dict(["):]
    named = set(re.findall(r'^\s+\("([\w.]+)", (?:\d+|None)\),$', block[:block.index("])")], re.M))
    dists = ast.literal_eval(re.search(r"_API_DISTRIBUTIONS = (\[.*?\])", build, re.S).group(1))
    declared = named | {f"scipy.stats.{d}" for d in dists}
    families = {h.family for h in catalog.select(catalog.Filters(catalog="api"))}
    assert families and declared == families, (sorted(families - declared), sorted(declared - families))
