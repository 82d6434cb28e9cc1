"""Environment rows: one per comparable (versions, devices, flags) combination."""
from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from farm.host import describe, farm_commit, fingerprint
from farm.store.inserts import insert_skipping
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
    session.execute(insert_skipping(session, Environment, ["fingerprint"]).values(**values))
    return session.scalar(select(Environment).where(Environment.fingerprint == fp))
