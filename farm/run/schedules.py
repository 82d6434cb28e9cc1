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

Example::

    cfg = load_config("farm.toml")
    for result in run_pending(cfg):
        print(result.sweep, result.run, result.status)
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import time
import tomllib
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from farm.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
FILTER_KEYS = ("catalog", "primitive", "group", "family", "dtype", "match", "modules", "limit")
SWEEP_KEYS = {"schedule", "platforms", "run_on", "db", "address", "dashboard", "submit", "baseline", "workers",
              "timeout", "batch", "repeats", "crossexec", "on_regression", *FILTER_KEYS}
ACTION_KEYS = {"fail_on", "exit_code", "report", "webhook"}
GLOBAL_KEYS = {"db", "address", "dashboard", "submit", "state"}
SLOT_FORMAT = "%Y%m%dT%H%MZ"

Log = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(f"farm schedule: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- config
@dataclass(frozen=True, slots=True)
class OnRegression:
    """What to do when ``farm compare BASELINE RUN`` finds a regression."""

    fail_on: str = "status,numeric"  # regression kinds that count (farm compare --fail-on)
    exit_code: int = 1               # exit status of run-pending when this sweep regressed
    report: str | None = None        # Markdown report path; {sweep} {run} {baseline} {slot} are filled in
    webhook: str | None = None       # URL that receives a JSON POST


@dataclass(frozen=True, slots=True)
class SweepSpec:
    """One named sweep of ``farm.toml``."""

    name: str
    schedule: str
    filters: dict[str, str] = field(default_factory=dict)  # farm sweep's catalog filters, as comma lists
    platforms: str = "cpu,cuda,rocm,tpu"
    run_on: str = "cpu"
    db: str | None = None
    address: str | None = None
    dashboard: str | None = None  # Ray dashboard URL, for submit
    submit: bool = False          # run the driver on the cluster as a Ray job
    baseline: str | None = "previous"  # previous scheduled run of this sweep, a run id/name, or None
    workers: int | None = None
    timeout: float | None = None
    batch: int | None = None
    repeats: int | None = None
    crossexec: bool = True
    on_regression: OnRegression = OnRegression()

    def run_name(self, slot: datetime) -> str:
        return f"{self.name}-{slot.astimezone(timezone.utc).strftime(SLOT_FORMAT)}"

    def owns(self, run_name: str) -> bool:
        """Whether ``run_name`` is a scheduled run of this sweep."""
        return re.fullmatch(re.escape(self.name) + r"-\d{8}T\d{4}Z", run_name) is not None

    def sweep_args(self, run_name: str, resume: bool = False) -> list[str]:
        """``farm sweep`` arguments for a slot (``--resume`` continues an interrupted one)."""
        args = ["sweep"]
        if resume:
            args += ["--resume", run_name]
        else:
            args += ["--name", run_name, "--platforms", self.platforms, "--run-on", self.run_on]
            for k, v in self.filters.items():
                args += [f"--{k}", str(v)]
        if self.db:
            args += ["--db", self.db]
        if self.address:
            args += ["--address", self.address]
        for flag, v in (("--workers", self.workers), ("--timeout", self.timeout), ("--batch", self.batch),
                        ("--repeats", self.repeats)):
            if v is not None:
                args += [flag, str(v)]
        if not self.crossexec:
            args.append("--no-crossexec")
        return args


@dataclass(frozen=True, slots=True)
class Config:
    path: Path
    sweeps: dict[str, SweepSpec]
    state_path: Path

    @property
    def lock_dir(self) -> Path:
        return self.path.parent


def _comma(v: Any, key: str, where: str) -> str:
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return ",".join(v)
    if isinstance(v, str):
        return v
    raise ConfigError(f"{where}: {key} must be a string or a list of strings, not {v!r}")


def _check_keys(d: dict[str, Any], allowed: set[str], where: str) -> None:
    import difflib

    for k in d:
        if k not in allowed:
            near = difflib.get_close_matches(k, allowed, n=1)
            raise ConfigError(f"{where}: unknown key {k!r}" + (f"; did you mean {near[0]!r}?" if near else ""))


def parse_config(doc: dict[str, Any], path: Path) -> Config:
    """Check a parsed farm.toml and build the sweep definitions (raises ConfigError)."""
    from croniter import croniter

    top = doc.get("farm", {})
    _check_keys(top, GLOBAL_KEYS, f"{path} [farm]")
    _check_keys(doc, {"farm", "sweep"}, str(path))
    sweeps: dict[str, SweepSpec] = {}
    for name, d in (doc.get("sweep") or {}).items():
        where = f"{path} [sweep.{name}]"
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]*", name):
            raise ConfigError(f"{where}: a sweep name is letters, digits, '_', '.' and '-', starting with a letter")
        _check_keys(d, SWEEP_KEYS, where)
        if "schedule" not in d:
            raise ConfigError(f"{where}: missing schedule (cron syntax, e.g. \"0 2 * * *\")")
        if not croniter.is_valid(d["schedule"]):
            raise ConfigError(f"{where}: schedule {d['schedule']!r} is not valid cron syntax")
        act = d.get("on_regression", {})
        _check_keys(act, ACTION_KEYS, f"{where}.on_regression")
        filters = {k: (str(d[k]) if k == "limit" else _comma(d[k], k, where)) for k in FILTER_KEYS if k in d}
        baseline = d.get("baseline", "previous")
        sweeps[name] = SweepSpec(
            name=name, schedule=d["schedule"], filters=filters,
            platforms=_comma(d.get("platforms", "cpu,cuda,rocm,tpu"), "platforms", where),
            run_on=_comma(d.get("run_on", "cpu"), "run_on", where),
            db=d.get("db", top.get("db")) or os.environ.get("FARM_DB"),
            address=d.get("address", top.get("address")), dashboard=d.get("dashboard", top.get("dashboard")),
            submit=bool(d.get("submit", top.get("submit", False))),
            baseline=None if baseline in (None, "", "none", False) else str(baseline),
            workers=d.get("workers"), timeout=d.get("timeout"), batch=d.get("batch"), repeats=d.get("repeats"),
            crossexec=bool(d.get("crossexec", True)),
            on_regression=OnRegression(fail_on=_comma(act.get("fail_on", "status,numeric"), "fail_on", where),
                                       exit_code=int(act.get("exit_code", 1)), report=act.get("report"),
                                       webhook=act.get("webhook")))
        if sweeps[name].submit and not sweeps[name].dashboard:
            raise ConfigError(f"{where}: submit = true needs dashboard = \"http://HEAD:8265\"")
    if not sweeps:
        raise ConfigError(f"{path}: no [sweep.NAME] tables")
    state = Path(top.get("state") or path.with_name(path.stem + ".state.json"))
    return Config(path=path, sweeps=sweeps, state_path=state if state.is_absolute() else path.parent / state)


