"""No module of the farm defines a top-level function or class twice. A data module's predicates
(``farm.catalog.known``: hundreds of entries whose ``where`` lambdas look their helpers up when
called) share one namespace, so a second ``def _huge`` later in the file silently replaces the
first for every entry above it: on 2026-12-04 a matrix predicate of that name turned off a
scipy.special convention until a test of that convention failed. Ruff's F811 does not see it
(the first definition is used, by name, in lambdas)."""
from __future__ import annotations

import ast
import collections
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("farm", "workers", "dashboards", "harnesses")


def redefined(source: str) -> list[str]:
    """The names a module's top level defines more than once (def, async def, class)."""
    tree = ast.parse(source)
    counts = collections.Counter(n.name for n in tree.body
                                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
    return sorted(k for k, v in counts.items() if v > 1)


def test_a_second_definition_of_a_name_is_found() -> None:
    src = "def _huge(x):\n    return x > 1\n\nE = [lambda v: _huge(v)]\n\ndef _huge(m):\n    return m.max() > 2\n"
    assert redefined(src) == ["_huge"]
    assert redefined("def a():\n    pass\n\nclass B:\n    def a(self):\n        pass\n") == []


def test_no_module_defines_a_top_level_name_twice() -> None:
    found = {str(p.relative_to(ROOT)): names for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))
             if (names := redefined(p.read_text()))}
    assert not found, found
