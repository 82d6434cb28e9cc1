"""farm coverage: the primitive × dtype × platform table from the limitations data."""
from __future__ import annotations

import argparse
from pathlib import Path

from farm.commands import add_filters, filters_from
from farm.platforms import LOWERING_PLATFORMS, parse_list


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("coverage", help="primitive × dtype × platform coverage from the limitations data")
    add_filters(p)
    p.add_argument("--platforms", default=None, help="comma list (default: cpu,cuda,rocm,tpu)")
    p.add_argument("--format", choices=("md", "json"), default="md")
    p.add_argument("--out", default=None, metavar="FILE", help="write here instead of stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from farm import catalog  # deferred: farm.catalog (~0.15 s); not needed by farm --help
    from farm.catalog.coverage import coverage, to_json, to_markdown  # deferred: farm.catalog.coverage (~0.18 s); not needed by farm --help

    platforms = parse_list(args.platforms, LOWERING_PLATFORMS, "platform") or LOWERING_PLATFORMS
    cov = coverage(catalog.select(filters_from(args)), platforms, catalog=args.catalog)
    text = to_markdown(cov) if args.format == "md" else to_json(cov) + "\n"
    if args.out:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}: {len(cov.rows)} groups, {cov.harnesses} harnesses, {len(cov.gaps)} gaps")
    else:
        print(text, end="")
    return 0
