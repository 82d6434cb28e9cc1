"""farm db: schema migrations."""
from __future__ import annotations

import argparse

from farm.commands import add_db


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("db", help="database maintenance (migrations)")
    s = p.add_subparsers(dest="db_command", metavar="ACTION")
    u = s.add_parser("upgrade", help="create or migrate the schema to the newest revision (Alembic)")
    add_db(u)
    u.set_defaults(func=upgrade)
    p.set_defaults(func=lambda a: p.print_help())


def upgrade(args: argparse.Namespace) -> int:
    from farm.store import open_store  # deferred: farm.store (~0.3 s with sqlalchemy); not needed by farm --help

    store = open_store(args.db, upgrade=False)
    store.upgrade()
    print(f"farm: {store.engine.url.render_as_string()} is at the newest schema ({len(store.tables())} tables)")
    return 0
