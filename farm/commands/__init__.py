"""One module per ``farm`` subcommand; shared argument helpers live here."""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from farm.errors import ConfigError


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=None, metavar="URL",
                   help="database URL (default: $FARM_DB or sqlite:///farm.db; "
                        "e.g. postgresql+psycopg://postgres@127.0.0.1/farm)")


class _NamesARun(argparse.Action):
    """``--name`` on a command without a run to name: one meaning per option name across
    commands (``--name`` names a run in sweep, import and replay), so it is an error here."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        raise ConfigError("--name names a run (farm sweep, import, replay); filter harnesses by name with --match")


def add_filters(p: argparse.ArgumentParser, names_run: bool = False) -> None:
    """Catalog filters. The harness-name filter is --match in every command: --name always names
    a run (``names_run``: the command adds its own --name), and elsewhere is an error saying so."""
    g = p.add_argument_group("catalog filters (comma lists)")
    g.add_argument("--catalog", default="farm",
                   help="farm (ours), upstream (JAX's own), all (both), or shape_poly (JAX's shape_poly_test "
                        "harnesses, read from --jax-repo)")
    g.add_argument("--jax-repo", metavar="PATH",
                   help="with --catalog shape_poly: a jax git checkout or bare mirror; its tests/shape_poly_test.py "
                        "is read at the installed jax's tag (jax-vVERSION)")
    g.add_argument("--primitive", help="e.g. exp,add")
    g.add_argument("--group", help="harness group")
    g.add_argument("--family", help="primitive family module, e.g. elementwise_unary")
    g.add_argument("--dtype", help="e.g. float32,int8")
    g.add_argument("--match", dest="name", help="substring or glob of the harness name")
    if not names_run:
        p.add_argument("--name", action=_NamesARun, dest="_names_a_run", default=argparse.SUPPRESS,
                       help=argparse.SUPPRESS)
    g.add_argument("--modules", help="extra harness modules to import (e.g. harnesses.planted)")
    g.add_argument("--limit", type=number("--limit", minimum=1), help="at most N harnesses")


def filters_from(args: argparse.Namespace):  # noqa: ANN201
    from farm.catalog import Filters  # deferred: farm.catalog; not needed by farm --help

    return Filters.parse(catalog=args.catalog, primitive=args.primitive, group=args.group, dtype=args.dtype,
                         family=args.family, name=args.name, modules=args.modules, limit=args.limit,
                         jax_repo=os.path.abspath(args.jax_repo) if getattr(args, "jax_repo", None) else None)


def store_from(args: argparse.Namespace, create: bool = False):  # noqa: ANN201
    """The store named by --db ($FARM_DB, sqlite:///farm.db). Read-only commands refuse a SQLite
    file that does not exist; writing ones (``create``) create it and say so on stderr."""
    if create:
        return open_or_create(args.db)
    from farm.store import open_store  # deferred: farm.store (with sqlalchemy); not needed by farm --help

    return open_store(args.db, must_exist=True)


def open_or_create(url: str | None):  # noqa: ANN201
    """``open_store`` for writing commands: a new SQLite file is created and reported on stderr."""
    from farm.store.db import open_store, sqlite_file  # deferred: farm.store (with sqlalchemy); not needed by farm --help

    resolved = url or os.environ.get("FARM_DB") or "sqlite:///farm.db"
    path = sqlite_file(resolved)
    new = path is not None and not path.exists()
    store = open_store(resolved)
    if new:
        print(f"farm: created a new database {resolved}", file=sys.stderr)
    return store


def number(flag: str, kind: type = int, minimum: float | None = None, above: float | None = None,
           maximum: float | None = None) -> Callable[[str], float]:
    """An argparse ``type`` for ``flag``: parses ``kind`` and checks its range; a bad value is a
    ``ConfigError`` naming the flag (one line from ``farm.cli.main``), e.g.
    ``--workers must be an integer >= 1, not 0``."""
    noun = "an integer" if kind is int else "a number"
    bounds = [f">= {minimum:g}" if minimum is not None else "", f"> {above:g}" if above is not None else "",
              f"<= {maximum:g}" if maximum is not None else ""]
    want = f"{noun} {' and '.join(b for b in bounds if b)}".strip()

    def parse(text: str) -> float:
        try:
            v = kind(text)
        except ValueError:
            raise ConfigError(f"{flag} must be {want}, not {text!r}") from None
        if kind is float and v != v:  # NaN passes every comparison below
            raise ConfigError(f"{flag} must be {want}, not {text!r}")
        if ((minimum is not None and v < minimum) or (above is not None and v <= above)
                or (maximum is not None and v > maximum)):
            raise ConfigError(f"{flag} must be {want}, not {text}")
        return v

    parse.__name__ = kind.__name__  # argparse names the type in its own messages
    return parse


def out_file(flag: str) -> Callable[[str], str]:
    """An argparse ``type`` for a file ``flag`` writes: a path whose directory exists and which
    is not itself a directory, else a ``ConfigError`` naming the flag, before any work is done
    (``--out ''`` was a traceback after the jobs were selected)."""

    def parse(text: str) -> str:
        if not text.strip():
            raise ConfigError(f"{flag} must name a file, not {text!r}")
        if os.path.isdir(text):
            raise ConfigError(f"{flag} {text!r} is a directory: name a file in it")
        parent = os.path.dirname(os.path.abspath(text))
        if not os.path.isdir(parent):
            raise ConfigError(f"{flag} {text!r}: no directory {parent!r} to write it in")
        return text

    parse.__name__ = "file"
    return parse


def statuses(text: str | None) -> tuple[str, ...]:
    """A --status comma list, each one of ``farm.results.STATUSES`` (else ``UnknownName``)."""
    from farm.platforms import parse_list  # deferred like the rest: farm --help imports no more than it needs
    from farm.results import STATUSES  # deferred like the rest: farm --help imports no more than it needs

    return parse_list(text, STATUSES, "status")
