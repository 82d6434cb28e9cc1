"""Stored comparison reports: ``farm.analysis.report`` of a head run against a base run,
computed once and kept in the ``reports`` table.

A finished run's results do not change, so neither does a comparison of two finished
runs. The dashboard's compare page, ``farm compare`` and the end of ``farm sweep`` share
one stored report per (base, head, settings). A stored report is used only while

- its format version is the analysis's ``FORMAT_VERSION`` (the row's and the JSON's),
- its text matches its sha256,
- every run it read is as it was then: same status, ``finished_at`` and status counts
  (a resumed run gets a new ``finished_at`` and more results),
- the head run's catalog selection (``selection``: which harnesses it should have run,
  which the regression gate reads) is what it was then (a harness added to or removed
  from the catalog since is a different report);

otherwise it is recomputed and the row overwritten. A comparison that involves a run
that is not finished (running, or interrupted or failed and so resumable) is computed
every time and never stored.

``get`` and ``put`` read and write one report in the caller's session; ``comparison``
is get-or-compute-and-put over a ``Store``; ``precompute`` is the end-of-sweep step.
"""
from __future__ import annotations

import gc
import hashlib
import inspect
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from farm import analysis
from farm.errors import FarmError, UnknownName
from farm.store import queries
from farm.store.models import ReportRow, Run
from farm.store.models.base import utcnow

RunDict = dict[str, Any]  # ``queries.run_dict`` with ``status_counts``
Log = Callable[[str], None]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


@dataclass(frozen=True, slots=True)
class Settings:
    """The analysis options a report is computed with; each distinct value is its own report.

    ``history``: how many earlier runs feed performance history and flakiness (0: none,
    as on the dashboard); ``threshold`` and ``include_noise`` as in ``farm.analysis.report``.
    """

    history: int = 0
    threshold: float = 0.2
    include_noise: bool = False

    def as_dict(self) -> dict[str, Any]:
        """Every option of ``farm.analysis.report``, its defaults included (a changed default
        is a different key, so no report computed under the old one is reused). The inputs
        ``history`` and ``selection`` are not options: the runs' stamp covers them."""
        params = inspect.signature(analysis.report).parameters
        d = {k: p.default for k, p in params.items()
             if p.default is not p.empty and k not in ("history", "selection")}
        return d | asdict(self)

    def key(self) -> str:
        return _sha(json.dumps(self.as_dict(), sort_keys=True))


#: What the dashboard's compare page shows, and what ``farm sweep`` stores at its end.
DASHBOARD = Settings()


@dataclass(frozen=True, slots=True)
class Comparison:
    """A report and the runs it compares (``queries.run_dict``, with counts)."""

    base: RunDict
    head: RunDict
    report: dict[str, Any]
    from_store: bool  # read from the reports table (else computed now)
    stored: bool  # in the reports table now


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def stamp(runs: Sequence[RunDict], selected: Mapping[str, str] | None = None) -> str:
    """What a report depends on of its runs: id, status, finished_at and status counts
    (``run_dict`` with counts; without them a change of results would go unseen), and the
    head run's ``selection`` (None: unknown)."""
    parts: list[Any] = [[r["id"], r["status"], r["finished_at"], sorted(r["status_counts"].items())] for r in runs]
    if selected is not None:
        parts.append(sorted(selected.items()))
    return _sha(json.dumps(parts))


#: Run kinds whose ``catalog`` and ``filters`` are a catalog selection (``farm sweep``,
#: ``farm import`` of a standalone bundle); a replay's filters name stored exports.
_SELECTING_KINDS = ("sweep", "import")


