"""Delta runs: a finished run that is "the same as run B except these harnesses".

When a run finishes, its rows are compared with a fully stored earlier run's (its base:
the newest finished full run of the same catalog, kind and dimensions). A harness whose
outcome row and every result row are identical in every field (status, stage details,
numbers, timings, artifact digests, worker, cache origin, environment) to the base's is
deleted from the run; the run names the base (``runs.base_run_id``) and the views
``results`` and ``harness_outcomes`` give it the base's rows for those harnesses
(migration 0008). A run becomes a delta only if it ran every harness its base ran and
stores at most ``max_fraction`` of its harnesses; otherwise it stays fully stored and is
the next runs' base. Chains are one deep: a base is always fully stored, so reading a
delta run is one join.

Identity is exact and conservative: JSON columns compare as their stored text, so two
equal dicts written in another key order count as a change (stored again), never the
reverse.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Text, and_, cast, delete, exists, func, literal, select
from sqlalchemy.orm import Session, aliased

from farm.store.inserts import insert_skipping
from farm.store.models import OUTCOME_FIELDS, RESULT_FIELDS, Run, StoredOutcomeRow, StoredResultRow

#: a run storing more than this fraction of its harnesses stays fully stored (and becomes
#: the next runs' base): an unchanged nightly then costs at most this much of a full run
MAX_FRACTION = 0.01
_JSON = ("metrics", "facts")
_KEY = ("harness_id", "platform", "stage")
_CHUNK = 500


@dataclass(frozen=True)
class Delta:
    """What compaction did to a run: its base (None: kept fully stored) and its harness counts."""
    base: int | None
    harnesses: int
    stored: int

    def to_dict(self) -> dict[str, Any]:
        return {"base": self.base, "harnesses": self.harnesses, "stored": self.stored}


def _same(a: Any, b: Any, fields: tuple[str, ...]) -> list[Any]:
    out = []
    for f in fields:
        x, y = getattr(a, f), getattr(b, f)
        if f in _KEY:
            out.append(x == y)  # NOT NULL key columns: plain equality keeps the indexes usable
        elif f in _JSON:
            out.append(cast(x, Text).is_not_distinct_from(cast(y, Text)))
        else:
            out.append(x.is_not_distinct_from(y))
    return out


def identical_harnesses(session: Session, run_id: int, base_id: int) -> set[int] | None:
    """Harness ids whose outcome and result rows in ``run_id`` equal ``base_id``'s in every
    field; None if the base ran a harness the run did not (the run cannot inherit from it)."""
    od, ob = aliased(StoredOutcomeRow), aliased(StoredOutcomeRow)
    missing = session.scalar(select(ob.harness_id).where(
        ob.run_id == base_id, ~exists().where(od.run_id == run_id, od.harness_id == ob.harness_id)).limit(1))
    if missing is not None:
        return None
    same = set(session.scalars(select(od.harness_id).join(ob, and_(ob.run_id == base_id, ob.harness_id == od.harness_id))
                               .where(od.run_id == run_id, *_same(od, ob, OUTCOME_FIELDS[1:]))))
    if not same:
        return same
    rd, rb = aliased(StoredResultRow), aliased(StoredResultRow)
    changed = set(session.scalars(select(rd.harness_id).where(
        rd.run_id == run_id, ~exists().where(rb.run_id == base_id, *_same(rd, rb, RESULT_FIELDS))).distinct()))
    gone = set(session.scalars(select(rb.harness_id).where(
        rb.run_id == base_id, ~exists().where(rd.run_id == run_id, *_same(rd, rb, _KEY))).distinct()))
    return same - changed - gone


def candidates(session: Session, run: Run, limit: int = 2) -> list[Run]:
    """The fully stored finished runs a run may be a delta of, newest first."""
    q = select(Run).where(Run.id < run.id, Run.base_run_id.is_(None), Run.status == "finished",
                          Run.catalog == run.catalog, Run.kind == run.kind,
                          Run.config.is_not_distinct_from(run.config), Run.jax_version.is_not_distinct_from(run.jax_version),
                          Run.exported_on.is_not_distinct_from(run.exported_on))
    return list(session.scalars(q.order_by(Run.id.desc()).limit(limit)))


def _stored_ids(session: Session, run_id: int) -> list[int]:
    return list(session.scalars(select(StoredOutcomeRow.harness_id).where(StoredOutcomeRow.run_id == run_id)))


def compact(session: Session, run: Run, *, max_fraction: float = MAX_FRACTION) -> Delta:
    """Make ``run`` a delta of its best base if that stores at most ``max_fraction`` of its
    harnesses; otherwise leave it fully stored. Caller commits."""
    ids = _stored_ids(session, run.id)
    if run.base_run_id is not None or not ids:
        return Delta(run.base_run_id, len(ids), len(ids))
    best: tuple[int, set[int]] | None = None
    for base in candidates(session, run):
        same = identical_harnesses(session, run.id, base.id)
        if same is not None and (best is None or len(same) > len(best[1])):
            best = (base.id, same)
    if best is None or len(ids) - len(best[1]) > max_fraction * len(ids):
        return Delta(None, len(ids), len(ids))
    base_id, same = best
    drop = sorted(same)
    for i in range(0, len(drop), _CHUNK):
        chunk = drop[i:i + _CHUNK]
        session.execute(delete(StoredResultRow).where(StoredResultRow.run_id == run.id,
                                                      StoredResultRow.harness_id.in_(chunk)))
        session.execute(delete(StoredOutcomeRow).where(StoredOutcomeRow.run_id == run.id,
                                                       StoredOutcomeRow.harness_id.in_(chunk)))
    run.base_run_id = base_id
    session.flush()
    return Delta(base_id, len(ids), len(ids) - len(drop))


def materialize(session: Session, run: Run) -> int:
    """Store a delta run's inherited rows as its own and drop its base: it reads the same and
    no longer depends on the base (``farm db prune``). Returns the harnesses copied."""
    if run.base_run_id is None:
        return 0
    o = aliased(StoredOutcomeRow)
    b, ob = aliased(StoredResultRow), aliased(StoredOutcomeRow)
    own = ~exists().where(o.run_id == run.id, o.harness_id == b.harness_id)
    session.execute(insert_skipping(session, StoredResultRow, ["run_id", *_KEY]).from_select(
        ["run_id", *RESULT_FIELDS], select(literal(run.id), *[getattr(b, f) for f in RESULT_FIELDS])
        .where(b.run_id == run.base_run_id, own).order_by(b.id)))  # ids in the base's order: readers order by id
    n = len(_stored_ids(session, run.id))
    session.execute(insert_skipping(session, StoredOutcomeRow, ["run_id", "harness_id"]).from_select(
        ["run_id", *OUTCOME_FIELDS], select(literal(run.id), *[getattr(ob, f) for f in OUTCOME_FIELDS])
        .where(ob.run_id == run.base_run_id, ~exists().where(o.run_id == run.id, o.harness_id == ob.harness_id))
        .order_by(ob.id)))
    run.base_run_id = None
    session.flush()
    return len(_stored_ids(session, run.id)) - n


def counts(session: Session, run_ids: list[int], table: str = "results") -> dict[int, Counter]:
    """run id -> status -> rows of the ``results`` view (``table="results"``), or run id ->
    ``""`` -> rows of the ``harness_outcomes`` view (``"outcomes"``), without reading the
    views. A delta run's effective rows are its own plus its base's for the harnesses it
    stored no outcome for, so its counts are its own, plus its base's, less the base's for
    the harnesses it stored: each base is counted once however many delta runs read it.
    (Counting the views ran the base's anti-join once per delta run: 0.8 s for 10 nightlies
    of a full upstream run in PostgreSQL.)"""
    if not run_ids:
        return {}
    model = StoredResultRow if table == "results" else StoredOutcomeRow
    by_status = table == "results"
    base = dict(session.execute(select(Run.id, Run.base_run_id).where(Run.id.in_(run_ids))).tuples().all())
    wanted = sorted(set(run_ids) | {b for b in base.values() if b is not None})
    own: dict[int, Counter] = {rid: Counter() for rid in wanted}
    for i in range(0, len(wanted), _CHUNK):
        _tally(own, session, select(model.run_id).where(model.run_id.in_(wanted[i:i + _CHUNK])), model.run_id,
               model.status if by_status else None)
    delta_ids = [rid for rid in run_ids if base.get(rid) is not None]
    shadowed: dict[int, Counter] = {rid: Counter() for rid in delta_ids}
    if delta_ids:
        d, b, o = aliased(Run), aliased(model), aliased(StoredOutcomeRow)
        _tally(shadowed, session, select(d.id).join(o, o.run_id == d.id)
               .join(b, and_(b.run_id == d.base_run_id, b.harness_id == o.harness_id)).where(d.id.in_(delta_ids)),
               d.id, b.status if by_status else None)
    out: dict[int, Counter] = {}
    for rid in run_ids:
        c = Counter(own[rid])
        if rid in shadowed:
            c.update(own[base[rid]])
            c.subtract(shadowed[rid])
        out[rid] = +c
    return out


def _tally(into: dict[int, Counter], session: Session, q: Any, run_col: Any, status: Any) -> None:
    """Add ``q``'s row counts per run (and per ``status`` column, unless None) into ``into``."""
    if status is not None:
        for rid, st, n in session.execute(q.add_columns(status, func.count()).group_by(run_col, status)):
            into[rid][st] += n
    else:
        for rid, n in session.execute(q.add_columns(func.count()).group_by(run_col)):
            into[rid][""] += n
