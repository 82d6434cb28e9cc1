"""The sweep definitions of ``farm.toml`` and their cron slots (see ``farm.run.schedules``).

``load_config`` reads and checks the file into a ``Config`` of ``SweepSpec`` s;
``due_slot`` and ``next_slot`` answer when a sweep's schedule comes round.
"""
from __future__ import annotations

import difflib
import os
import re
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from croniter import croniter

from farm.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]
FILTER_KEYS = ("catalog", "primitive", "group", "family", "dtype", "match", "modules", "limit")
SWEEP_KEYS = {"schedule", "platforms", "run_on", "db", "address", "dashboard", "submit", "baseline", "workers",
              "timeout", "batch", "repeats", "crossexec", "on_regression", "config", "jax", *FILTER_KEYS}
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
    config: tuple[str, ...] = ()   # farm sweep --config specs ("x64=on,off"): one run per configuration
    labels: tuple[str, ...] = ()   # the slot's run suffixes: configuration labels or "jax=V"
    jax: str | None = None         # farm sweep --jax: one run per jax version (and the cross-version pairs)

    def run_name(self, slot: datetime) -> str:
        return f"{self.name}-{slot.astimezone(timezone.utc).strftime(SLOT_FORMAT)}"

    def slot_runs(self, run_name: str) -> list[str]:
        """The runs one slot makes: ``SLOT@LABEL`` per configuration or jax version, else ``SLOT``."""
        return [f"{run_name}@{label}" for label in self.labels] or [run_name]

    def sweep_args(self, run_name: str, resume: bool = False, slot: datetime | None = None) -> list[str]:
        """``farm sweep`` arguments for a slot (``--resume`` continues an interrupted one; a sweep
        over configurations or versions continues by itself when run again). With ``slot``, the
        runs record this sweep and slot as their dimensions (``--schedule``, ``--slot``)."""
        from farm.run.request import SweepRequest

        given = {k: v for k, v in (("workers", self.workers), ("timeout", self.timeout), ("batch", self.batch),
                                   ("repeats", self.repeats)) if v is not None}
        if slot is not None:
            given.update(schedule=self.name, slot=slot.astimezone(timezone.utc).strftime(SLOT_FORMAT))
        common = SweepRequest(db=self.db, address=self.address, crossexec=self.crossexec, **given)
        if resume and not self.labels:
            return common.replace(resume=run_name).to_argv()
        selection = {k: (int(v) if k == "limit" else v) for k, v in self.filters.items()}
        return common.replace(name=run_name, platforms=self.platforms, run_on=self.run_on, config=self.config,
                              jax=self.jax, **selection).to_argv()


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
    for k in d:
        if k not in allowed:
            near = difflib.get_close_matches(k, allowed, n=1)
            raise ConfigError(f"{where}: unknown key {k!r}" + (f"; did you mean {near[0]!r}?" if near else ""))


def parse_config(doc: dict[str, Any], path: Path) -> Config:
    """Check a parsed farm.toml and build the sweep definitions (raises ConfigError)."""
    top = doc.get("farm", {})
    _check_keys(top, GLOBAL_KEYS, f"{path} [farm]")
    _check_keys(doc, {"farm", "sweep", "xla_flags"}, str(path))  # [xla_flags]: farm sweep --config's flag sets
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
        _check_names(filters, where)
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
            crossexec=bool(d.get("crossexec", True)), **_dimensions(d, where, doc.get("xla_flags") or {}),
            on_regression=OnRegression(fail_on=_comma(act.get("fail_on", "status,numeric"), "fail_on", where),
                                       exit_code=int(act.get("exit_code", 1)), report=act.get("report"),
                                       webhook=act.get("webhook")))
        if sweeps[name].submit and not sweeps[name].dashboard:
            raise ConfigError(f"{where}: submit = true needs dashboard = \"http://HEAD:8265\"")
    if not sweeps:
        raise ConfigError(f"{path}: no [sweep.NAME] tables")
    state = Path(top.get("state") or path.with_name(path.stem + ".state.json"))
    return Config(path=path, sweeps=sweeps, state_path=state if state.is_absolute() else path.parent / state)


def _check_names(filters: dict[str, str], where: str) -> None:
    """The names a sweep's filters can be checked against without loading a catalog: its catalog,
    the farm catalog's families and every dtype. A typo is one line when the config is read, not
    a failed run at its slot in the night."""
    from farm.catalog.dtypes import DTYPES
    from farm.catalog.registry import CATALOGS, FARM_FAMILIES  # deferred: the catalog package (numpy)
    from farm.errors import UnknownName

    catalog = filters.get("catalog", "farm")
    named = [("catalog", (catalog,), CATALOGS), ("dtype", filters.get("dtype", "").split(","), DTYPES)]
    if catalog in ("farm", "all"):
        named.append(("family", filters.get("family", "").split(","), FARM_FAMILIES))
    for kind, values, known in named:
        for v in (x.strip() for x in values):
            if v and v not in known:
                raise ConfigError(f"{where}: {UnknownName(kind, v, known)}")


def _dimensions(d: dict[str, Any], where: str, flag_sets: dict[str, str]) -> dict[str, Any]:
    """``config`` (a spec or a list of specs, as farm sweep --config) and ``jax`` (versions), checked."""
    from farm.run import configs  # the parsers farm sweep uses (deferred, as before)
    from farm.run.versions import venvs

    specs = tuple([d["config"]] if isinstance(d.get("config"), str) else d.get("config") or ())
    jax = _comma(d["jax"], "jax", where) if "jax" in d else None
    if specs and jax:
        raise ConfigError(f"{where}: config and jax: one dimension per sweep (make two sweeps)")
    try:
        if specs:
            return {"config": specs, "labels": tuple(c.label for c in configs.parse(list(specs), flag_sets))}
        if jax:  # newest/previous are resolved now: each run-pending reads the config again
            versions = venvs.parse(jax)
            return {"jax": ",".join(versions), "labels": tuple(f"jax={v}" for v in versions)}
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None
    return {}


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
    # croniter's get_prev is strictly before its base: start just after this minute so a
    # slot at the current minute counts as due.
    base = now.astimezone(timezone.utc).replace(second=0, microsecond=0) + timedelta(minutes=1)
    slot = croniter(schedule, base).get_prev(datetime).astimezone(timezone.utc)
    if last is not None and slot <= last:
        return None
    return slot


def next_slot(schedule: str, now: datetime) -> datetime:
    return croniter(schedule, now.astimezone(timezone.utc)).get_next(datetime).astimezone(timezone.utc)
