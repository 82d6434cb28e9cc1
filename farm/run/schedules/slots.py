"""Scheduled sweeps: named sweep definitions in ``farm.toml``, run when their cron slot is due.

A scheduled run is named ``<sweep>-<slot>`` with the slot in UTC (``nightly-20260102T0200Z``).
That name is the durable record: the run table says whether a slot was done, so a
scheduler without a disk of its own (a Kubernetes CronJob) still never repeats a slot,
and a slot whose sweep was interrupted is resumed, not restarted. A small JSON state
file next to the config (``farm.state.json`` for ``farm.toml``) adds what the database
does not hold: the last slot attempted, its exit status, and whether it regressed, so a
slot whose sweep failed is not retried at every tick.

Only one copy of a sweep runs at a time: a PostgreSQL advisory lock when the store is
PostgreSQL (it covers every host using that database), else an ``fcntl`` lock on a file
next to the config. After downtime only the most recent missed slot runs, once.

The parts live in sibling modules: ``config`` (farm.toml, cron slots), ``state`` (state
file, locks, runs in the store) and ``jobs`` (Ray Jobs submission). This module runs the
slots; it looks ``run_farm``, ``submit`` and ``compare`` up in its own namespace, so a test
can replace them here.

Example::

    cfg = config.load_config("farm.toml")
    for result in slots.run_pending(cfg):
        print(result.sweep, result.run, result.status)
"""
from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from farm.errors import ConfigError
from farm.run.schedules.config import (
    ROOT, SLOT_FORMAT, Config, Log, SweepSpec, _stderr, due_slot, load_config, next_slot,
)
from farm.run.schedules.jobs import submit
from farm.run.schedules.state import AlreadyRunning, State, previous_run, run_status, slot_labels, sweep_lock


# --------------------------------------------------------------------------- running
def farm_command(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "farm", *args]


def run_farm(args: list[str], log: Log = _stderr) -> int:
    """Run ``farm ARGS`` in a child process (a fresh Ray driver per sweep)."""
    log("$ farm " + shlex.join(args))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return subprocess.call(farm_command(args), env=env, cwd=str(ROOT))


@dataclass(frozen=True, slots=True)
class SlotResult:
    """What happened to one due slot."""

    sweep: str
    slot: datetime
    run: str
    status: str  # finished | failed | regressed | skipped (already done) | locked (running elsewhere)
    exit_code: int = 0
    baseline: str | None = None
    report: str | None = None
    message: str = ""


def compare(spec: SweepSpec, baseline: str, run: str, log: Log = _stderr) -> tuple[bool | None, str]:
    """``farm compare BASELINE RUN --format md``: (regressed, Markdown). None when it could not run."""
    if importlib.util.find_spec("farm.commands.compare") is None:
        log("farm compare is not available in this farm; skipping the regression check")
        return None, ""
    args = ["compare", baseline, run, "--format", "md", "--fail-on", spec.on_regression.fail_on]
    if spec.db:
        args += ["--db", spec.db]
    log("$ farm " + shlex.join(args))
    p = subprocess.run(farm_command(args), capture_output=True, text=True, cwd=str(ROOT),
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    if p.returncode not in (0, 1):
        first = (p.stderr.strip().splitlines() or ["no message"])[-1]
        log(f"farm compare failed (exit {p.returncode}): {first}; skipping the regression check")
        return None, p.stdout
    return p.returncode == 1, p.stdout


def compare_slot(spec: SweepSpec, baseline: str, run: str, log: Log = _stderr) -> tuple[bool | None, str]:
    """A slot against its baseline: run by run, each configuration or jax version with the
    same one of the baseline (``BASELINE@LABEL``); regressed if any of them regressed."""
    if not spec.labels:
        return compare(spec, baseline, run, log)
    before, now = slot_labels(spec.db, baseline), slot_labels(spec.db, run)
    for label in spec.labels:
        if label not in before or label not in now:
            log(f"{run}: no run for {label} in {baseline if label not in before else run}: not compared")
    results = [compare(spec, before[label], now[label], log) for label in spec.labels if label in before and label in now]
    flags = [r for r, _ in results]
    regressed = True if any(flags) else (None if all(f is None for f in flags) else False)
    return regressed, "\n\n".join(md for _, md in results if md)


def post_webhook(url: str, payload: dict[str, Any], timeout_s: float = 10.0) -> None:
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "User-Agent": "lowering-farm"})
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        resp.read()


def act_on_regression(spec: SweepSpec, cfg: Config, run: str, baseline: str, slot: datetime, markdown: str,
                      log: Log = _stderr) -> str | None:
    """Write the report and POST the webhook of ``spec.on_regression``. Returns the report path."""
    act = spec.on_regression
    path = None
    fill = {"sweep": spec.name, "run": run, "baseline": baseline, "slot": slot.strftime(SLOT_FORMAT)}
    if act.report:
        p = Path(act.report.format(**fill))
        p = p if p.is_absolute() else cfg.path.parent / p
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(markdown or f"# {run}: regressions against {baseline}\n")
        path = str(p)
        log(f"regression report: {path}")
    if act.webhook:
        payload = {**fill, "text": f"Lowering Farm: sweep {spec.name} run {run} regressed against {baseline}",
                   "report": markdown, "report_path": path}
        try:
            post_webhook(act.webhook, payload)
            log(f"posted the regression to {act.webhook}")
        except Exception as e:  # a webhook outage must not hide the regression
            log(f"warning: webhook {act.webhook} failed: {e}")
    return path