def selection(run: RunDict) -> dict[str, str] | None:
    """fingerprint -> name of the harnesses the run's catalog and filters select in the
    catalog as it is now (what ``farm sweep --resume`` would run), or None when that is
    unknown: a run kind that does not select from the catalog, or a catalog that cannot
    be loaded. A filter value the catalog no longer knows (a primitive removed since)
    matches nothing. Not cached: after the first load of a catalog (imports its harness
    modules, about a second) a selection takes tens of milliseconds."""
    if run.get("kind") not in _SELECTING_KINDS:
        return None
    from farm import catalog  # deferred: farm.catalog (~0.17 s over the store); only selection() needs it

    try:
        filters = catalog.Filters.from_dict({"catalog": run.get("catalog") or "farm", **(run.get("filters") or {})})
    except (TypeError, ValueError):
        return None
    for _ in range(100):
        try:
            return {h.fingerprint: h.name for h in catalog.select(filters)}
        except UnknownName as e:
            values = getattr(filters, e.kind, None)
            if not isinstance(values, tuple) or e.value not in values:
                return None  # an unknown catalog
            left = tuple(v for v in values if v != e.value)
            if not left:
                return {}  # every value of this filter is gone from the catalog: nothing selected
            filters = replace(filters, **{e.kind: left})
        except FarmError:
            return None  # e.g. a harness module that no longer imports
    return None


def cacheable(runs: Sequence[RunDict]) -> bool:
    """Whether a report over these runs may be stored: all of them finished."""
    return all(r["status"] == "finished" for r in runs)


def _natural(base: RunDict, head: RunDict, settings: Settings) -> Any:
    return ((ReportRow.base_run_id == base["id"]) & (ReportRow.head_run_id == head["id"])
            & (ReportRow.settings_key == settings.key()))


