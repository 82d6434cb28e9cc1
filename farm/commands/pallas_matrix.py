"""farm pallas-matrix: the primitive × target support matrix of a run's Pallas primitive
harnesses (family ``pallas_prims``, docs/pallas.md), and two runs' matrices side by side."""
from __future__ import annotations

import argparse
import json

from farm.commands import add_db, store_from


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pallas-matrix", help="which lax primitive inside a Pallas kernel lowers for which backend and "
                                             "TPU generation, and computes right in interpret mode")
    p.add_argument("--run", default="latest", help="run id, name or latest")
    p.add_argument("--against", metavar="RUN", help="another run (another jax version): the cells that differ")
    p.add_argument("--by", choices=("dtype", "primitive"), default="dtype",
                   help="a row per primitive and dtype, or per primitive (dtypes collapsed)")
    p.add_argument("--family", default="pallas_prims", help="the harness family whose rows make the matrix ('' for all)")
    p.add_argument("--all-tpu", action="store_true", help="a column per TPU generation even where they agree")
    p.add_argument("--format", choices=("md", "json"), default="md")
    add_db(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from farm.analysis import pallas_matrix as pm  # deferred: not needed by farm --help
    from farm.store import queries  # deferred: sqlalchemy; not needed by farm --help

    def load(s, name: str):  # noqa: ANN001, ANN202
        r = queries.resolve_run(s, name)
        rows = queries.results(s, r.id, stage=",".join(pm.STAGES))
        return r.name, pm.matrix(rows, by=args.by, family=args.family or None)

    with store_from(args).session() as s:
        name, m = load(s, args.run)
        other = load(s, args.against) if args.against else None
    if other is not None:
        d = pm.diff(other[1], m)
        if args.format == "json":
            print(json.dumps({"before": other[0], "after": name, **d}, indent=1))
        else:
            print(pm.diff_markdown(d, other[0], name), end="")
        return 0
    if args.format == "json":
        print(json.dumps({"run": name, **m}, indent=1))
    else:
        print(f"run {name}: {sum(r['harnesses'] for r in m['rows'])} harnesses, {len(m['rows'])} rows\n")
        print(pm.markdown(m, merge_tpu=not args.all_tpu), end="")
    return 0
