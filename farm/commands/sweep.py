"""farm sweep: run a selection of the catalog on Ray and store the results."""
from __future__ import annotations

import argparse
import sys

from farm.commands import add_db, add_filters, filters_from, store_from
from farm.commands.show import print_run
from farm.platforms import DEVICE_KINDS, LOWERING_PLATFORMS, parse_list
from farm.results import Options

DEFAULT_PRIMITIVES = "exp,sin,tanh,log1p,add,mul,div,max"
DEFAULT_DTYPES = "float32,float16,int32"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="run harnesses through every stage on Ray and store the results",
                       description="Select harnesses, fan them out to Ray workers (a local cluster unless "
                                   "--address), store every stage's result, print the summary matrix.")
    add_filters(p, name_flag="--match")
    add_db(p)
    p.add_argument("--platforms", default="cpu,cuda,rocm,tpu", help="platforms to lower and export for")
    p.add_argument("--run-on", default="cpu", help="device kinds to compile and execute on natively (cpu,gpu,tpu)")
    p.add_argument("--address", help="join an existing Ray cluster (e.g. 127.0.0.1:6379) instead of starting one")
    p.add_argument("--workers", type=int, help="worker processes (default: one per core / cpu_slot)")
    p.add_argument("--name", dest="run_name", help="name the run (the harness-name filter is --match)")
    p.add_argument("--resume", metavar="RUN", help="continue an interrupted run (id, name or latest)")
    p.add_argument("--force", action="store_true", help="recompute even if results are cached")
    p.add_argument("--timeout", type=float, default=120.0, help="per-harness time limit in seconds")
    p.add_argument("--batch", type=int, default=8, help="harnesses per worker call")
    p.add_argument("--repeats", type=int, default=3, help="timed executions per harness")
    p.add_argument("--no-crossexec", action="store_true", help="skip running other platforms' modules on CPU")
    p.add_argument("--default", action="store_true",
                   help=f"the quick default selection ({DEFAULT_PRIMITIVES} in {DEFAULT_DTYPES})")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from farm import catalog  # deferred: farm.catalog (~0.15 s); not needed by farm --help
    from farm.run.sweep import SweepConfig, sweep  # deferred: farm.run.sweep (~1 s, ray+jax); not needed by farm --help

    if args.default:
        args.primitive = args.primitive or DEFAULT_PRIMITIVES
        args.dtype = args.dtype or DEFAULT_DTYPES
    platforms = parse_list(args.platforms, LOWERING_PLATFORMS, "platform")
    run_on = parse_list(args.run_on, DEVICE_KINDS, "device kind (--run-on)")
    store = store_from(args)
    filters = filters_from(args)
    if args.resume:
        from farm.store import queries  # deferred: farm.store.queries (~0.5 s, sqlalchemy); not needed by farm --help

        with store.session() as s:
            r = queries.resolve_run(s, args.resume)
            filters = catalog.Filters.from_dict(r.filters)
            platforms, run_on = tuple(r.platforms), tuple(r.run_on)
    hs = catalog.select(filters)
    if not hs:
        print("farm: no harness matches these filters", file=sys.stderr)
        return 2
    opts = Options(platforms=platforms, run_on=run_on, repeats=args.repeats, crossexec=not args.no_crossexec)
    cfg = SweepConfig(workers=args.workers, address=args.address, batch=args.batch, timeout_s=args.timeout,
                      modules=filters.modules)
    print(f"farm: sweeping {len(hs)} harnesses for {','.join(platforms)}, running on {','.join(run_on)}",
          file=sys.stderr)
    try:
        run_row, stats = sweep(store, hs, options=opts, catalog=filters.catalog, filters=filters.to_dict(),
                               config=cfg, name=args.run_name, resume=args.resume, force=args.force)
    except KeyboardInterrupt:
        from farm.store import queries  # deferred: farm.store.queries (~0.5 s, sqlalchemy); not needed by farm --help

        with store.session() as s:
            r = queries.resolve_run(s, args.resume or "latest")
            print(f"farm: interrupted; finished results are kept. Resume with: farm sweep --resume {r.name}",
                  file=sys.stderr)
        return 130
    print(f"farm: run {run_row.name} (id {run_row.id}): {stats.done} run ({stats.downstream_reused} of them "
          f"re-lowered with compile/execute/compare reused), {stats.cached} reused whole, "
          f"{stats.crashed} crashed, {stats.timeouts} timed out in {stats.wall_s:.1f}s; "
          f"peak worker RSS {max(stats.peak_rss.values(), default=0) / 2**20:.0f} MiB", file=sys.stderr)
    print_run(store, str(run_row.id), args.format, max_rows=60)
    url = args.db or "sqlite:///farm.db"
    print(f"\nOpen the dashboard:  .venv/bin/farm serve --db {url}   then browse http://127.0.0.1:8000/",
          file=sys.stderr)
    return 0
