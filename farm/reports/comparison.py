"""Comparison reports: ``farm.analysis.report`` of a head run against a base run, over
the rows the store returns, kept in the store's ``reports`` table (``farm.store.reports``:
when a stored report is still current) and computed again only when it is not.

The dashboard's compare page, ``farm compare`` and the end of ``farm sweep`` share one
stored report per (base, head, settings). ``comparison`` is get-or-compute-and-put over
a ``Store``; ``precompute`` is the end-of-sweep step; ``selection`` is what the head
run's catalog and filters select in the catalog now (part of a stored report's stamp).
"""
from __future__ import annotations

import gc
import hashlib
import inspect
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from farm import analysis
from farm.errors import FarmError, UnknownName
from farm.store import queries, reports as store_reports
from farm.store.models import Run
from farm.store.reports import RunDict, cacheable, previous_comparable

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
        return hashlib.sha256(json.dumps(self.as_dict(), sort_keys=True).encode()).hexdigest()


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
    from farm import catalog  # deferred: farm.catalog (over the store); only selection() needs it

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
        history = store_reports.history(s, b.id, h.id, settings.history)
        selected = selection(head)
        rep = None if recompute else store_reports.get(s, base, head, settings.key(), analysis.FORMAT_VERSION,
                                                        history, selected)
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
                store_reports.put(s, base, head, rep, settings.key(), settings.as_dict(), history, seconds, selected)
            stored = True
        except SQLAlchemyError as e:
            first = (str(getattr(e, "orig", None) or e).strip().splitlines() or [""])[0]
            log(f"farm: comparison of run {head['name']} with {base['name']} not stored ({type(e).__name__}: {first})")
    return Comparison(base, head, rep, from_store=False, stored=stored)


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
