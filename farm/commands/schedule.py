"""farm schedule: run the sweeps of farm.toml on their cron schedules; farm sweep --submit.

``farm schedule run-pending`` runs every due sweep once and exits (for cron or a
Kubernetes CronJob); ``farm schedule serve`` does the same in a loop; ``farm schedule
list`` shows each sweep's next slot and last result. ``submit_sweep`` is ``farm sweep
--submit``: the same sweep, run as a Ray job on the cluster.
"""
from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime, timezone

from farm.commands import number
from farm.errors import ConfigError
from farm.run.request import SweepRequest


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


def run(args: argparse.Namespace) -> int:

    from farm.run.schedules import config, slots, state  # deferred: farm.run.schedules; not farm --help

    only = [s.strip() for s in args.only.split(",")] if args.only else None
    if args.schedule_command == "serve":
        config.load_config(args.config)  # a bad file is an error now, not at the first tick
        slots.serve(args.config, poll_s=args.poll, only=only)
        return 0
    cfg = config.load_config(args.config)
    if args.schedule_command == "list":
        states = state.State(cfg.state_path)
        now = datetime.now(timezone.utc)
        for name, spec in cfg.sweeps.items():
            st = states.get(name)
            last = f"{st.get('run')} {st.get('status')}" if st else "never run"
            print(f"{name:24} {spec.schedule:16} next {config.next_slot(spec.schedule, now):%Y-%m-%d %H:%M}Z  "
                  f"last: {last}")
        return 0
    if args.dry_run:
        due = slots.pending(cfg, only=only)
        for spec, slot in due:
            print(f"{spec.name}: would run {spec.run_name(slot)}:  farm " + " ".join(spec.sweep_args(spec.run_name(slot), slot=slot)))
        if not due:
            print("nothing is due")
        return 0
    results = slots.run_pending(cfg, only=only)
    if not results:
        print("farm schedule: nothing is due", file=sys.stderr)
    return slots.exit_code(results)


# --------------------------------------------------------------------------- farm sweep --submit
def submit_sweep(req: SweepRequest) -> int:
    """``farm sweep --submit``: the same sweep, its driver run as a Ray job on the cluster."""
    from farm.run.schedules import jobs  # deferred: farm.run.schedules; not needed by farm --help

    if not req.dashboard:
        raise ConfigError("--submit needs --dashboard http://HEAD:8265 (or $RAY_DASHBOARD_ADDRESS)")
    db = req.db or os.environ.get("FARM_DB")
    if not db or (db.startswith("sqlite") and not db.startswith("sqlite:////")):
        raise ConfigError("--submit needs a --db the cluster can open, e.g. postgresql+psycopg://user@dbhost/farm "
                          "(a relative SQLite path would land in the job's temporary working directory)")
    return jobs.submit(req.replace(db=db, submit=False, dashboard=None).to_argv(), req.dashboard)
