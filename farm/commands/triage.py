"""farm triage: a run's failures as clusters (one per cause), worst first; acknowledge one.

``farm triage RUN`` lists the clusters of RUN (or of every run of the configuration or
jax-version sweep RUN: its series of runs); ``farm triage ack CLUSTER --note
... --url ...`` marks a cluster as a known failure, which ``farm compare``'s gate then does
not fail on (a change in it is still reported)."""
from __future__ import annotations

import argparse
import json
from typing import Any

from farm.commands import add_db, number, store_from
from farm.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("triage", help="a run's failures grouped by cause (clusters), worst first; "
                                      "'triage ack CLUSTER' marks one as known",
                       description="Every failing record (fail, error, crashed, timeout, unexpected_pass) gets a "
                                   "signature: stage, status, primitive, error type, the error with numbers, "
                                   "shapes, addresses, paths and ids stripped, and for numeric failures the class "
                                   "of the disagreement; a symbolic-shape failure whose harness passes its static "
                                   "stages is labelled symbolic-only (or symbolic-only on one platform). Records "
                                   "with one signature are one cluster, across "
                                   "harnesses, platforms, runs, configurations and jax versions. "
                                   "'farm triage ack CLUSTER --note TEXT [--url URL]' acknowledges a cluster "
                                   "('--remove' takes that back).")
    p.add_argument("target", nargs="*", metavar="RUN | ack CLUSTER",
                   help="run id, name, latest or previous, or a --config/--jax sweep's NAME (all its runs); "
                        "or 'ack' and a cluster key (default: latest)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--limit", type=number("--limit", minimum=1), default=20, help="clusters to list in text")
    p.add_argument("--expected", action="store_true",
                   help="also cluster the expected failures (the known gaps harnesses declare as Limitation data)")
    p.add_argument("--shapes", choices=("both", "static", "symbolic"), default="both",
                   help="the clusters of static stages or of the symbolic variant's (farm sweep --shapes) alone")
    p.add_argument("--note", help="with ack: what is known (required to acknowledge)")
    p.add_argument("--url", help="with ack: a link to the upstream issue")
    p.add_argument("--remove", action="store_true", help="with ack: take the acknowledgement back")
    add_db(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from farm.reports import triage  # deferred: farm.store (sqlalchemy); not needed by farm --help

    target = list(args.target) or ["latest"]
    if target[0] == "ack":
        return _ack(args, target[1:])
    if len(target) != 1:
        raise ConfigError("farm triage takes one RUN (or: farm triage ack CLUSTER --note TEXT)")
    if args.note or args.url or args.remove:
        raise ConfigError("--note, --url and --remove go with 'farm triage ack CLUSTER'")
    with store_from(args).session() as s:
        rep = triage.triage(s, target[0], expected=args.expected, shapes=args.shapes)
    if args.format == "json":
        print(json.dumps(rep, indent=1, default=str))
    else:
        print(render_text(rep, args.limit))
    return 0


def _ack(args: argparse.Namespace, rest: list[str]) -> int:
    from farm.reports import triage  # deferred: farm.store (sqlalchemy); not needed by farm --help
    from farm.store import triage as triage_rows  # deferred like farm.reports

    if len(rest) != 1:
        raise ConfigError("farm triage ack takes one CLUSTER key (as `farm triage RUN` lists them)")
    if not args.remove and not (args.note or "").strip():
        raise ConfigError("farm triage ack CLUSTER needs --note TEXT (what is known; --url links the issue)")
    with store_from(args).session() as s:
        if args.remove:
            triage_rows.unacknowledge(s, rest[0])
            print(f"cluster {rest[0]} is no longer acknowledged")
            return 0
        a = triage.acknowledge(s, rest[0], args.note.strip(), args.url)
    if args.format == "json":
        print(json.dumps(a, indent=1, default=str))
    else:
        print(f"acknowledged {a['cluster']}: {a['summary']}\n  {len(a['harnesses'])} harnesses on "
              f"{', '.join(a['platforms'])}; note: {a['note']}" + (f"; {a['url']}" if a["url"] else ""))
    return 0


def repro_command(c: dict[str, Any]) -> str:
    """The command that reruns a cluster's example (``farm repro``)."""
    ex = c["example"]
    run = (ex.get("run") or {}).get("name") or (ex.get("run") or {}).get("id")
    return f"farm repro {ex['harness']} --run {run} --platform {ex['platform']}"


def render_text(rep: dict[str, Any], limit: int = 20) -> str:
    runs = " + ".join(f"{r['name']} (id {r['id']})" for r in rep["runs"])
    cs = rep["clusters"]
    lines = [f"triage of {runs}: {rep['failing_records']} failing records in {len(cs)} clusters "
             f"({rep['new']} new, {rep['acknowledged']} acknowledged)"]
    if cs:
        lines.append(f"{'#':>3}  {'cluster':12}  {'status':15} {'records':>7} {'harnesses':>9}  "
                     f"{'platforms':18} {'first seen':16} new")
    for i, c in enumerate(cs[:limit], 1):
        sig = c["signature"]
        lines.append(f"{i:>3}  {c['key']:12}  {sig['status']:15} {c['records']:>7} {len(c['harnesses']):>9}  "
                     f"{','.join(c['platforms'])[:18]:18} {str((c['first_seen'] or {}).get('name'))[:16]:16} "
                     f"{'new' if c['new'] else ''}")
        lines.append(f"     {c['summary'][:150]}")
        if c["acknowledged"]:
            a = c["acknowledged"]
            lines.append(f"     acknowledged: {a['note']}" + (f" <{a['url']}>" if a.get("url") else ""))
            grew = c.get("since_ack") or {}
            if grew.get("new_harnesses") or grew.get("new_platforms"):
                lines.append(f"     since acknowledged: +{len(grew.get('new_harnesses', []))} harnesses"
                             + (f", new platforms {', '.join(grew['new_platforms'])}" if grew.get("new_platforms")
                                else ""))
        lines.append(f"     dtypes {','.join(c['dtypes'])}; e.g. {repro_command(c)}")
    if len(cs) > limit:
        lines.append(f"... {len(cs) - limit} more clusters (--limit, or --format json)")
    if rep.get("causes"):
        lines.append("one error across several primitives (clusters that differ only in the primitive):")
    for d in rep.get("causes", [])[:limit]:
        prims = ", ".join(d["primitives"][:8]) + (", ..." if len(d["primitives"]) > 8 else "")
        lines.append(f"  {len(d['clusters'])} clusters, {d['harnesses']} harnesses [{prims}] on "
                     f"{','.join(d['platforms'])}: {d['summary'][:120]}")
    for a in rep["acknowledged_gone"]:
        lines.append(f"acknowledged cluster {a['cluster']} is gone here (probably fixed): {a['summary']}")
    return "\n".join(lines)
