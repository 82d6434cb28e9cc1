"""The compare records of a run, for the independent-verdict coverage
(``farm.analysis.verdicts.from_records``): which harnesses were judged against a
reference, by an invariant, or not at all."""
from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from farm.store.models import HarnessRow, ResultRow
from farm.store.queries import _run_filters


def verdict_records(session: Session, run_id: int, **filters: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(every harness of the run with its group, its compare records) for
    ``farm.analysis.verdicts.from_records`` (two queries)."""
    hq = (select(HarnessRow.name, HarnessRow.grp).join(ResultRow, ResultRow.harness_id == HarnessRow.id)
          .where(ResultRow.run_id == run_id).distinct())
    harnesses = [{"harness": n, "group": g} for n, g in session.execute(_run_filters(hq, **filters))]
    rq = (select(HarnessRow.name, ResultRow.platform, ResultRow.status, ResultRow.error_type, ResultRow.error,
                 ResultRow.facts)
          .join(HarnessRow, HarnessRow.id == ResultRow.harness_id)
          .where(ResultRow.run_id == run_id, ResultRow.stage == "compare"))
    records = [{"harness": n, "platform": p, "status": st, "error_type": et, "error": e, "facts": f or {}}
               for n, p, st, et, e, f in session.execute(_run_filters(rq, **filters))]
    return harnesses, records
