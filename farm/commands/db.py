"""farm db: schema migrations and the store's own check."""
from __future__ import annotations

import argparse

from farm.commands import add_db


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("db", help="database maintenance (migrations, checking the store)")
    s = p.add_subparsers(dest="db_command", metavar="ACTION")
    u = s.add_parser("upgrade", help="create or migrate the schema to the newest revision (Alembic)")
    add_db(u)
    u.set_defaults(func=upgrade)
    c = s.add_parser("check", help="verify every artifact's hash, every result's artifact reference and the "
                                   "blob directory ($FARM_ARTIFACT_DIR); exit 1 if anything is wrong",
                     description="Read and hash every stored artifact, follow every reference from a result to "
                                 "an artifact, and match the blob directory against the rows. Exit 0: clean; 1: "
                                 "something is wrong (see the counts).")
    c.add_argument("--repair", action="store_true",
                   help="remove orphan blob files and mark artifacts whose bytes are lost as damaged (the next "
                        "genuine write of one replaces it); never deletes a row or a blob a row names")
    add_db(c)
    c.set_defaults(func=check)
    p.set_defaults(func=lambda a: p.print_help())


def upgrade(args: argparse.Namespace) -> int:
    from farm.store import open_store  # deferred: farm.store (~0.3 s with sqlalchemy); not needed by farm --help

    store = open_store(args.db, upgrade=False)
    store.upgrade()
    print(f"farm: {store.engine.url.render_as_string()} is at the newest schema ({len(store.tables())} tables)")
    return 0


def check(args: argparse.Namespace) -> int:
    from farm.store import open_store  # deferred: farm.store (~0.3 s with sqlalchemy); not needed by farm --help
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
