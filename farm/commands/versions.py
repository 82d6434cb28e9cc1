"""farm versions: the exported-on × run-on table of a version sweep (farm sweep --jax)."""
from __future__ import annotations

import argparse
import json

from farm.commands import add_db, store_from


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("versions", help="a version sweep's exported-on x run-on table (farm sweep --jax)",
                       description="For a sweep made with farm sweep --jax V1,V2,... --name NAME: each version's own "
                                   "verdicts, and for every pair (A, B) how A's serialized exports fare when B "
                                   "deserializes and runs them (backward and forward compatibility).")
    p.add_argument("name", help="the version sweep's name, or a reference to one of its runs (latest, previous, "
                                "a run name or id)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    add_db(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from farm.analysis.versions import matrix, render_text  # deferred: farm.analysis; not needed by farm --help
    from farm.run.versions.matrix import load, series_of  # deferred: farm.run (sqlalchemy); not needed by farm --help

    store = store_from(args)
    native, cross, stats = load(store, series_of(store, args.name))
    m = matrix(native, cross, stats)
    print(json.dumps(m, indent=1) if args.format == "json" else render_text(m))
    return 0
