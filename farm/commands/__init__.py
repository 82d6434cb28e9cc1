"""One module per ``farm`` subcommand; shared argument helpers live here."""
from __future__ import annotations

import argparse


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=None, metavar="URL",
                   help="database URL (default: $FARM_DB or sqlite:///farm.db; "
                        "e.g. postgresql+psycopg://postgres@127.0.0.1/farm)")


def add_filters(p: argparse.ArgumentParser, name_flag: str = "--name") -> None:
    """Catalog filters. ``farm sweep`` names its run with --name, so there the harness-name
    filter is --match."""
    g = p.add_argument_group("catalog filters (comma lists)")
    g.add_argument("--catalog", default="farm", help="farm (ours), upstream (JAX's own), or all")
    g.add_argument("--primitive", help="e.g. exp,add")
    g.add_argument("--group", help="harness group")
    g.add_argument("--family", help="primitive family module, e.g. elementwise_unary")
    g.add_argument("--dtype", help="e.g. float32,int8")
    g.add_argument(name_flag, dest="name", help="substring or glob of the harness name")
    if name_flag != "--match":
        g.add_argument("--match", dest="name", help=argparse.SUPPRESS)
    g.add_argument("--modules", help="extra harness modules to import (e.g. harnesses.planted)")
    g.add_argument("--limit", type=int, help="at most N harnesses")


def filters_from(args: argparse.Namespace):  # noqa: ANN201
    from farm.catalog import Filters  # deferred: farm.catalog (~0.15 s); not needed by farm --help

    return Filters.parse(catalog=args.catalog, primitive=args.primitive, group=args.group, dtype=args.dtype,
                         family=args.family, name=args.name, modules=args.modules, limit=args.limit)


def store_from(args: argparse.Namespace):  # noqa: ANN201
    from farm.store import open_store  # deferred: farm.store (~0.3 s with sqlalchemy); not needed by farm --help

    return open_store(args.db)
