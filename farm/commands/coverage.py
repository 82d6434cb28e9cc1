"""farm coverage: the primitive × dtype × platform table from the limitations data, and per
group how many harnesses get an independent numeric verdict (reference / invariant / none,
with the reason for none)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from farm.commands import add_filters, filters_from, out_file
from farm.platforms import LOWERING_PLATFORMS, parse_list
from farm.results import SHAPE_KINDS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("coverage", help="primitive × dtype × platform coverage from the limitations data")
    add_filters(p)
    p.add_argument("--platforms", default=None, help="comma list (default: cpu,cuda,rocm,tpu)")
    p.add_argument("--format", choices=("md", "json"), default="md")
    p.add_argument("--out", default=None, metavar="FILE", type=out_file("--out"), help="write here instead of stdout")
    p.add_argument("--no-verdicts", dest="verdicts", action="store_false",
                   help="skip the independent-verdict table (it traces every harness: ~2 ms each)")
    p.add_argument("--shapes", default="static", metavar="KINDS",
                   help="static,symbolic: also count the symbolic variants (farm sweep --shapes symbolic), the "
                        "hand-written ones and why the others have none (draws every harness's arguments)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from farm import catalog  # deferred: farm.catalog; not needed by farm --help
    from farm.catalog.coverage import coverage, to_json, to_markdown  # deferred: farm.catalog.coverage; not needed by farm --help

    platforms = parse_list(args.platforms, LOWERING_PLATFORMS, "platform") or LOWERING_PLATFORMS
    harnesses = catalog.select(filters_from(args))
    cov = coverage(harnesses, platforms, catalog=args.catalog)
    verdicts = _verdicts(harnesses) if args.verdicts else None
    shapes = parse_list(args.shapes, SHAPE_KINDS, "shape kind (--shapes)") or ("static",)
    symbolic = None
    if "symbolic" in shapes:
        from farm.pipeline.symbolic import census  # noqa: PLC0415  (draws arguments: jax)

        symbolic = census(harnesses)
    api_rows = None
    if args.catalog == "api":  # per jax module: its public callables against the harnesses
        from farm.catalog import api  # noqa: PLC0415  (imports jax's modules to introspect them)

        api_rows = api.coverage()  # the whole catalog, whatever the filters select
    if args.format == "md":
        text = to_markdown(cov)
        if api_rows is not None:
            text = api.coverage_markdown(api_rows) + "\n" + text
        if verdicts is not None:
            from farm.reference import coverage_markdown  # noqa: PLC0415  (with _verdicts: jax and the rules)

            text += "\n" + coverage_markdown(verdicts)
        if symbolic is not None:
            text += "\n" + _symbolic_markdown(symbolic)
    else:
        data = json.loads(to_json(cov))
        if verdicts is not None:
            data["verdicts"] = verdicts
        if api_rows is not None:
            data["api"] = [{"module": r.label, "public": len(r.public), "covered": len(r.covered),
                            "percent": round(r.percent, 1), "missing": dict(r.missing)} for r in api_rows]
        if symbolic is not None:
            data["symbolic"] = symbolic
        text = json.dumps(data, indent=1) + "\n"
    if args.out:
        Path(args.out).write_text(text)
        extra = "" if verdicts is None else (f"; independent verdicts: reference {verdicts['reference']}, "
                                             f"invariant {verdicts['invariant']}, none {verdicts['none']}")
        print(f"wrote {args.out}: {len(cov.rows)} groups, {cov.harnesses} harnesses, {len(cov.gaps)} gaps{extra}")
    else:
        print(text, end="")
    return 0


def _symbolic_markdown(c: dict) -> str:
    lines = ["## Symbolic variants (`--shapes symbolic`)", "",
             f"{c['variants']} of {c['harnesses']} harnesses have a symbolic variant ({c['declared']} hand-written); "
             f"{c['harnesses'] - c['variants']} have none:", "", "| why none | harnesses |", "|---|---|"]
    lines += [f"| {why} | {n} |" for why, n in c["skipped"].items()]
    return "\n".join(lines) + "\n"


def _verdicts(harnesses: list) -> dict:
    """The static verdict coverage (traces each harness), with a progress bar on a terminal."""
    import sys  # noqa: PLC0415

    from tqdm import tqdm  # noqa: PLC0415  (only for this table)

    from farm.reference import coverage as verdict_coverage  # noqa: PLC0415  (jax and the rules)

    return verdict_coverage(harnesses, progress=lambda hs: tqdm(hs, desc="tracing", unit="harness",
                                                                  disable=not sys.stderr.isatty(), leave=False))