def run_slot(spec: SweepSpec, cfg: Config, slot: datetime, log: Log = _stderr) -> SlotResult:
    """Run (or resume) one slot of ``spec`` under its lock; check it against the baseline."""
    state = State(cfg.state_path)
    name = spec.run_name(slot)
    try:
        with sweep_lock(spec, cfg.lock_dir):
            stored = [run_status(spec.db, n) for n in spec.slot_runs(name)]
            if all(st == "finished" for st in stored):
                state.update(spec.name, last_slot=slot.isoformat(), run=name, status="finished")
                return SlotResult(spec.name, slot, name, "skipped", message="already finished (found in the store)")
            args = spec.sweep_args(name, resume=any(st is not None for st in stored), slot=slot)
            state.update(spec.name, last_slot=slot.isoformat(), run=name, status="running",
                         started=datetime.now(timezone.utc).isoformat(), pid=os.getpid())
            rc = submit(args, spec.dashboard, log=log) if spec.submit else run_farm(args, log)
            if rc != 0:
                state.update(spec.name, status="failed", exit=rc, finished=datetime.now(timezone.utc).isoformat())
                return SlotResult(spec.name, slot, name, "failed", exit_code=rc or 1,
                                  message=f"farm sweep exited {rc}")
            result = SlotResult(spec.name, slot, name, "finished")
            baseline = previous_run(spec, name) if spec.baseline == "previous" else spec.baseline
            if spec.baseline and not baseline:
                log(f"{name}: no earlier finished run of {spec.name} to compare with")
            elif baseline:
                regressed, md = compare_slot(spec, baseline, name, log)
                result = replace(result, baseline=baseline)
                if regressed:
                    report = act_on_regression(spec, cfg, name, baseline, slot, md, log)
                    result = replace(result, status="regressed", exit_code=spec.on_regression.exit_code,
                                     report=report, message=f"regressed against {baseline}")
            state.update(spec.name, status=result.status, exit=result.exit_code, baseline=result.baseline,
                         report=result.report, finished=datetime.now(timezone.utc).isoformat())
            return result
    except AlreadyRunning as e:
        return SlotResult(spec.name, slot, name, "locked", message=str(e))


def pending(cfg: Config, now: datetime | None = None, only: list[str] | None = None) -> list[tuple[SweepSpec, datetime]]:
    """Sweeps whose most recent slot has not been attempted yet."""
    now = now or datetime.now(timezone.utc)
    state = State(cfg.state_path)
    out = []
    for name, spec in cfg.sweeps.items():
        if only and name not in only:
            continue
        st = state.get(name)
        # A slot left "running" by a scheduler that died is still due: it is resumed (the
        # lock keeps it from starting twice if it is in fact still running elsewhere).
        last = datetime.fromisoformat(st["last_slot"]) if st.get("last_slot") and st.get("status") != "running" \
            else None
        slot = due_slot(spec.schedule, now, last)
        if slot is not None:
            out.append((spec, slot))
    return out


def run_pending(cfg: Config, now: datetime | None = None, only: list[str] | None = None,
                log: Log = _stderr) -> list[SlotResult]:
    """Run every due sweep once, one after the other. For cron: call it every few minutes."""
    results = []
    for spec, slot in pending(cfg, now, only):
        log(f"{spec.name}: slot {slot:%Y-%m-%d %H:%M}Z is due")
        r = run_slot(spec, cfg, slot, log)
        log(f"{spec.name}: {r.run} {r.status}" + (f" ({r.message})" if r.message else ""))
        results.append(r)
    return results


def exit_code(results: list[SlotResult]) -> int:
    return max((r.exit_code for r in results), default=0)


def serve(cfg_path: str | os.PathLike[str], *, poll_s: float = 30.0, only: list[str] | None = None,
          log: Log = _stderr, stop: Callable[[], bool] = lambda: False) -> None:
    """Run due sweeps forever. The config is re-read every tick, so edits apply without a restart."""
    log(f"serving {cfg_path} (checking every {poll_s:.0f}s)")
    while not stop():
        try:
            cfg = load_config(cfg_path)
            run_pending(cfg, only=only, log=log)
            now = datetime.now(timezone.utc)
            nxt = min(next_slot(s.schedule, now) for s in cfg.sweeps.values())
            wait = max(1.0, min(poll_s, (nxt - now).total_seconds() + 1))
        except ConfigError as e:
            log(f"error: {e}")
            wait = poll_s
        time.sleep(wait)
