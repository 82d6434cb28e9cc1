"""The key on the jax code a harness ran (``farm.cache.units``): what a unit is, what
each edit invalidates, what a worker records, and that a damaged record is never used.

Each shortcut here decides that an edit cannot change a cached outcome; each test below
makes an edit and checks the key moves exactly when the edited code could have run."""
from __future__ import annotations

import importlib
import sys
import textwrap
import threading
import uuid
from pathlib import Path

import pytest

from farm.cache import recorder, units
from farm.cache.filedigests import FileDigests

MODULE = textwrap.dedent('''
    import functools

    LIMIT = 3

    def rule(x, scale=2):
        def inner(y):
            return y * scale
        return [inner(v) for v in range(x)]

    def helper(x):
        return x + 1

    class Prim:
        name = "p"

        def bind(self, x):
            return helper(x)

        class Nested:
            def deep(self):
                return 1

    @functools.lru_cache(maxsize=None)
    def canonical(x):
        return x

    def wrapped(x):
        return x

    wrapped_cached = functools.cache(wrapped)

    if LIMIT > 2:
        def conditional():
            return "a"
    else:
        def conditional():
            return "b"

    square = lambda v: v * v
''')


def _edit(src: str, old: str, new: str) -> str:
    assert src.count(old) == 1, old
    return src.replace(old, new)


def test_units_are_module_and_class_level_functions_hashed_without_line_numbers() -> None:
    u = units.parse_units(MODULE)
    assert set(u.units) == {"rule", "helper", "Prim.bind", "Prim.Nested.deep", "canonical", "wrapped", "conditional"}
    assert set(u.cached) == {"canonical", "wrapped"}  # a decorator, and a module-level wrapper call

    def diff(src: str) -> tuple[bool, set[str]]:
        v = units.parse_units(src)
        return v.skeleton != u.skeleton, {n for n in u.units.keys() | v.units.keys() if u.units.get(n) != v.units.get(n)}

    # lines added above move every line below: no unit and no skeleton changes
    assert diff("# a comment\n\n\n" + MODULE) == (False, set())
    # a body: that unit alone; a nested function or comprehension is its enclosing unit's
    assert diff(_edit(MODULE, "return x + 1", "return x + 2")) == (False, {"helper"})
    assert diff(_edit(MODULE, "return y * scale", "return y * scale * 1")) == (False, {"rule"})
    assert diff(_edit(MODULE, "return 1\n", "return 2\n")) == (False, {"Prim.Nested.deep"})
    assert diff(_edit(MODULE, 'return "b"', 'return "c"')) == (False, {"conditional"})  # both definitions, one unit
    # what runs at import (statements, class bodies, defaults, decorators, module-level lambdas): the skeleton
    for old, new in (("LIMIT = 3", "LIMIT = 4"), ('name = "p"', 'name = "q"'), ("scale=2", "scale=3"),
                     ("lru_cache(maxsize=None)", "lru_cache(maxsize=8)"), ("v * v", "v * v * v")):
        assert diff(_edit(MODULE, old, new))[0], old  # (a signature is its unit's too)
    assert units.parse_units("def broken(:\n").units == {}


def _tree(tmp_path: Path, files: dict[str, str]) -> units.Tree:
    root = tmp_path / f"jaxtoy_{uuid.uuid4().hex[:8]}"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    digests = FileDigests(tmp_path / "digests.json")
    return units.Tree(str(root), units.UnitDigests(digests.sha, tmp_path / "units.json"), digests.sha)


def _again(tree: units.Tree) -> units.Tree:
    """The same directory read afresh (a new process after an edit)."""
    digests = FileDigests(Path(tree.root).parent / "digests2.json")
    return units.Tree(tree.root, units.UnitDigests(digests.sha, Path(tree.root).parent / f"u{uuid.uuid4().hex}.json"),
                        digests.sha)


