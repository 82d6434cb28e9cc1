"""Storage failures as one line: a full disk, a database locked too long, a lost
connection to the database server. Matched on the exception chain's types and messages,
so this module imports no driver (``farm.cli`` asks it about any uncaught exception)."""
from __future__ import annotations

import errno
import time
from collections.abc import Callable
from typing import TypeVar

from farm.errors import StorageError

T = TypeVar("T")
_FULL = ("database or disk is full", "no space left on device", "could not extend file", "disk full")
_LOCKED = ("database is locked", "database table is locked")
_LOST = ("server closed the connection", "terminating connection", "connection is closed", "connection refused",
         "consuming input failed", "connection to server", "the connection is lost", "connection already closed",
         "ssl connection has been closed", "could not receive data from server", "administrator command")


def _chain(e: BaseException) -> list[BaseException]:
    out, seen = [], set()
    x: BaseException | None = e
    while x is not None and id(x) not in seen:
        seen.add(id(x))
        out.append(x)
        orig = getattr(x, "orig", None)  # a SQLAlchemy error wraps the driver's
        if isinstance(orig, BaseException) and id(orig) not in seen:
            out.append(orig)
            seen.add(id(orig))
        x = x.__cause__ or x.__context__
    return out


def kind(e: BaseException) -> str | None:
    """``full``, ``locked``, ``lost`` or None (not a storage failure)."""
    for x in _chain(e):
        if isinstance(x, OSError) and x.errno in (errno.ENOSPC, errno.EDQUOT):
            return "full"
        msg = str(x).lower()
        if any(m in msg for m in _FULL):
            return "full"
        if any(m in msg for m in _LOCKED):
            return "locked"
        if getattr(x, "connection_invalidated", False) or any(m in msg for m in _LOST):
            return "lost"
    return None


def transient(e: BaseException) -> bool:
    """Worth retrying the same write: the server came back, or the other writer finished."""
    return kind(e) in ("locked", "lost")


#: waits between retries of a write that lost its connection or found the database locked (~1 min)
RETRY_WAITS_S = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)


def retry(write: Callable[[], T], undo: Callable[[], None] = lambda: None,
          waits: tuple[float, ...] = RETRY_WAITS_S) -> T:
    """``write()``, again after each wait while it fails transiently (``undo()`` after each failure);
    an idempotent write only."""
    for wait in (*waits, None):
        try:
            return write()
        except Exception as e:
            undo()
            if wait is None or not transient(e):
                raise
            time.sleep(wait)
    raise AssertionError("unreachable")


def explain(e: BaseException, then: str = "") -> StorageError | None:
    """``e`` as one line (None: not a storage failure); ``then`` says how to continue."""
    k = kind(e)
    if k is None:
        return None
    what = {"full": "the disk is full (no space left for the database or the artifact directory)",
            "locked": "the SQLite database stayed locked by another process past the 30 s busy timeout",
            "lost": "lost the connection to the database server"}[k]
    return StorageError(f"{what}; the last batch was rolled back, the database is intact" + (f"; {then}" if then else ""))
