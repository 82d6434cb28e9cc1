"""farm bench: the benchmark table (figure, value, goal, ratio to goal)."""
from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="run the benchmarks and print a table of figures against their goals")
    p.add_argument("--quick", action="store_true", help="small subsets (a few minutes)")
    p.add_argument("--out", help="also write the Markdown table to this file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from farm import bench

    figs = bench.run(quick=args.quick)
    t = bench.table(figs)
    print(t)
    if args.out:
        with open(args.out, "w") as f:
            f.write(t + "\n")
    return 0