def test_a_harness_key_moves_when_a_unit_it_ran_changes_and_only_then(tmp_path: Path) -> None:
    tree = _tree(tmp_path, {"lax.py": MODULE, "other.py": "def f():\n    return 1\n", "data.json": "{}"})
    part = {"units": {"lax.py": ["helper", "Prim.bind"]}}
    parts = {units.address(part): part}
    before, glob = tree.deps_digest(parts), tree.digest
    lax, root = Path(tree.root) / "lax.py", Path(tree.root)

    def after(path: Path, text: str) -> tuple[bool, bool]:
        old = path.read_text() if path.exists() else None
        path.write_text(text)
        t = _again(tree)
        moved = (t.digest != glob, t.deps_digest(parts) != before)
        if old is None:
            path.unlink()
        else:
            path.write_text(old)
        return moved

    assert after(lax, _edit(MODULE, "return x + 1", "return x + 2")) == (False, True)  # ran: helper
    assert after(lax, _edit(MODULE, "return y * scale", "return -y")) == (False, False)  # did not run: rule
    # a function removed (or added): the names a module binds are its skeleton's, so every key moves
    assert after(lax, MODULE.replace("def helper(x):\n    return x + 1\n", "")) == (True, True)
    assert after(lax, _edit(MODULE, "LIMIT = 3", "LIMIT = 4")) == (True, False)  # module level: every key
    # a unit a cache wraps: every key (a later harness can use its cached result without running it)
    assert after(lax, _edit(MODULE, "def canonical(x):\n    return x", "def canonical(x):\n    return -x")) == (True, False)
    assert after(root / "other.py", "def f():\n    return 2\n") == (False, False)
    assert after(root / "new.py", "X = 1\n") == (True, False)  # a file added
    assert after(root / "data.json", "[]") == (True, False)  # not Python: its content
    assert _again(tree).deps_digest(parts) == before and _again(tree).digest == glob


@pytest.fixture
def toy(tmp_path: Path):  # noqa: ANN201
    """An importable package standing in for jax, loaded instrumented by a recorder."""
    tree = _tree(tmp_path, {"__init__.py": "", "lax.py": MODULE, "late.py": "def g():\n    return 5\n"})
    name = Path(tree.root).name
    sys.path.insert(0, str(Path(tree.root).parent))
    rec = recorder.Recorder()
    try:
        assert rec.install(tree.root, package=name, code_cache=tmp_path / "code")
        mod = importlib.import_module(f"{name}.lax")
        rec.end_setup()
        yield rec, mod, name
    finally:
        if rec._finder in sys.meta_path:
            sys.meta_path.remove(rec._finder)
        sys.path.remove(str(Path(tree.root).parent))
        for m in [m for m in sys.modules if m.startswith(name)]:
            del sys.modules[m]


def test_the_recorder_names_the_units_a_harness_ran(toy) -> None:  # noqa: ANN001
    rec, mod, _ = toy
    assert rec.global_part is not None and rec.global_part[1] == {"units": {}}  # importing ran no unit
    assert rec.begin()
    mod.rule(2)
    mod.Prim().bind(1)
    mod.square(3)  # a module-level lambda: its code is the skeleton's
    deps = rec.end()
    ran = {f: set(u) for p in deps["parts"].values() for f, u in p["units"].items()}
    assert ran == {"lax.py": {"rule", "helper", "Prim.bind"}}  # inner and the comprehension: rule's
    assert deps["set"] == units.address({"parts": sorted(deps["parts"])})
    assert set(deps["new"]) == set(deps["parts"])
    wire = recorder.wire(deps)
    assert all(units.address(body) == sha for sha, body in wire["rows"].items())
    # the same code again: nothing new to send, the same set
    assert rec.begin()
    mod.rule(2)
    mod.Prim().bind(1)
    again = rec.end()
    assert again["set"] == deps["set"] and again["new"] == []
    # code run later on its own (a closure, a generator, on another thread) is its unit's
    inner = mod.Prim.Nested
    assert rec.begin()
    thread = threading.Thread(target=lambda: inner().deep())
    thread.start()
    thread.join()
    later = rec.end()
    assert {f: u for p in later["parts"].values() for f, u in p["units"].items()} == {"lax.py": ["Prim.Nested.deep"]}


