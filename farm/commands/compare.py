"""farm compare: what changed between two runs (status, numerics, performance, flakiness).

A status regression is a result that went bad stage by stage, or a harness x platform
whose worst status went bad (a crash or timeout of the whole harness counts for each of
its platforms), or a result the candidate should have and lacks (see
``farm.analysis.gate``)."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from farm.commands import add_db, number, store_from
from farm.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="compare a candidate run with a base run; exit 1 on regressions",
                       description="Status flips, numeric drift, performance changes and flaky results of "
                                   "CAND relative to BASE, worst first and grouped by primitive. A harness "
                                   "that crashes or times out, a platform it lost, or a harness that CAND's "
                                   "catalog selection still holds and CAND lacks is a status regression. "
                                   "Exits 1 when "
                                   "a regression of a --fail-on kind is present. The report of two finished "
                                   "runs is stored and reused for the same settings.")
    p.add_argument("base", help="base run: id, name, latest or previous (with --across-config: the sweep's NAME)")
    p.add_argument("cand", nargs="?", help="candidate run: id, name, latest or previous")
    p.add_argument("--across-config", metavar="KEY=A,B",
                   help="compare two configurations of one configuration sweep (farm sweep --config --name BASE): "
                        "its two runs that differ only in KEY, A then B")
    p.add_argument("--format", choices=("text", "md", "json"), default="text")
    p.add_argument("--fail-on", default="status,numeric",
                   help="regression kinds that make the exit status 1 (comma list of status,numeric,perf; "
                        "'none' never fails)")
    p.add_argument("--threshold", type=number("--threshold", float, minimum=0), default=0.2,
                   help="relative change a performance number must exceed (default 0.2 = 20%%)")
    p.add_argument("--history", type=number("--history", minimum=0), default=20, metavar="N",
                   help="earlier runs to use for performance history and flakiness (default 20)")
    p.add_argument("--all", action="store_true", help="also list performance results judged noise")
    p.add_argument("--recompute", action="store_true",
                   help="recompute the report even if one is stored for these runs and settings")
    add_db(p)
    p.set_defaults(func=run)


def fail_kinds(text: str) -> list[str]:
    from farm.analysis import KINDS  # deferred: farm.analysis; not needed by farm --help

    kinds = [k.strip() for k in text.split(",") if k.strip() and k.strip() != "none"]
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise ConfigError(f"--fail-on: unknown kind {bad[0]!r} (valid: {', '.join(KINDS)}, none)")
    return kinds


def across_config(store: Any, base: str, spec: str, cand: str | None) -> tuple[str, str]:
    """The run ids of the two configurations of sweep ``base`` that differ only in KEY (A, then B)."""
    from farm.store import series  # deferred: farm.store (sqlalchemy); not needed by farm --help

    key, sep, values = spec.partition("=")
    pair = [v.strip() for v in values.split(",") if v.strip()]
    if cand is not None or not sep or len(pair) != 2:
        raise ConfigError("--across-config KEY=A,B takes one sweep NAME, e.g. --across-config x64=off,on nightly")
    with store.session() as s:
        a, b = series.config_pair(s, base, key.strip(), pair[0], pair[1])
        return str(a.id), str(b.id)


def run(args: argparse.Namespace) -> int:
    from farm.analysis import failing, render_markdown, render_text  # deferred: farm.analysis; not needed by farm --help
    from farm.reports import comparison  # deferred: farm.reports (sqlalchemy); not needed by farm --help
    from farm.analysis.clusters import acknowledged_changes  # deferred like the rest
    from farm.reports import triage  # deferred like the rest

    kinds = fail_kinds(args.fail_on)
    if args.cand is None and not args.across_config:
        raise ConfigError("compare needs two runs: BASE CAND (or --across-config KEY=A,B NAME)")
    store = store_from(args)
    if args.across_config:
        args.base, args.cand = across_config(store, args.base, args.across_config, args.cand)
    settings = comparison.Settings(history=max(0, args.history), threshold=args.threshold, include_noise=args.all)
    rep = comparison.comparison(store, args.base, args.cand, settings, recompute=args.recompute).report
    with store.session() as s:
        acks = triage.acknowledgements(s)
    changed = acknowledged_changes(rep.get("clusters") or {}, acks)
    if args.format == "json":
        print(json.dumps({**rep, "acknowledged_changes": changed}, indent=1, default=str))
    elif args.format == "md":
        print(render_markdown(rep))
    else:
        print(render_text(rep))
    for e in changed:  # an acknowledgement silences the gate, not a change in what it covers
        print(f"acknowledged cluster {e['key']} {'gone (probably fixed)' if e['change'] == 'gone' else e['change']}"
              f": {e['summary'][:120]} ({acks[e['key']]['note']})", file=sys.stderr if args.format == "json" else sys.stdout)
    bad = failing(rep, kinds, acknowledged=set(acks))
    quiet = {k: sorted(set(v) - set(bad.get(k, ()))) for k, v in failing(rep, kinds).items()}
    if any(quiet.values()):
        print("farm: in acknowledged clusters, not failing the gate (" + "; ".join(
            f"{k}: {', '.join(v)}" for k, v in quiet.items() if v) + ")", file=sys.stderr)
    if bad:
        print("farm: regressions (" + "; ".join(f"{k}: {', '.join(v)}" for k, v in bad.items()) + ")",
              file=sys.stderr)
        return 1
    return 0
