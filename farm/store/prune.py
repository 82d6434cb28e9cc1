"""Retention (``farm db prune``): delete old runs without breaking what the kept runs read.

A run is kept when it is among the newest ``keep`` runs, started within ``keep_days``, or
still running. Beyond those, a run is kept when a kept run needs it:

- a stored comparison report (``reports``; a run's own trend summary aside) of a kept
  run names it as the other side: the report stays readable;
- a kept delta run names it as its base (``runs.base_run_id``): the delta run reads the
  base's rows. With ``materialize`` the delta run stores those rows as its own instead,
  and the base may go.

Everything else is deleted; its rows, outcomes and reports go with it (foreign keys
cascade). Artifacts are content-addressed and shared across runs: they are left alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from farm.errors import ConfigError
from farm.store import deltas
from farm.store.models import ReportRow, Run
from farm.store.models.base import utcnow


@dataclass(frozen=True)
class Plan:
    """What a prune deletes, keeps beyond the asked-for runs (id -> why), and materializes."""
    delete: list[int]
    kept: dict[int, str] = field(default_factory=dict)
    materialize: list[int] = field(default_factory=list)
    total: int = 0

    def lines(self, names: dict[int, str]) -> list[str]:
        out = [f"{len(self.delete)} of {self.total} runs to delete"
               + (f": {', '.join(names.get(i, str(i)) for i in self.delete[:10])}"
                  + (" ..." if len(self.delete) > 10 else "") if self.delete else "")]
        for rid, why in sorted(self.kept.items()):
            out.append(f"kept {names.get(rid, rid)}: {why}")
        for rid in self.materialize:
            out.append(f"materialized {names.get(rid, rid)}: stores its base's rows as its own")
        return out


def plan(session: Session, *, keep: int | None = None, keep_days: float | None = None,
         materialize: bool = False, now: datetime | None = None) -> Plan:
    """Which runs a prune deletes (nothing is changed).

    Raises:
        ConfigError: neither ``keep`` nor ``keep_days``, or a negative one.
    """
    if keep is None and keep_days is None:
        raise ConfigError("farm db prune needs --keep N (newest runs) and/or --keep-days D")
    if (keep is not None and keep < 0) or (keep_days is not None and keep_days < 0):
        raise ConfigError("--keep and --keep-days must be at least 0")
    runs = session.execute(select(Run.id, Run.started_at, Run.status, Run.base_run_id)
                           .order_by(Run.id.desc())).all()
    young: set[int] = {r.id for r in runs if r.status == "running"}
    if keep is not None:
        young |= {r.id for r in runs[:keep]}
    if keep_days is not None:
        since = (now or utcnow()) - timedelta(days=keep_days)
        young |= {r.id for r in runs if r.started_at is not None and r.started_at >= since}
    kept: dict[int, str] = {}
    for base, head in session.execute(select(ReportRow.base_run_id, ReportRow.head_run_id)
                                      .where(ReportRow.base_run_id != ReportRow.head_run_id)):
        for mine, other in ((head, base), (base, head)):
            if mine in young and other not in young:
                kept.setdefault(other, f"a stored comparison with run {mine}")
    base_of = {r.id: r.base_run_id for r in runs}
    to_materialize: list[int] = []
    for rid in sorted(young | set(kept)):
        b = base_of.get(rid)
        if b is None or b in young or b in kept:
            continue
        if materialize:
            to_materialize.append(rid)
        else:
            kept[b] = f"the base of delta run {rid}"
    gone = [r.id for r in runs if r.id not in young and r.id not in kept]
    return Plan(gone, kept, to_materialize, len(runs))


def prune(session: Session, p: Plan) -> int:
    """Carry out ``p`` (caller commits): materialize, then delete delta runs before their bases."""
    for rid in p.materialize:
        run = session.get(Run, rid)
        if run is not None:
            deltas.materialize(session, run)
    gone = set(p.delete)
    bases = {rid for rid, in session.execute(select(Run.base_run_id).where(Run.base_run_id.is_not(None)))}
    order = sorted(gone, key=lambda rid: rid in bases)  # deltas first: a base cannot go while named
    for i in range(0, len(order), 200):
        session.execute(delete(Run).where(Run.id.in_(order[i:i + 200])))
    session.flush()
    return len(order)


def summary(session: Session) -> dict[str, Any]:
    """Runs by how they are stored (for the command's last line)."""
    rows = session.execute(select(Run.base_run_id)).all()
    return {"runs": len(rows), "delta": sum(1 for (b,) in rows if b is not None)}
