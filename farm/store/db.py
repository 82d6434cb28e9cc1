"""Opening a database: URL checks, SQLite pragmas (WAL, busy timeout), migrations."""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, event, inspect
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from farm.errors import BadDatabaseURL

DEFAULT_URL = "sqlite:///farm.db"
MIGRATIONS = Path(__file__).parent / "migrations"


def _engine(url: str) -> Engine:
    try:
        u = make_url(url)
    except ArgumentError:
        raise BadDatabaseURL(f"cannot parse database URL {url!r} (expected e.g. sqlite:///farm.db "
                             f"or postgresql+psycopg://user@host/db)") from None
    if u.drivername.startswith("sqlite"):
        if u.database and u.database != ":memory:":
            parent = Path(u.database).expanduser().resolve().parent
            if not parent.is_dir():
                raise BadDatabaseURL(f"cannot open {url!r}: directory {parent} does not exist")
        engine = create_engine(u, connect_args={"timeout": 30})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record):  # noqa: ANN001
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    if u.drivername in ("postgresql", "postgres"):
        u = u.set(drivername="postgresql+psycopg")
    try:
        return create_engine(u, pool_pre_ping=True)
    except Exception as e:  # unknown dialect / missing driver
        raise BadDatabaseURL(f"cannot use database URL {url!r}: {e}") from None


def alembic_config(url: str):  # noqa: ANN201
    from alembic.config import Config  # deferred: alembic (over sqlalchemy); only migrations need it

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


class Store:
    """A database handle: engine + session factory. Sessions are committed by callers."""

    def __init__(self, url: str = DEFAULT_URL, *, upgrade: bool = True) -> None:
        self.url = url
        self.engine = _engine(url)
        try:
            with self.engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
        except OperationalError as e:
            first = str(e.orig).strip().splitlines()[0] if e.orig else str(e)
            raise BadDatabaseURL(f"cannot connect to {self.engine.url.render_as_string()}: {first}") from None
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)
        if upgrade:
            self.upgrade()

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def upgrade(self, revision: str = "head") -> None:
        """Create or migrate the schema through Alembic."""
        from alembic import command  # deferred: alembic (over sqlalchemy); only migrations need it
        from alembic.runtime.migration import MigrationContext  # deferred: alembic (over sqlalchemy); only migrations need it
        from alembic.script import ScriptDirectory  # deferred: alembic (over sqlalchemy); only migrations need it

        cfg = alembic_config(self.url)
        head = ScriptDirectory.from_config(cfg).get_current_head()
        with self.engine.connect() as conn:
            current = MigrationContext.configure(conn).get_current_revision()
        if current == head and revision == "head":
            return
        with self._migration_lock(), self.engine.begin() as conn:  # two processes opening a new database at once
            if revision != "head" or MigrationContext.configure(conn).get_current_revision() != head:
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, revision)

    @contextmanager
    def _migration_lock(self) -> Iterator[None]:
        """One migrating process at a time: flock on the SQLite file's directory, an advisory
        lock on PostgreSQL.

        Never a descriptor of the database file itself: closing any descriptor of a file drops
        every POSIX (fcntl) lock this process holds on it, SQLite's own included. A process that
        migrated a new file that way lost its WAL lock: the next process to close the database
        took it for the last user, checkpointed and deleted the WAL, and every later commit of
        the first process went into the deleted file (a sweep's batches and its ``finished``
        status lost, with no error). ``tests/test_store_sqlite_locks.py``."""
        path = sqlite_file(self.url)
        if path is not None:
            import fcntl  # deferred: POSIX only, and only when migrating

            fd = os.open(path.expanduser().resolve().parent, os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
            return
        if self.dialect == "postgresql":
            with self.engine.connect() as conn:
                conn.exec_driver_sql("SELECT pg_advisory_lock(727274)")
                try:
                    yield
                finally:
                    conn.exec_driver_sql("SELECT pg_advisory_unlock(727274)")
                    conn.commit()
            return
        yield

    def tables(self) -> list[str]:
        return inspect(self.engine).get_table_names()

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session committed on success, rolled back on error."""
        s = self.sessions()
        try:
            yield s
            s.commit()
        except BaseException:
            s.rollback()
            raise
        finally:
            s.close()

    def dispose(self) -> None:
        self.engine.dispose()


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names (None: another database, in memory, or an unparsable URL)."""
    try:
        u = make_url(url)
    except ArgumentError:
        return None
    if not u.drivername.startswith("sqlite") or not u.database or u.database == ":memory:":
        return None
    return Path(u.database).expanduser()


def open_store(url: str | None = None, *, upgrade: bool = True, must_exist: bool = False) -> Store:
    """Open (and by default migrate) the database at ``url`` (default: $FARM_DB or sqlite:///farm.db).

    Args:
        must_exist: refuse a SQLite file that does not exist instead of creating it (read-only
            commands: a typo in the path must not yield an empty database).

    Raises:
        BadDatabaseURL: an unparsable URL, an unreachable server, a missing directory, or
            (``must_exist``) a missing SQLite file.
    """
    url = url or os.environ.get("FARM_DB", DEFAULT_URL)
    path = sqlite_file(url) if must_exist else None
    if path is not None and not path.exists():
        raise BadDatabaseURL(f"no database at {url!r} ({path.resolve()} does not exist; "
                             f"`farm sweep` or `farm db upgrade` creates one)")
    return Store(url, upgrade=upgrade)
