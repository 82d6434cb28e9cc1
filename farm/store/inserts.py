"""INSERTs that skip a row whose natural key exists (ON CONFLICT DO NOTHING), per dialect:
idempotent batch writes, and rows two processes may insert at once."""
from __future__ import annotations

from typing import Any

from sqlalchemy import insert
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session


def insert_skipping(session: Session, model: type, keys: list[str]) -> Any:
    """An INSERT into ``model`` that skips rows whose natural key ``keys`` exists."""
    dialect = session.get_bind().dialect.name
    if dialect == "sqlite":
        return sqlite.insert(model).on_conflict_do_nothing(index_elements=keys)
    if dialect == "postgresql":
        return postgresql.insert(model).on_conflict_do_nothing(index_elements=keys)
    return insert(model)
