"""farm db: schema migrations and the store's own check."""
from __future__ import annotations

import argparse

from farm.commands import add_db, number


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("db", help="database maintenance (migrations, checking the store)")
    s = p.add_subparsers(dest="db_command", metavar="ACTION")
    u = s.add_parser("upgrade", help="create or migrate the schema to the newest revision (Alembic)")
    add_db(u)
    u.set_defaults(func=upgrade)
    c = s.add_parser("check", help="verify every artifact's hash, every result's artifact reference, the "
                                   "blob directory ($FARM_ARTIFACT_DIR) and the code_deps rows; exit 1 if anything "
                                   "is wrong",
                     description="Read and hash every stored artifact, follow every reference from a result to "
                                 "an artifact, match the blob directory against the rows, and hash every code_deps "
                                 "row (the jax code each harness ran). Exit 0: clean; 1: something is wrong (see "
                                 "the counts).")
    c.add_argument("--repair", action="store_true",
                   help="remove orphan blob files, mark artifacts whose bytes are lost as damaged (the next "
                        "genuine write of one replaces it) and delete damaged code_deps rows (a cache the next "
                        "sweep writes again); never deletes a result, an artifact or a blob a row names")
    add_db(c)
    c.set_defaults(func=check)
    pr = s.add_parser("prune", help="delete old runs; never one a kept run's stored comparison or delta rows need",
                      description="Keep the newest --keep runs and/or those started within --keep-days (and "
                                  "every running run); delete the rest, except a run a kept run's stored "
                                  "comparison names, or the base whose rows a kept delta run reads (with "
                                  "--materialize the delta run stores them itself and the base may go).")
    pr.add_argument("--keep", type=number("--keep", minimum=0), metavar="N", help="keep the newest N runs")
    pr.add_argument("--keep-days", type=number("--keep-days", float, minimum=0), metavar="D",
                    help="keep the runs started in the last D days")
    pr.add_argument("--materialize", action="store_true",
                    help="a kept delta run whose base would go stores the base's rows as its own")
    pr.add_argument("--dry-run", action="store_true", help="say what would go; change nothing")
    add_db(pr)
    pr.set_defaults(func=prune)
    p.set_defaults(func=lambda a: p.print_help())


def upgrade(args: argparse.Namespace) -> int:
    from farm.store import open_store  # deferred: farm.store (with sqlalchemy); not needed by farm --help

    store = open_store(args.db, upgrade=False)
    store.upgrade()
    print(f"farm: {store.engine.url.render_as_string()} is at the newest schema ({len(store.tables())} tables)")
    return 0


def check(args: argparse.Namespace) -> int:
    from farm.store import open_store  # deferred: farm.store (with sqlalchemy); not needed by farm --help
    from farm.store.check import check as check_store  # deferred like the rest

    store = open_store(args.db, must_exist=True)
    with store.session() as s:
        report = check_store(s, repair=args.repair)
    for line in report.lines():
        print(line)
    if report.repaired:
        again = None
        with store.session() as s:
            again = check_store(s)
        print("after repair: " + ("clean" if again.ok else "still wrong"))
        return 0 if again.ok else 1
    print("farm db check: " + ("clean" if report.ok else "PROBLEMS FOUND (farm db check --repair fixes what it can)"))
    return 0 if report.ok else 1


def prune(args: argparse.Namespace) -> int:
    from sqlalchemy import select  # deferred: sqlalchemy; not needed by farm --help

    from farm.store import open_store  # deferred: farm.store (with sqlalchemy); not needed by farm --help
    from farm.store import prune as retention  # deferred like the rest
    from farm.store.models import Run  # deferred like the rest

    store = open_store(args.db, must_exist=True)
    with store.session() as s:
        plan = retention.plan(s, keep=args.keep, keep_days=args.keep_days, materialize=args.materialize)
        names = dict(s.execute(select(Run.id, Run.name)).tuples().all())
        for line in plan.lines(names):
            print(f"farm db prune: {line}")
        if args.dry_run:
            print("farm db prune: dry run, nothing changed")
            return 0
        n = retention.prune(s, plan)
    with store.session() as s:
        left = retention.summary(s)
    print(f"farm db prune: deleted {n} runs; {left['runs']} left ({left['delta']} stored as deltas)")
    return 0
