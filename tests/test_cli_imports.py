"""What ``farm --help`` loads: the reason every deferred import in the faces gives ("not
needed by farm --help") checked, instead of timings in comments that go stale."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: What the help of any subcommand must not import: each costs a few tenths of a second.
HEAVY = ("jax", "jaxlib", "ray", "sqlalchemy", "alembic", "flask", "gmpy2", "mpmath", "scipy",
         "farm.store", "farm.run.sweep", "farm.pipeline.harness", "farm.catalog.registry")

SCRIPT = """
import json, sys
from farm import cli
for argv in ([], ["--help"], *([name, "--help"] for name in sys.argv[1:])):
    try:
        cli.main(argv or ["--help"])
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""


def _loaded(*subcommands: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", SCRIPT, *subcommands], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _subcommands() -> list[str]:
    from farm import cli

    sub = next(a for a in cli.parser()._actions if a.__class__.__name__ == "_SubParsersAction")  # noqa: SLF001
    return sorted(sub.choices)


def test_no_help_imports_what_only_the_work_needs() -> None:
    loaded = _loaded(*_subcommands())
    heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert heavy == []