def load_config(path: str | os.PathLike[str] = "farm.toml") -> Config:
    p = Path(path).resolve()
    if not p.is_file():
        raise ConfigError(f"no config file {str(path)!r} (start from farm.example.toml)")
    try:
        doc = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: {e}") from None
    return parse_config(doc, p)


# --------------------------------------------------------------------------- slots
def due_slot(schedule: str, now: datetime, last: datetime | None) -> datetime | None:
    """The most recent slot at or before ``now`` if it is later than ``last``, else None.

    Only the newest slot is returned: after downtime the sweep runs once, not once per
    missed slot.
    """
    from croniter import croniter

    # croniter's get_prev is strictly before its base: start just after this minute so a
    # slot at the current minute counts as due.
    base = now.astimezone(timezone.utc).replace(second=0, microsecond=0) + timedelta(minutes=1)
    slot = croniter(schedule, base).get_prev(datetime).astimezone(timezone.utc)
    if last is not None and slot <= last:
        return None
    return slot


def next_slot(schedule: str, now: datetime) -> datetime:
    from croniter import croniter

    return croniter(schedule, now.astimezone(timezone.utc)).get_next(datetime).astimezone(timezone.utc)


# --------------------------------------------------------------------------- state file
class State:
    """The JSON state file: per sweep, the last slot attempted and how it went."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _read(self) -> dict[str, Any]:
        try:
            doc = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {"version": 1, "sweeps": {}}
        except (OSError, ValueError) as e:
            _stderr(f"warning: ignoring unreadable state file {self.path}: {e}")
            return {"version": 1, "sweeps": {}}
        if doc.get("version") != 1:
            _stderr(f"warning: ignoring state file {self.path} of unknown version {doc.get('version')!r}")
            return {"version": 1, "sweeps": {}}
        return doc

    def get(self, sweep: str) -> dict[str, Any]:
        with self._locked():
            return dict(self._read()["sweeps"].get(sweep, {}))

    def update(self, sweep: str, **fields: Any) -> None:
        with self._locked():
            doc = self._read()
            doc["sweeps"].setdefault(sweep, {}).update(fields)
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text(json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n")
            os.replace(tmp, self.path)


# --------------------------------------------------------------------------- lock
class AlreadyRunning(ConfigError):
    """Another scheduler holds this sweep's lock."""


def _lock_key(sweep: str) -> int:
    return int.from_bytes(hashlib.sha256(f"farm-schedule:{sweep}".encode()).digest()[:8], "big", signed=True)