def get(session: Session, base: RunDict, head: RunDict, settings: Settings = DASHBOARD,
        history: Sequence[RunDict] = (), selected: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The stored report of ``head`` against ``base``, or None if there is none or it is stale
    (old format, altered text, runs that changed since, or another ``selected``, the head
    run's ``selection``). One query."""
    row = session.scalar(select(ReportRow).where(_natural(base, head, settings)))
    if row is None or row.format_version != analysis.FORMAT_VERSION:
        return None
    if row.runs_stamp != stamp([base, head, *history], selected) or _sha(row.content) != row.sha256:
        return None
    rep = json.loads(row.content)
    return rep if rep.get("format_version") == analysis.FORMAT_VERSION else None


def put(session: Session, base: RunDict, head: RunDict, report: dict[str, Any], settings: Settings = DASHBOARD,
        history: Sequence[RunDict] = (), seconds: float = 0.0, selected: Mapping[str, str] | None = None) -> None:
    """Store (or replace) the report of ``head`` against ``base``. One statement.

    Raises:
      ValueError: a run is not finished (its results may still change), or the report
        has no ``format_version``.
    """
    runs = [base, head, *history]
    if not cacheable(runs):
        late = next(r for r in runs if r["status"] != "finished")
        raise ValueError(f"run {late['name']!r} is {late['status']}: only reports of finished runs are stored")
    if not isinstance(report.get("format_version"), int):
        raise ValueError("a report without a format_version cannot be stored")
    text = json.dumps(report)
    values = {"base_run_id": base["id"], "head_run_id": head["id"], "settings_key": settings.key(),
              "settings": settings.as_dict(), "format_version": report["format_version"],
              "runs_stamp": stamp(runs, selected), "content": text, "sha256": _sha(text), "seconds": max(0.0, seconds),
              "created_at": utcnow()}
    dialect = session.get_bind().dialect.name
    keys = ["base_run_id", "head_run_id", "settings_key"]
    if dialect in ("sqlite", "postgresql"):
        ins = (sqlite if dialect == "sqlite" else postgresql).insert(ReportRow).values(values)
        session.execute(ins.on_conflict_do_update(index_elements=keys,
                                                  set_={k: v for k, v in values.items() if k not in keys}))
    else:
        session.execute(delete(ReportRow).where(_natural(base, head, settings)))
        session.execute(insert(ReportRow).values(values))


_gc_lock = threading.Lock()
_gc_users = 0
_gc_was_enabled = True


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building and analysing ~10^5 row dicts
    per run: they hold no cycles, yet each allocation burst triggered collections that
    cost about a third of a cold comparison (4.6 s -> 3.2 s on the benchmark database).
    Counted, so overlapping requests in one process restore the state once, at the end."""
    global _gc_users, _gc_was_enabled
    with _gc_lock:
        if _gc_users == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_users += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_users -= 1
            if _gc_users == 0 and _gc_was_enabled:
                gc.enable()


def _history(session: Session, base_id: int, head_id: int, n: int) -> list[RunDict]:
    """The ``n`` newest runs before the head, the base excluded, with their status counts."""
    if n <= 0:
        return []
    runs = session.scalars(select(Run).where(Run.id < head_id, Run.id != base_id)
                           .order_by(Run.id.desc()).limit(n)).all()
    counts = queries.status_counts(session, [r.id for r in runs])
    return [queries.run_dict(session, r, with_counts=False) | {"status_counts": counts[r.id]} for r in runs]


def comparison(store: Any, base_ref: str | int, head_ref: str | int, settings: Settings = DASHBOARD, *,
               recompute: bool = False, log: Log = _stderr) -> Comparison:
    """The report of run ``head_ref`` against ``base_ref`` (id, name, latest or previous):
    the stored one when it is current, else computed and, when every run is finished,
    stored. A report that cannot be stored (read-only database, lock timeout) is logged in
    one line and returned all the same.

    Raises:
      RunNotFound: a reference names no run.
    """
    with store.session() as s:
        b, h = queries.resolve_run(s, base_ref), queries.resolve_run(s, head_ref)
        base, head = queries.run_dict(s, b), queries.run_dict(s, h)
        history = _history(s, b.id, h.id, settings.history)
        selected = selection(head)
        rep = None if recompute else get(s, base, head, settings, history, selected)
        if rep is not None:
            return Comparison(base, head, rep, from_store=True, stored=True)
        t0 = time.perf_counter()
        with _gc_paused():
            rows = {r["id"]: queries.comparison_rows(s, r["id"]) for r in (base, head, *history)}
            rep = analysis.report(base, rows[base["id"]], head, rows[head["id"]],
                                  [(r, rows[r["id"]]) for r in history],
                                  threshold=settings.threshold, include_noise=settings.include_noise,
                                  selection=selected)
            del rows
    seconds = time.perf_counter() - t0
    stored = False
    if cacheable([base, head, *history]):
        try:
            with store.session() as s:
                put(s, base, head, rep, settings, history, seconds, selected)
            stored = True
        except SQLAlchemyError as e:
            first = (str(getattr(e, "orig", None) or e).strip().splitlines() or [""])[0]
            log(f"farm: comparison of run {head['name']} with {base['name']} not stored ({type(e).__name__}: {first})")
    return Comparison(base, head, rep, from_store=False, stored=stored)


def previous_comparable(session: Session, run: Run) -> Run | None:
    """The newest finished run before ``run`` of the same catalog."""
    return session.scalar(select(Run).where(Run.id < run.id, Run.status == "finished", Run.catalog == run.catalog)
                          .order_by(Run.id.desc()).limit(1))


def precompute(store: Any, run_id: int, log: Log = _stderr) -> Comparison | None:
    """Store the report of run ``run_id`` against the previous comparable run, so that the
    dashboard's compare page opens at once: the end-of-sweep step.

    Never raises: the sweep's results are stored whatever happens here, and a report that
    is missing is computed on first view. A failure is logged in one line."""
    try:
        with store.session() as s:
            head = s.get(Run, run_id)
            if head is None or head.status != "finished":
                return None
            base = previous_comparable(s, head)
            if base is None:
                return None
            base_id, base_name = base.id, base.name
        t0 = time.perf_counter()
        c = comparison(store, base_id, run_id, DASHBOARD, log=log)
        if c.stored:
            log(f"comparison with run {base_name} stored for the dashboard ({time.perf_counter() - t0:.1f} s)")
        return c
    except Exception as e:  # noqa: BLE001 - see the docstring
        log(f"comparison with the previous run not stored ({type(e).__name__}: {e}); "
            "the dashboard computes it on first view")
        return None
