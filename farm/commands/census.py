"""farm census: a run's stage × platform × status counts and its plugin-boundary census."""
from __future__ import annotations

import argparse
import json

from farm.commands import add_db, store_from


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("census", help="a run's stage × platform × status counts and what crosses the "
                                      "plugin boundary (chlo ops, custom calls per platform)")
    p.add_argument("run", nargs="?", default="latest", help="run id, name or latest")
    p.add_argument("--format", choices=("text", "json"), default="text")
    add_db(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from farm.analysis.census import boundary, render_text, stage_table  # deferred: farm.analysis.census; not needed by farm --help
    from farm.store import queries  # deferred: farm.store.queries (sqlalchemy); not needed by farm --help

    with store_from(args).session() as s:
        r = queries.resolve_run(s, args.run)
        table = stage_table(queries.stage_counts(s, r.id))
        census = boundary(queries.census_facts(s, r.id))
        info = queries.run_dict(s, r)
    if args.format == "json":
        print(json.dumps({"run": info, "stages": table, "census": census}, indent=1, default=str))
    else:
        print(f"run {info['name']} (id {info['id']}, {info['done']}/{info['total']} harnesses)")
        print(render_text(table, census))
    return 0
