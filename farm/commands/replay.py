"""farm replay: re-run stored export artifacts on this jax and compare with their stored outputs."""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
from typing import TYPE_CHECKING

from farm.commands import add_db, store_from
from farm.errors import ConfigError, FarmError

if TYPE_CHECKING:
    from farm.run.replay import ReplayReport


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay stored export artifacts (or JAX's own back-compat data) "
                                      "on this jax; results go into a run of kind 'replay'")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--from", dest="from_run", metavar="RUN", help="the exports a run stored (id, name, latest)")
    src.add_argument("--since", metavar="DATE", help="every export stored on or after DATE (YYYY-MM-DD)")
    src.add_argument("--jax-backcompat", action="store_true",
                     help="import JAX's back-compat test data (shipped in the wheel) and replay it")
    p.add_argument("--primitive", help="only these primitives (comma list)")
    p.add_argument("--dtype", help="only these dtypes (comma list)")
    p.add_argument("--against-today", action="store_true",
                   help="also run today's jit of each harness still in the catalog and compare")
    p.add_argument("--workers", type=int, default=None,
                   help="worker processes (Ray, with crash and timeout isolation; default: every core); "
                        "0 runs them in this process")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds one artifact may take (default 120)")
    p.add_argument("--name", dest="run_name", help="name of the replay run")
    p.add_argument("--today", metavar="DATE", help="date to measure artifact age from (default: today)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    add_db(p)
    p.set_defaults(func=replay_cmd)


def _date(text: str, flag: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"{flag} must be a date like 2026-05-01, not {text!r}") from None


def _list(text: str | None) -> tuple[str, ...]:
    return tuple(s.strip() for s in (text or "").split(",") if s.strip())


def replay_cmd(args: argparse.Namespace) -> int:
    # Here, not at module top: farm.cli imports every command module to build its parser,
    # and replay brings jax, the store and the pipeline (measured: `import farm.cli` 0.09 s,
    # `import farm.pipeline, farm.store, jax` 2.2 s), which no other command should pay.
    from farm.run import replay  # deferred: farm.run.replay (jax+store); not needed by farm --help
    from farm.run.progress import SweepConfig
    from farm.host import describe  # deferred: farm.host (jax); not needed by farm --help

    today = _date(args.today, "--today") if args.today else dt.date.today()
    store = store_from(args, create=True)
    filters = {"primitive": list(_list(args.primitive)), "dtype": list(_list(args.dtype))}
    with store.session() as s:
        if args.jax_backcompat:
            entries = replay.backcompat_entries()
            items = replay.import_backcompat(s, entries)
            source = {"jax_backcompat": True, "imported": len(entries)}
            catalog = replay.BACKCOMPAT_CATALOG
        elif args.from_run:
            items = replay.from_run(s, args.from_run)
            source, catalog = {"from": args.from_run}, "farm"
        else:
            items = replay.since(s, _date(args.since, "--since"))
            source, catalog = {"since": args.since}, "farm"
        items = replay.select_exports(items, _list(args.primitive), _list(args.dtype))
        if not items:
            raise FarmError("no stored export artifacts match (a sweep stores them when it exports; "
                            "try --jax-backcompat)")
        report = replay.replay(s, items, env=describe(), today=today, name=args.run_name,
                               filters={**filters, **source}, catalog=catalog,
                               today_lowering=args.against_today,
                               workers=(os.cpu_count() or 1) if args.workers is None else max(0, args.workers),
                               config=SweepConfig(timeout_s=args.timeout, progress=False))
        if args.jax_backcompat:
            seen = replay.census_custom_calls(s, "cpu")
            report.coverage = replay.coverage(
                seen, [(tuple(c["target"] for c in r.facts["custom_calls"]), r.status) for _, r in report.items])
    if args.format == "json":
        print(json.dumps(report.to_dict(), indent=1, default=str))
    else:
        print_text(report, today)
    return 1 if any(k.endswith("_breakage") for k in report.summary()) else 0


def print_text(report: ReplayReport, today: dt.date) -> None:
    d = report.to_dict()
    print(f"farm replay: run {report.run_name} (id {report.run_id}), {len(report.items)} artifacts, "
          f"age measured from {today}")
    print(f"{'artifact':58} {'cc':>3} {'age':>5} {'status':18} {'judged':10} custom calls / error")
    for a in d["artifacts"]:
        calls = ", ".join(c["target"] + ("" if c["guaranteed"] else " (NOT guaranteed)") for c in a["custom_calls"])
        flag = "!" if a.get("outside_window") or a.get("cc_supported") is False else " "
        age = "" if a.get("age_days") is None else f"{a['age_days']}d"
        cc = a.get("calling_convention_version")
        status = a["status"] + (f"/{a['reason']}" if a.get("reason") and a["status"] != "ok" else "")
        judged = a["judged"] + ("*" if a.get("reason") == "non_unique" else "")
        line = f"{(a['harness'] or '')[:58]:58} {'' if cc is None else cc:>3} {age:>5}{flag}{status:18} {judged:10} "
        print(line + (a["error"] or calls or "-")[:160])
    print("\n! = outside JAX's compatibility window (older than ~6 months, or a calling-convention version "
          "this jax no longer promises to read); * = non-unique outputs judged by an invariant")
    print("counts: " + ", ".join(f"{k} {v}" for k, v in sorted(d["counts"].items())))
    print("summary: " + ", ".join(f"{k} {v}" for k, v in d["summary"].items()))
    cov = d.get("coverage")
    if cov is not None:
        if not cov["seen"]:
            print("custom-call coverage: no census facts for cpu in this database (run `farm sweep` first)")
        else:
            print(f"custom-call coverage: {len(cov['covered'])}/{len(cov['seen'])} cpu custom-call targets seen "
                  f"in the catalog are covered by a replayable back-compat artifact")
            if cov["uncovered"]:
                print("  uncovered: " + ", ".join(cov["uncovered"]))
