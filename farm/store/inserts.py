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


def bulk_insert_skipping(session: Session, table: Any, rows: list[dict[str, Any]], keys: list[str]) -> None:
    """Insert many rows into ``table``, skipping those whose natural key ``keys`` exists.

    PostgreSQL: COPY into a temporary table, then one INSERT ... SELECT ... ON CONFLICT DO
    NOTHING (three round trips for any number of rows; psycopg's executemany sends them one
    by one). Elsewhere: one executemany per 1000 rows (SQLite is in process)."""
    if not rows:
        return
    conn = session.connection()
    if conn.dialect.name != "postgresql":
        stmt = insert_skipping(session, table, keys)
        for i in range(0, len(rows), 1000):
            conn.execute(stmt, rows[i:i + 1000])
        return
    import json  # deferred: only this path serializes by hand

    cols = list(rows[0])
    as_json = {c.name for c in table.columns if c.name in cols and c.type.__class__.__name__ == "JSON"}
    stage = f"_stage_{table.name}"
    names = ", ".join(cols)
    raw = conn.connection.dbapi_connection
    with raw.cursor() as cur:
        cur.execute(f"CREATE TEMP TABLE IF NOT EXISTS {stage} (LIKE {table.name} INCLUDING DEFAULTS) "
                    f"ON COMMIT DELETE ROWS")
        with cur.copy(f"COPY {stage} ({names}) FROM STDIN") as copy:
            for r in rows:
                copy.write_row([json.dumps(r[c]) if c in as_json and r[c] is not None else r[c] for c in cols])
        cur.execute(f"INSERT INTO {table.name} ({names}) SELECT {names} FROM {stage} "
                    f"ON CONFLICT ({', '.join(keys)}) DO NOTHING")
        cur.execute(f"TRUNCATE {stage}")