def test_instrumented_code_behaves_as_the_plain_code(tmp_path: Path) -> None:
    """Docstrings, line numbers in tracebacks, generators, lambdas, closures, ``super()``,
    ``async def``: the instrumented module is the plain one plus its marks."""
    source = textwrap.dedent('''
        import asyncio, traceback

        def documented(x):
            """Kept."""
            return x * 2

        def gen(n):
            yield from range(n)

        def closure(k):
            def add(v):
                return v + k
            return add, (lambda v: v - k), (v * k for v in range(3))

        class Base:
            def who(self):
                return "base"

        class Child(Base):
            def who(self):
                return "child of " + super().who()

        async def co(x):
            return x + 1

        def fails():
            x = 1
            raise ValueError(x)

        def where():
            try:
                fails()
            except ValueError as e:
                return [(f.name, f.lineno) for f in traceback.extract_tb(e.__traceback__)]

        def run():
            add, sub, g = closure(3)
            return (documented(2), documented.__doc__, list(gen(3)), add(1), sub(1), list(g), Child().who(),
                    asyncio.run(co(1)), where())
    ''')
    plain: dict = {}
    exec(compile(source, "m.py", "exec"), plain)
    names, code = recorder.instrument(source.encode(), "m.py")
    marked: dict = {recorder.SEEN: bytearray(len(names))}
    exec(code, marked)
    assert marked["run"]() == plain["run"]()
    seen = marked[recorder.SEEN]
    assert {names[i] for i in range(len(names)) if seen[i]} == set(names)  # run() ran every unit


def test_a_harness_that_imports_jax_code_makes_it_every_later_harness_s(toy) -> None:  # noqa: ANN001
    """Lazy set-up (a module imported, a rule registered) in one harness is what later
    harnesses use without running it: that harness's units join the process's global part."""
    rec, mod, name = toy
    assert rec.begin()
    mod.helper(1)
    importlib.import_module(f"{name}.late")  # a jax module imported inside a harness
    first = rec.end()
    assert [p["units"] for p in first["parts"].values()] == [{"lax.py": ["helper"]}]
    assert rec.global_part is not None and rec.global_part[1] == {"units": {"lax.py": ["helper"]}}
    assert rec.begin()
    sys.modules[f"{name}.late"].g()
    later = rec.end()
    assert {units.address(p) for p in later["parts"].values()} >= {rec.global_part[0]}
    assert {"late.py": ["g"]} in [p["units"] for p in later["parts"].values()]


def test_a_damaged_or_misaddressed_code_record_is_never_used(db_url: str) -> None:
    from sqlalchemy import update

    from farm.store import codedeps, open_store
    from farm.store.models import CodeDepsRow

    part_a, part_b = {"units": {"lax.py": ["helper"]}}, {"units": {"mlir.py": ["lower"]}}
    a, b = units.address(part_a), units.address(part_b)
    good = {"parts": sorted([a, b])}
    lonely = {"parts": [a]}
    store = open_store(db_url)
    with store.session() as s:
        assert codedeps.put(s, {a: part_a, b: part_b, units.address(good): good,
                                units.address(lonely): lonely, "0" * 64: {"parts": []}}) == 4  # the last lies
        s.commit()
        assert set(codedeps.get(s, [a, b, "0" * 64])) == {a, b}
        assert codedeps.sets(s, [units.address(good)]) == {units.address(good): {a: part_a, b: part_b}}
        # one part's bytes damaged: every set naming it is dropped, the others stay
        import zlib

        s.execute(update(CodeDepsRow).where(CodeDepsRow.sha256 == b)
                  .values(body=zlib.compress(units.canonical({"units": {"mlir.py": []}}))))
        s.commit()
        assert codedeps.sets(s, [units.address(good), units.address(lonely)]) == {
            units.address(lonely): {a: part_a}}
        s.execute(update(CodeDepsRow).where(CodeDepsRow.sha256 == a).values(body=b"not zlib"))
        s.commit()
        assert codedeps.sets(s, [units.address(lonely)]) == {}


def test_a_process_that_imported_the_package_first_records_nothing(tmp_path: Path) -> None:
    """Its set-up ran unseen: no harness of it may get a deps key."""
    import json  # noqa: F401  (imported already, as jax would be)

    rec = recorder.Recorder()
    tree = _tree(tmp_path, {"__init__.py": ""})
    assert not rec.install(tree.root, package="json") and "imported before" in rec.why_not
    rec.end_setup()
    assert not rec.enabled and not rec.begin() and rec.end() is None


def test_the_cache_package_imports_no_jax() -> None:
    """The store, the sweep driver and a worker (before ``recorder``'s hook is in place)
    import ``farm.cache``: importing it must not import jax."""
    import os
    import subprocess

    root = Path(__file__).resolve().parents[1]
    script = ("import sys; import farm.cache.key, farm.cache.recorder, farm.cache.units, farm.cache.hermetic; "
              "print(sorted(m for m in sys.modules if m == 'jax' or m.startswith('jax.')))")
    out = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
