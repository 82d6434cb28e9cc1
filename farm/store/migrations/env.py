"""Alembic environment: uses the connection the Store passes in, or the URL."""
from alembic import context
from sqlalchemy import create_engine

from farm.store.models import Base

config = context.config
target_metadata = Base.metadata


def run() -> None:
    conn = config.attributes.get("connection")
    if conn is not None:
        _migrate(conn)
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.begin() as connection:
        _migrate(connection)


def _migrate(conn) -> None:  # noqa: ANN001
    """SQLite rebuilds a table to change a constraint (batch mode): with foreign keys on, the
    rebuild's DROP TABLE would first delete every row that cascades from it, so they are off
    while migrating (the pragma is set outside a transaction: pysqlite opens none for it)."""
    sqlite = conn.dialect.name == "sqlite"
    if sqlite:
        conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
    try:
        context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
    finally:
        if sqlite:
            conn.exec_driver_sql("PRAGMA foreign_keys=ON")


if context.is_offline_mode():
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata,
                      literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    run()
