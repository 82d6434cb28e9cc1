"""The ``farm`` command: parses, calls the library, prints. FarmError → one line, exit 2."""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from farm.errors import FarmError

#: Subcommand modules, in help order; every other module in farm/commands/ that defines
#: register(subparsers) is added after these, so a new command is just a new file.
FIRST = ("sweep", "show", "catalog_cmd", "compare", "serve")


def command_modules() -> list[str]:
    import pkgutil

    import farm.commands as pkg

    names = [m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")]
    ordered = [n for n in FIRST if n in names] + sorted(n for n in names if n not in FIRST)
    return [f"farm.commands.{n}" for n in ordered]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="farm",
        description="Lowering Farm: sweep JAX's primitives through trace, lower, cross-lower, export, "
                    "compile, execute and compare on every platform; store and compare the results.")
    p.add_argument("--version", action="version", version=f"farm {version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for mod in command_modules():
        module = importlib.import_module(mod)
        if hasattr(module, "register"):
            module.register(sub)
    show_defaults(p)
    return p


def version() -> str:
    """The installed distribution's version (pyproject.toml), else the source tree's."""
    from importlib import metadata

    try:
        return metadata.version("farm")
    except metadata.PackageNotFoundError:
        return "(source tree, not installed)"


def show_defaults(p: argparse.ArgumentParser) -> None:
    """Append "(default: X)" to the help of every option of every (sub)command whose default
    is a value and whose help does not already name one."""
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for child in dict.fromkeys(a.choices.values()):
                show_defaults(child)
            continue
        if (not a.option_strings or a.help == argparse.SUPPRESS or a.default in (None, False, argparse.SUPPRESS)
                or "default" in (a.help or "")):
            continue
        shown = str(a.default).replace("%", "%%")
        a.help = f"{a.help} (default: {shown})" if a.help else f"default: {shown}"


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    p = parser()
    try:
        args = p.parse_args(argv)  # inside: an option's type raises ConfigError (e.g. --workers 0)
        if not getattr(args, "func", None):
            p.print_help()
            return 0
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
    except Exception as e:  # a full disk, a locked database, a lost server: one line, not a traceback
        try:
            from farm.store.failures import explain  # deferred: only on a failure
        except ImportError:  # a version's standalone worker has jax and numpy, no database driver
            raise e from None
        err = explain(e)
        if err is None:
            raise
        print(f"farm: error: {err}", file=sys.stderr)
        return err.exit_code


if __name__ == "__main__":
    sys.exit(main())
