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
         "ssl connection has been closed", "could not receive data from server", "administrator command",
         # a server restarting: what a new connection hears while it shuts down or starts up
         "the database system is shutting down", "the database system is starting up",
         "the database system is not yet accepting connections", "the database system is in recovery mode")


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


#: waits between tries of a write that lost its server or found the database locked: doubling
#: from 0.5 s, then every 10 s (a server that is back is noticed within 10 s), 115.5 s in all.
#: A server restarted, or stopped for a minute, is waited out; past that the sweep stops
#: resumably, with one line
RETRY_WAITS_S = (0.5, 1.0, 2.0, 4.0, 8.0) + (10.0,) * 10


def _first_line(e: BaseException) -> str:
    for x in reversed(_chain(e)):  # the driver's own words, not SQLAlchemy's wrapping
        text = str(x).strip()
        if text:
            return text.splitlines()[0][:200]
    return type(e).__name__


def retry(write: Callable[[], T], undo: Callable[[], None] = lambda: None,
          waits: tuple[float, ...] = RETRY_WAITS_S, *, what: str = "the database",
          log: Callable[[str], None] | None = None) -> T:
    """``write()``, again after each wait while it fails transiently (``undo()`` after each failure);
    an idempotent write only.

    Args:
        what: the database, as the progress lines name it (a URL without its password).
        log: gets one line per wait (``farm: lost the connection to the database server
            postgresql://...; retrying in 4 s (waited 3.5 s of up to 120 s): ...``) and one
            when a write that waited gets through (``farm: the database ... is back after 31.2 s``).

    Raises:
        the last failure: one that is not transient, or the last try's once ``waits`` are spent.
    """
    t0 = time.monotonic()
    budget = sum(waits)
    tries = 0
    for wait in (*waits, None):
        try:
            out = write()
        except Exception as e:
            undo()
            if wait is None or not transient(e):
                raise
            tries += 1
            if log is not None:
                why = {"locked": "the SQLite database is locked by another process:",
                       "lost": "lost the connection to the database server:"}[kind(e) or "lost"]
                log(f"farm: {why} {what}; retrying in {wait:g} s (waited {time.monotonic() - t0:.1f} s "
                    f"of up to {budget:.0f} s): {_first_line(e)}")
            time.sleep(wait)
        else:
            if tries and log is not None:
                log(f"farm: {what} is back after {time.monotonic() - t0:.1f} s ({tries} tries); continuing")
            return out
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
