"""farm catalog: list or count the harnesses a filter selects."""
from __future__ import annotations

import argparse
import json
import time
from collections import Counter

from farm.commands import add_filters, filters_from


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("catalog", help="list harnesses matching filters (key, fingerprint, limitations)")
    add_filters(p)
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--count", action="store_true", help="counts per group and dtype instead of a list")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from farm import catalog  # deferred: farm.catalog; not needed by farm --help

    t0 = time.perf_counter()
    hs = catalog.select(filters_from(args))
    took = time.perf_counter() - t0
    if args.count:
        groups = Counter(h.group for h in hs)
        dtypes = Counter(h.dtype for h in hs)
        if args.format == "json":
            print(json.dumps({"harnesses": len(hs), "groups": len(groups), "by_group": groups, "by_dtype": dtypes,
                              "select_s": took}, indent=1))
            return 0
        print(f"{len(hs)} harnesses in {len(groups)} groups ({args.catalog} catalog; selected in {took:.2f}s)")
        print("by dtype: " + ", ".join(f"{k} {v}" for k, v in sorted(dtypes.items())))
        print("by group: " + ", ".join(f"{k} {v}" for k, v in sorted(groups.items())))
        return 0
    if args.format == "json":
        print(json.dumps([h.describe() for h in hs], indent=1, default=str))
        return 0
    for h in hs:
        lims = "; ".join(f"{l.stage}@{','.join(l.platforms) or 'all'}: {l.description}" for l in h.limitations)
        print(f"{h.fingerprint}  {h.name:<50} {h.dtype:<10} {' '.join(a.describe() for a in h.args)}"
              + (f"  [{lims}]" if lims else ""))
    return 0
