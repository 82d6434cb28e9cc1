"""Environment rows: one per comparable (versions, devices, flags) combination."""
from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from farm.pipeline.host import describe, farm_commit, fingerprint
from farm.store.models import Environment

__all__ = ["describe", "farm_commit", "fingerprint", "get_or_create"]


def get_or_create(session: Session, env: dict[str, Any]) -> Environment:
    fp = fingerprint(env)
    row = session.scalar(select(Environment).where(Environment.fingerprint == fp))
    if row is None:
        row = Environment(fingerprint=fp, **{k: env[k] for k in ("jax_version", "jaxlib_version", "python", "host",
                                                                  "device_kinds", "xla_flags", "farm_commit")})
        session.add(row)
        session.flush()
    return row
