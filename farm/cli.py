"""The ``farm`` command: parses, calls the library, prints. FarmError → one line, exit 2."""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from farm.errors import FarmError

#: Subcommand modules; each defines register(subparsers). Add new commands here.
COMMANDS = (
    "farm.commands.sweep", "farm.commands.show", "farm.commands.catalog_cmd", "farm.commands.db",
    "farm.commands.serve", "farm.commands.worker", "farm.commands.exchange",
)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="farm",
        description="Lowering Farm: sweep JAX's primitives through trace, lower, cross-lower, export, "
                    "compile, execute and compare on every platform; store and compare the results.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for mod in COMMANDS:
        importlib.import_module(mod).register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    p = parser()
    args = p.parse_args(argv)
    if not getattr(args, "func", None):
        p.print_help()
        return 0
    try:
        rc = args.func(args)
        return int(rc or 0)
    except FarmError as e:
        print(f"farm: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("farm: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