@contextlib.contextmanager
def sweep_lock(spec: SweepSpec, lock_dir: Path) -> Iterator[str]:
    """Hold the one-copy lock of ``spec`` (raises AlreadyRunning). Yields what was locked."""
    url = spec.db or ""
    if url.startswith(("postgresql", "postgres")):
        from sqlalchemy import text

        from farm.store.db import _engine

        engine = _engine(url)
        try:
            with engine.connect() as conn:
                key = _lock_key(spec.name)
                if not conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar():
                    raise AlreadyRunning(f"sweep {spec.name!r} is already running (PostgreSQL advisory lock {key})")
                conn.commit()
                try:
                    yield f"advisory lock {key}"
                finally:
                    conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                    conn.commit()
        finally:
            engine.dispose()
        return
    lock_dir.mkdir(parents=True, exist_ok=True)
    path = lock_dir / f".farm-schedule-{spec.name}.lock"
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AlreadyRunning(f"sweep {spec.name!r} is already running (lock file {path})") from None
        try:
            yield str(path)
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- runs in the store
def run_status(db: str | None, run_name: str) -> str | None:
    """The stored status of a run by name, or None if there is no such run."""
    from sqlalchemy import select

    from farm.store import open_store
    from farm.store.models import Run

    store = open_store(db)
    try:
        with store.session() as s:
            return s.scalar(select(Run.status).where(Run.name == run_name))
    finally:
        store.dispose()


def previous_run(spec: SweepSpec, before: str) -> str | None:
    """The newest finished scheduled run of ``spec`` older than run ``before``."""
    from sqlalchemy import select

    from farm.store import open_store
    from farm.store.models import Run

    store = open_store(spec.db)
    try:
        with store.session() as s:
            cur = s.scalar(select(Run.id).where(Run.name == before))
            q = select(Run.name).where(Run.status == "finished", Run.name.like(f"{spec.name}-%"))
            if cur is not None:
                q = q.where(Run.id < cur)
            return next((n for n in s.scalars(q.order_by(Run.id.desc())) if spec.owns(n)), None)
    finally:
        store.dispose()


# --------------------------------------------------------------------------- running
def farm_command(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "farm", *args]


def run_farm(args: list[str], log: Log = _stderr) -> int:
    """Run ``farm ARGS`` in a child process (a fresh Ray driver per sweep)."""
    log("$ farm " + shlex.join(args))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return subprocess.call(farm_command(args), env=env, cwd=str(ROOT))


def submit(args: list[str], dashboard: str, *, working_dir: Path = ROOT, log: Log = _stderr,
           poll_s: float = 2.0) -> int:
    """Run ``farm ARGS`` as a Ray job on the cluster (the driver runs on the head).

    ``args`` must reach the cluster on their own: a ``--db`` the head can open. Without
    ``--address`` the job's driver joins the cluster it runs on (``--address auto``).
    Returns 0 when the job succeeded, 1 otherwise; the job's log is echoed as it grows.
    """
    from ray.job_submission import JobStatus, JobSubmissionClient

    if "--address" not in args:
        args = [*args, "--address", "auto"]
    entrypoint = "python -m farm " + shlex.join(args)
    try:
        client = JobSubmissionClient(dashboard)
    except Exception as e:  # connection refused, bad token, not a dashboard
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        from farm.errors import ClusterError

        raise ClusterError(f"cannot reach the Ray dashboard at {dashboard!r}: {msg}") from None
    runtime_env = {"working_dir": str(working_dir),
                   "excludes": [".venv", ".git", "*.db", "*.db-*", "bazel-*", "node_modules", "__pycache__",
                                "*.state.json", ".farm-schedule-*"],
                   "env_vars": {"RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1"}}
    job = client.submit_job(entrypoint=entrypoint, runtime_env=runtime_env)
    log(f"submitted Ray job {job} to {dashboard}: {entrypoint}")
    shown = 0
    terminal = {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}
    try:
        while True:
            status = client.get_job_status(job)
            logs = client.get_job_logs(job)
            if len(logs) > shown:
                sys.stderr.write(logs[shown:])
                sys.stderr.flush()
                shown = len(logs)
            if status in terminal:
                break
            time.sleep(poll_s)
    except KeyboardInterrupt:
        client.stop_job(job)
        log(f"stopped Ray job {job}")
        raise
    log(f"Ray job {job}: {status.value}")
    return 0 if status == JobStatus.SUCCEEDED else 1


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
            stored = run_status(spec.db, name)
            if stored == "finished":
                state.update(spec.name, last_slot=slot.isoformat(), run=name, status="finished")
                return SlotResult(spec.name, slot, name, "skipped", message="already finished (found in the store)")
            args = spec.sweep_args(name, resume=stored is not None)
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
                regressed, md = compare(spec, baseline, name, log)
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
