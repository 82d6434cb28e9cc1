"""farm crosshost: the lowered-on × run-on tables of a device host's run."""
from __future__ import annotations

import argparse
import json

from farm.commands import add_db, store_from


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("crosshost", help="a device host's run: status counts, lowered-on × run-on table, "
                                         "disagreements, slowest harnesses")
    p.add_argument("run", nargs="?", default="latest", help="run id, name or latest (an imported bundle)")
    p.add_argument("--platform", default="cuda", help="the device's platform")
    p.add_argument("--format", choices=("text", "json"), default="text")
    add_db(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from farm.analysis.crosshost import render_text, summarize  # deferred: farm.analysis.crosshost; not needed by farm --help
    from farm.store import queries  # deferred: farm.store.queries (sqlalchemy); not needed by farm --help

    with store_from(args).session() as s:
        r = queries.resolve_run(s, args.run)
        rows = queries.results(s, r.id)
        info = queries.run_dict(s, r)
    summary = summarize(rows, args.platform)
    if args.format == "json":
        print(json.dumps({"run": info, **summary}, indent=1, default=str))
    else:
        env = info.get("environment") or {}
        print(f"run {info['name']} (id {info['id']}): jax {env.get('jax_version')} on "
              f"{','.join(env.get('device_kinds') or [])}; {len({x['harness'] for x in rows})} harnesses")
        print(render_text(summary))
    return 0
