"""farm bisect: since which jax release, which jax commit, or which stored run is a harness bad."""
from __future__ import annotations

import argparse
import json
import re
from typing import Any

from farm.commands import add_db, number, store_from
from farm.errors import HarnessNotFound

_KEY = re.compile(r"[0-9a-f]{12}")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bisect", help="find the first jax release, jax commit or stored run where a harness is bad",
                       description="Bisects between a good and a bad point. Releases (--good 0.8.3 --bad 0.9.2): "
                                   "each in its provisioned venv; with --jax-repo it goes on inside the jax commits "
                                   "between the last good and the first bad release. Commits (--jax-repo PATH "
                                   "--good REF --bad REF): each commit's jax over one jaxlib; a commit whose jax "
                                   "does not import is skipped. --history: the stored runs (no computing). Bad "
                                   "means the bad end's failure signature, or every --when condition.")
    p.add_argument("target", metavar="HARNESS|CLUSTER",
                   help="a harness name (comma list: all run at each step), or a failure signature key (12 hex, "
                        "farm.analysis.signatures) found in --db")
    p.add_argument("--good", required=True, help="a jax release, a jax commit/tag (--jax-repo) or a run (--history)")
    p.add_argument("--bad", required=True, help="likewise")
    p.add_argument("--when", action="append", default=[], metavar="COND",
                   help="what bad means (repeatable, all must hold): status=fail, ulp>4, execute_s>2x, "
                        "error~REGEX, census.composites~chlo.acos, lower.module_sha256!=good")
    p.add_argument("--jax-repo", metavar="PATH", help="a jax git checkout (bisect its commits)")
    p.add_argument("--jaxlib", default="paired", metavar="paired|fixed|VERSION",
                   help="releases: paired (jax and jaxlib of each release) or fixed (each release's jax over this "
                        "environment's jaxlib); commits: this environment's jaxlib, or VERSION's")
    p.add_argument("--index-url", help="a package index for releases (e.g. a nightly wheel index)")
    p.add_argument("--history", action="store_true", help="bisect the runs stored in --db (no computing)")
    p.add_argument("--catalog", default="farm", choices=("farm", "upstream", "shape_poly", "pallas"),
                   help="the harness's catalog")
    p.add_argument("--platforms", default="cpu", help="platforms to lower and export for at each step")
    p.add_argument("--shapes", default="static", metavar="KINDS",
                   help="static, symbolic or static,symbolic: what each step runs (symbolic: the harness's "
                        "symbolic variant, for a failure seen only with symbolic dimensions)")
    p.add_argument("--pallas-targets", metavar="TARGETS",
                   help="a Pallas harness's targets at each step (tpu:v5e, cuda:triton, ...; as farm sweep)")
    p.add_argument("--vjp", nargs="?", const="1", default="0", metavar="ORDER",
                   help="each step differentiates the harness too (order 1, or 2): for a gradient's failure")
    p.add_argument("--timeout", type=number("--timeout", float, above=0), default=600.0,
                   help="seconds one step may take")
    p.add_argument("--no-cache", action="store_true", help="run every step even if its result is cached")
    p.add_argument("--format", choices=("text", "json"), default="text")
    add_db(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from farm.analysis.bisection import Badness, parse_when  # deferred: not needed by farm --help

    conditions = parse_when(args.when)
    names, primitives, badness = _target(args)
    if conditions:
        badness = Badness(conditions=conditions, primitives=primitives)
    if args.history:
        from farm.run.bisect.history import bisect_history

        ans = bisect_history(store_from(args), args.target, names, args.good, args.bad, badness)
    else:
        from farm.commands.sweep import checks
        from farm.platforms import LOWERING_PLATFORMS, parse_targets
        from farm.run.bisect.driver import Target, bisect

        platforms = parse_targets(args.platforms, LOWERING_PLATFORMS, "platform")
        options: dict[str, Any] = {"platforms": list(platforms), "run_on": ["cpu"], "crossexec": False,
                                   "keep_modules": False}
        # the checks a sweep reads, read alike; at their defaults they leave the options (and the
        # step cache's keys) as before they existed
        from farm.results import Options

        asked = checks(args)
        options.update({k: v for k, v in Options(**asked).to_dict().items() if k in asked})
        target = Target(args.target, names, args.catalog, options, primitives, badness)
        ans = bisect(target, args.good, args.bad, jax_repo=args.jax_repo, jaxlib=args.jaxlib,
                     index_url=args.index_url, timeout_s=args.timeout, use_cache=not args.no_cache).to_dict()
    print(json.dumps(ans, indent=1, default=str) if args.format == "json" else render(ans))
    return 0


def _target(args: argparse.Namespace) -> tuple[tuple[str, ...], tuple[str, ...], Any]:
    """(harness names, their primitives, the badness a CLUSTER names or None)."""
    from farm.analysis.bisection import Badness

    if _KEY.fullmatch(args.target):
        names, prims = _cluster_harnesses(args, args.target)
        return names, prims, Badness(signatures=frozenset([args.target]), primitives=prims)
    names = tuple(n.strip() for n in args.target.split(",") if n.strip())
    if args.history:
        return names, (), None
    from farm import catalog

    known = {h.name: h for h in catalog.load(args.catalog)}
    for n in names:
        if n not in known:
            from farm.errors import UnknownName

            raise UnknownName(f"harness in the {args.catalog} catalog", n, known)
    prims = tuple(sorted({known[n].primitive for n in names}))
    return names, prims, None


def _cluster_harnesses(args: argparse.Namespace, key: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A harness of the newest run in --db whose failure has signature ``key``."""
    from farm.analysis.signatures import signature
    from farm.store import queries
    from farm.store.models import Run
    from sqlalchemy import select

    store = store_from(args)
    with store.session() as s:
        for run_id in s.scalars(select(Run.id).order_by(Run.id.desc()).limit(20)):
            for r in queries.results(s, run_id, status="fail,error,crashed,timeout,unexpected_pass"):
                sig = signature(r)
                if sig is not None and sig.key == key:
                    return (r["harness"],), sig.primitives
    raise HarnessNotFound(f"no failure with signature {key} in the newest 20 runs of the database")


def render(a: dict[str, Any], indent: str = "") -> str:
    what = {"history": "stored runs"}.get(a["mode"], a["mode"])
    lines = [f"{indent}bisect {a['target']} over {a['points']} {what} (bad means: {a['bad_means']})"]
    for k in ("last_good", "first_bad"):
        p = a[k]
        lines.append(f"{indent}{k.replace('_', ' ')}: {p['label']}" +
                     (f"  {p['commit']}  {p.get('subject', '')}" if p.get("commit") else ""))
        if k == "first_bad" and p.get("files") is not None:
            lines.append(f"{indent}  files under jax/_src: {', '.join(p['files']) or '(none)'}")
    if a.get("ambiguous"):
        lines.append(f"{indent}could not judge (skipped): {', '.join(a['ambiguous'])}")
    if a.get("note"):
        lines.append(f"{indent}note: {a['note']}")
    lines.append(f"{indent}steps ({len(a['steps'])}, {a['seconds']:.1f} s, {a['ran']} computed):")
    for s in a["steps"]:
        subj = f" {s['subject'][:50]}" if s.get("subject") else ""
        how = ("stored" if a["mode"] == "history" else "cached") if s["cached"] else f"{s['seconds']:.1f} s"
        lines.append(f"{indent}  {s['point']:<12}{subj:<51} {s['verdict']:<6} {how:>8}  {s['status'][:90]}")
    if a.get("then"):
        lines.append(f"{indent}then inside the jax commits between {a['last_good']['label']} and "
                     f"{a['first_bad']['label']}:")
        lines.append(render(a["then"], indent + "  "))
    return "\n".join(lines)
