"""farm export / farm import: results out as JSON or CSV; results bundles in."""
from __future__ import annotations

import argparse
import csv
import json
import sys

from farm.commands import add_db, out_file, store_from

#: Stable, documented export fields (one row per run x harness x platform x stage).
FIELDS = ("run", "harness", "fingerprint", "primitive", "dtype", "family", "group", "catalog", "platform",
          "stage", "status", "seconds", "error_type", "error", "metrics", "artifact", "comparable")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a run's results as JSON or CSV (stable fields)")
    p.add_argument("run", help="run id, name, latest or previous")
    p.add_argument("--format", choices=("json", "csv"), default="json")
    p.add_argument("--output", "-o", type=out_file("--output"), help="file (default: stdout)")
    add_db(p)
    p.set_defaults(func=export)
    p = sub.add_parser("import", help="load a results bundle written by `farm worker --standalone`")
    p.add_argument("bundle", nargs="+", help="bundle file (.json.gz), or every part of a split bundle")
    p.add_argument("--name", dest="run_name", help="name for the imported run")
    add_db(p)
    p.set_defaults(func=import_)


def export(args: argparse.Namespace) -> int:
    from farm.store import queries  # deferred: farm.store.queries (sqlalchemy); not needed by farm --help

    store = store_from(args)
    with store.session() as s:
        run = queries.resolve_run(s, args.run)
        rows = queries.results(s, run.id)
    out = open(args.output, "w", newline="") if args.output else sys.stdout
    try:
        if args.format == "json":
            json.dump([{"run": run.name, **{k: r.get(k) for k in FIELDS if k != "run"}} for r in rows], out,
                      indent=1, default=str)
            out.write("\n")
        else:
            w = csv.DictWriter(out, fieldnames=FIELDS)
            w.writeheader()
            for r in rows:
                w.writerow({"run": run.name, **{k: (json.dumps(r[k]) if k == "metrics" else r.get(k))
                                                for k in FIELDS if k != "run"}})
    finally:
        if args.output:
            out.close()
    return 0


def import_(args: argparse.Namespace) -> int:
    from farm.run.bundles import import_docs, load  # deferred: farm.run.bundles (jax export); not needed by farm --help

    docs = load(args.bundle)  # every part read and validated first: a refused bundle creates no database
    store = store_from(args, create=True)
    run_id, name, n = import_docs(store, docs, args.bundle, name=args.run_name)
    print(f"farm: imported {n} harness outcomes as run {name} (id {run_id})")
    return 0
