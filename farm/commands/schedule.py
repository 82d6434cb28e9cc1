"""farm schedule: run the sweeps of farm.toml on their cron schedules; farm sweep --submit.

``farm schedule run-pending`` runs every due sweep once and exits (for cron or a
Kubernetes CronJob); ``farm schedule serve`` does the same in a loop; ``farm schedule
list`` shows each sweep's next slot and last result. This module also adds
``--submit`` to ``farm sweep``: the same sweep, run as a Ray job on the cluster.
"""
from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime, timezone

from farm.commands import number
from farm.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schedule", help="run the sweeps defined in farm.toml on their cron schedules",
                       description="Scheduled sweeps (see farm.example.toml and docs/cluster.md). A scheduled "
                                   "run is named SWEEP-YYYYMMDDTHHMMZ after its slot (UTC); only the most recent "
                                   "missed slot runs after downtime; one copy of a sweep runs at a time.")
    ss = p.add_subparsers(dest="schedule_command", metavar="ACTION")
    for name, hlp in (("run-pending", "run every due sweep once, then exit (for cron / a CronJob)"),
                      ("serve", "keep running due sweeps (a long-running scheduler)"),
                      ("list", "each sweep's schedule, next slot and last result")):
        q = ss.add_parser(name, help=hlp, description=hlp)
        q.add_argument("--config", default=os.environ.get("FARM_CONFIG", "farm.toml"),
                       help="sweep definitions (default: $FARM_CONFIG or farm.toml)")
        q.add_argument("--only", help="comma list of sweep names to consider")
        if name == "serve":
            q.add_argument("--poll", type=number("--poll", float, above=0), default=30.0, help="seconds between checks (default 30)")
        if name == "run-pending":
            q.add_argument("--dry-run", action="store_true", help="say which slots are due; run nothing")
        q.set_defaults(func=run, schedule_command=name)
    p.set_defaults(func=lambda a: (p.print_help(), 0)[1])
    _add_submit(sub)


def run(args: argparse.Namespace) -> int:

    from farm.run import schedules as schedule  # deferred: farm.run.schedules (~0.1 s); not needed by farm --help

    only = [s.strip() for s in args.only.split(",")] if args.only else None
    if args.schedule_command == "serve":
        schedule.load_config(args.config)  # a bad file is an error now, not at the first tick
        schedule.serve(args.config, poll_s=args.poll, only=only)
        return 0
    cfg = schedule.load_config(args.config)
    if args.schedule_command == "list":
        state = schedule.State(cfg.state_path)
        now = datetime.now(timezone.utc)
        for name, spec in cfg.sweeps.items():
            st = state.get(name)
            last = f"{st.get('run')} {st.get('status')}" if st else "never run"
            print(f"{name:24} {spec.schedule:16} next {schedule.next_slot(spec.schedule, now):%Y-%m-%d %H:%M}Z  "
                  f"last: {last}")
        return 0
    if args.dry_run:
        due = schedule.pending(cfg, only=only)
        for spec, slot in due:
            print(f"{spec.name}: would run {spec.run_name(slot)}:  farm " + " ".join(spec.sweep_args(spec.run_name(slot))))
        if not due:
            print("nothing is due")
        return 0
    results = schedule.run_pending(cfg, only=only)
    if not results:
        print("farm schedule: nothing is due", file=sys.stderr)
    return schedule.exit_code(results)


# --------------------------------------------------------------------------- farm sweep --submit
def _add_submit(sub: argparse._SubParsersAction) -> None:
    """Add --submit/--dashboard to `farm sweep` (registered before this module)."""
    p = sub.choices.get("sweep")
    if p is None or any("--submit" in a.option_strings for a in p._actions):
        return
    p.add_argument("--submit", action="store_true",
                   help="run this sweep as a Ray job on the cluster (the driver runs on the head; "
                        "needs --dashboard and a --db the head can open)")
    p.add_argument("--dashboard", default=os.environ.get("RAY_DASHBOARD_ADDRESS"),
                   help="Ray dashboard URL for --submit (default: $RAY_DASHBOARD_ADDRESS), e.g. http://HEAD:8265")
    local = p.get_default("func")

    def run_sweep(args: argparse.Namespace) -> int:
        if not args.submit:
            return local(args)
        return submit_sweep(p, args)

    p.set_defaults(func=run_sweep)


def submit_sweep(p: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from farm.run import schedules as schedule  # deferred: farm.run.schedules (~0.1 s); not needed by farm --help

    if not args.dashboard:
        raise ConfigError("--submit needs --dashboard http://HEAD:8265 (or $RAY_DASHBOARD_ADDRESS)")
    db = args.db or os.environ.get("FARM_DB")
    if not db or (db.startswith("sqlite") and not db.startswith("sqlite:////")):
        raise ConfigError("--submit needs a --db the cluster can open, e.g. postgresql+psycopg://user@dbhost/farm "
                          "(a relative SQLite path would land in the job's temporary working directory)")
    args.db = db
    return schedule.submit(argv_from(p, args, skip={"submit", "dashboard", "func"}), args.dashboard)


def argv_from(p: argparse.ArgumentParser, args: argparse.Namespace, skip: set[str]) -> list[str]:
    """Rebuild `farm sweep` arguments from parsed ``args`` (only values that differ from defaults)."""
    out = ["sweep"]
    seen: set[str] = set()
    for a in p._actions:
        if not a.option_strings or a.dest in skip or a.dest in seen or a.help == argparse.SUPPRESS:
            continue
        seen.add(a.dest)
        v = getattr(args, a.dest, None)
        if v is None or v == a.default:
            continue
        flag = next(o for o in a.option_strings if o.startswith("--"))
        if isinstance(a, argparse._StoreTrueAction):
            out.append(flag)
        else:
            out += [flag, str(v)]
    return out
