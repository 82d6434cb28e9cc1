"""farm bench: the benchmark table (figure, value, goal, ratio to goal), and the
dashboard benchmark database (``--make-db``)."""
from __future__ import annotations

import argparse
import json
from farm.bench import suite as bench
from farm.commands import number, out_file
from farm.bench.suite import GROUPS


def register(sub: argparse._SubParsersAction) -> None:

    p = sub.add_parser("bench", help="run the benchmarks and print a table of figures against their goals",
                       description="Run the benchmarks and print a table of figures against their goals. "
                                   "With --make-db, build the dashboard benchmark database instead.")
    p.add_argument("--quick", action="store_true", help="small subsets (a few minutes)")
    p.add_argument("--only", help=f"comma list of figure groups ({', '.join(GROUPS)}; default all)")
    p.add_argument("--dashboard-db", metavar="URL",
                   help="database for the dashboard figures (e.g. one made with --make-db); without it they "
                        "are skipped")
    p.add_argument("--out", type=out_file("--out"), help="also write the Markdown table to this file")
    g = p.add_argument_group("benchmark database")
    g.add_argument("--make-db", nargs=2, metavar=("SRC_URL", "DST_URL"),
                   help="copy one real run of SRC_URL into --runs runs of DST_URL (timings varied by a seeded "
                        "RNG) and exit")
    g.add_argument("--runs", type=number("--runs", minimum=1), default=10, help="runs to make (default 10)")
    g.add_argument("--src-run", default="latest", help="the source run (id, name or latest; default latest)")
    g.add_argument("--seed", type=int, default=0, help="RNG seed (default 0)")
    g.add_argument("--delta", action="store_true",
                   help="store every copy after the first as a delta run of it (reused nightlies: no timing "
                        "noise; each stores only its stepped and flipped harnesses)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    if args.make_db:
        from farm.bench.db import make_db  # deferred: farm.bench.db (sqlalchemy+store); not needed by farm --help

        src, dst = args.make_db
        print(json.dumps(make_db(src, dst, runs=args.runs, src_run=args.src_run, seed=args.seed,
                                 delta=args.delta), indent=1))
        return 0
    only = tuple(x.strip() for x in (args.only or "").split(",") if x.strip())
    figs = bench.run(quick=args.quick, only=only, dashboard_db=args.dashboard_db)
    t = bench.table(figs)
    print(t)
    if args.out:
        with open(args.out, "w") as f:
            f.write(t + "\n")
    return 0
