"""Stored accuracy tables: ``farm accuracy`` writes one row per (jax, jaxlib, primitive,
dtype, platform), replacing an earlier measurement of the same versions; the dashboard and
the cross-version comparison read them back as plain dicts (``farm.accuracy.score.Score``
fields plus the versions and the reference key)."""
from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from farm.store.models import AccuracyRow

FIELDS = ("primitive", "dtype", "platform", "n", "max_ulp", "max_ulp_normal", "distribution", "worst", "special",
          "error", "seconds")


def put(session: Session, jax: str, jaxlib: str, reference_key: str, rows: list[dict[str, Any]]) -> int:
    """Store ``rows`` (``Score.to_dict()``) measured with jax/jaxlib; returns how many."""
    for r in rows:
        session.execute(delete(AccuracyRow).where(
            AccuracyRow.jax_version == jax, AccuracyRow.jaxlib_version == jaxlib, AccuracyRow.primitive == r["primitive"],
            AccuracyRow.dtype == r["dtype"], AccuracyRow.platform == r["platform"]))
        vals = {k: r.get(k) for k in FIELDS}
        for k in ("max_ulp", "max_ulp_normal"):  # NaN (did not run) is NULL: not every database stores NaN
            if vals[k] is not None and vals[k] != vals[k]:
                vals[k] = None
        vals["distribution"] = vals["distribution"] or {}
        vals["worst"] = vals["worst"] or []
        vals["special"] = vals["special"] or {}
        vals["seconds"] = max(0.0, float(vals["seconds"] or 0.0))
        session.add(AccuracyRow(jax_version=jax, jaxlib_version=jaxlib, reference_key=reference_key, **vals))
    session.flush()
    return len(rows)


def rows(session: Session, jax: str | None = None) -> list[dict[str, Any]]:
    """Every stored row (of one jax version), as dicts, ordered by version then key."""
    q = select(AccuracyRow)
    if jax is not None:
        q = q.where(AccuracyRow.jax_version == jax)
    q = q.order_by(AccuracyRow.jax_version, AccuracyRow.primitive, AccuracyRow.dtype, AccuracyRow.platform)
    return [{"jax": r.jax_version, "jaxlib": r.jaxlib_version, "reference_key": r.reference_key,
             **{k: getattr(r, k) for k in FIELDS}} for r in session.scalars(q)]


def versions(session: Session) -> list[str]:
    return sorted(set(session.scalars(select(AccuracyRow.jax_version))))
