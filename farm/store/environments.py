"""Environment rows: one per comparable (versions, devices, flags) combination."""
from __future__ import annotations

from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from farm.pipeline.host import describe, farm_commit, fingerprint
from farm.store.models import Environment

__all__ = ["describe", "farm_commit", "fingerprint", "get_or_create"]


def get_or_create(session: Session, env: dict[str, Any]) -> Environment:
    """The row of ``env``'s fingerprint, inserted if new. Two sweeps starting at once into one
    database insert the same environment: the insert skips a row that exists by then
    (ON CONFLICT DO NOTHING) instead of failing on the unique fingerprint."""
    fp = fingerprint(env)
    row = session.scalar(select(Environment).where(Environment.fingerprint == fp))
    if row is not None:
        return row
    values = {"fingerprint": fp, **{k: env[k] for k in ("jax_version", "jaxlib_version", "python", "host",
                                                         "device_kinds", "xla_flags", "farm_commit")}}
    dialect = session.get_bind().dialect.name
    if dialect in ("sqlite", "postgresql"):
        ins = (sqlite if dialect == "sqlite" else postgresql).insert(Environment)
        session.execute(ins.values(**values).on_conflict_do_nothing(index_elements=["fingerprint"]))
    else:
        session.execute(insert(Environment).values(**values))
    return session.scalar(select(Environment).where(Environment.fingerprint == fp))
