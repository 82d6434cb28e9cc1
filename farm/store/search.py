"""Harness search: every word of the text in the harness name (or its primitive), in a run.

Each word is one indexed condition: an exact primitive (``ix_harnesses_primitive``), a
name prefix (a range on ``ix_harnesses_name``) or a case-insensitive substring of the
name. A run restricts the search to its harnesses (``harness_outcomes.run_id``), and a
status or platform to harnesses with such a result in it (``ix_results_harness_run``).
Two queries: the page of ids with the total, then the page's statuses per platform.

Example::

    with store.session() as s:
        total, rows = search.harnesses(s, "cumsum float32", run_id=3, status=("fail",))
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, exists, func, or_, select
from sqlalchemy.orm import Session

from farm.store.models import HarnessRow, OutcomeRow, ResultRow
from farm.results import worst_status as worst

#: Server-side orders (a leading "-" reverses): name, primitive, dtype, catalog.
SORTS = ("name", "-name", "primitive", "-primitive", "dtype", "-dtype", "catalog", "-catalog")
#: At most this many words are matched (more are a 400 at the page).
MAX_WORDS = 8


def words(text: str) -> list[str]:
    """The search words: whitespace-separated, at most 100 characters each, duplicates dropped."""
    return list(dict.fromkeys(w[:100] for w in text.split()))


def _word(w: str) -> Any:
    h = HarnessRow
    return or_(h.primitive == w, and_(h.name >= w, h.name < w + "\U0010ffff"),
               func.lower(h.name).contains(w.lower(), autoescape=True))


def _order(sort: str) -> list[Any]:
    col = getattr(HarnessRow, sort.lstrip("-"))
    key = col.desc() if sort.startswith("-") else col.asc()
    return [key, HarnessRow.name.asc(), HarnessRow.id.asc()]


def harnesses(session: Session, text: str, *, run_id: int | None = None, status: Sequence[str] = (),
              platform: Sequence[str] = (), sort: str = "name", limit: int = 100,
              offset: int = 0) -> tuple[int, list[dict[str, Any]]]:
    """(total, one page of harnesses) matching ``text``; each row ``{name, fingerprint,
    primitive, dtype, catalog, platforms: {platform: worst status in run_id}}`` (``platforms``
    empty without a run).

    Raises:
        ValueError: ``sort`` not in ``SORTS``.
    """
    if sort not in SORTS:
        raise ValueError(f"sort must be one of {', '.join(SORTS)}, not {sort!r}")
    h = HarnessRow
    q = select(h.id)
    for w in words(text)[:MAX_WORDS]:
        q = q.where(_word(w))
    if run_id is not None:
        q = q.where(h.id.in_(select(OutcomeRow.harness_id).where(OutcomeRow.run_id == run_id)))
        if status or platform:
            r = ResultRow
            cond = [r.harness_id == h.id, r.run_id == run_id]
            if status:
                cond.append(r.status.in_(list(status)))
            if platform:
                cond.append(r.platform.in_(list(platform)))
            q = q.where(exists().where(*cond))
    total = session.scalar(select(func.count()).select_from(q.subquery())) or 0
    page = session.execute(select(h.id, h.name, h.fingerprint, h.primitive, h.dtype, h.catalog)
                           .where(h.id.in_(q.scalar_subquery())).order_by(*_order(sort))
                           .limit(limit).offset(offset)).all()
    per: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    if page and run_id is not None:
        for hid, plat, st in session.execute(select(ResultRow.harness_id, ResultRow.platform, ResultRow.status)
                                             .where(ResultRow.run_id == run_id,
                                                    ResultRow.harness_id.in_([p.id for p in page]))):
            per[hid][plat].append(st)
    return total, [{"name": name, "fingerprint": fp, "primitive": prim, "dtype": dt, "catalog": cat,
                    "platforms": {p: worst(s) for p, s in sorted(per[hid].items())}}
                   for hid, name, fp, prim, dt, cat in page]
