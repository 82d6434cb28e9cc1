"""What a scheduler remembers and holds: the JSON state file, the one-copy lock of a
sweep, and the scheduled runs found in the store (see ``farm.run.schedules``).

SQLAlchemy and ``farm.store`` are imported inside the functions that use them: together
they cost about 0.3 s at start-up (measured with ``python -X importtime``), which
``farm schedule list``, ``--dry-run`` and a file lock never need.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from farm.errors import ConfigError
from farm.run.schedules.config import SweepSpec, _stderr


# --------------------------------------------------------------------------- state file
class State:
    """The JSON state file: per sweep, the last slot attempted and how it went."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _read(self) -> dict[str, Any]:
        try:
            doc = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {"version": 1, "sweeps": {}}
        except (OSError, ValueError) as e:
            _stderr(f"warning: ignoring unreadable state file {self.path}: {e}")
            return {"version": 1, "sweeps": {}}
        if doc.get("version") != 1:
            _stderr(f"warning: ignoring state file {self.path} of unknown version {doc.get('version')!r}")
            return {"version": 1, "sweeps": {}}
        return doc

    def get(self, sweep: str) -> dict[str, Any]:
        with self._locked():
            return dict(self._read()["sweeps"].get(sweep, {}))

    def update(self, sweep: str, **fields: Any) -> None:
        with self._locked():
            doc = self._read()
            doc["sweeps"].setdefault(sweep, {}).update(fields)
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text(json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n")
            os.replace(tmp, self.path)


# --------------------------------------------------------------------------- lock
class AlreadyRunning(ConfigError):
    """Another scheduler holds this sweep's lock."""


def _lock_key(sweep: str) -> int:
    return int.from_bytes(hashlib.sha256(f"farm-schedule:{sweep}".encode()).digest()[:8], "big", signed=True)


@contextlib.contextmanager
def sweep_lock(spec: SweepSpec, lock_dir: Path) -> Iterator[str]:
    """Hold the one-copy lock of ``spec`` (raises AlreadyRunning). Yields what was locked."""
    url = spec.db or ""
    if url.startswith(("postgresql", "postgres")):
        from sqlalchemy import text  # lazy: ~0.3 s with farm.store (module docstring)

        from farm.store.db import _engine  # lazy: ~0.3 s with farm.store (module docstring)

        engine = _engine(url)
        try:
            with engine.connect() as conn:
                key = _lock_key(spec.name)
                if not conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar():
                    raise AlreadyRunning(f"sweep {spec.name!r} is already running (PostgreSQL advisory lock {key})")
                conn.commit()
                try:
                    yield f"advisory lock {key}"
                finally:
                    conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                    conn.commit()
        finally:
            engine.dispose()
        return
    lock_dir.mkdir(parents=True, exist_ok=True)
    path = lock_dir / f".farm-schedule-{spec.name}.lock"
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AlreadyRunning(f"sweep {spec.name!r} is already running (lock file {path})") from None
        try:
            yield str(path)
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- runs in the store
def run_status(db: str | None, run_name: str) -> str | None:
    """The stored status of a run by name, or None if there is no such run."""
    from sqlalchemy import select  # lazy: ~0.3 s with farm.store (module docstring)

    from farm.store import open_store  # lazy: ~0.3 s with farm.store (module docstring)
    from farm.store.models import Run  # lazy: ~0.3 s with farm.store (module docstring)

    store = open_store(db)
    try:
        with store.session() as s:
            return s.scalar(select(Run.status).where(Run.name == run_name))
    finally:
        store.dispose()


def previous_run(spec: SweepSpec, before: str) -> str | None:
    """The newest finished scheduled run of ``spec`` older than run ``before``."""
    from sqlalchemy import select  # lazy: ~0.3 s with farm.store (module docstring)

    from farm.store import open_store  # lazy: ~0.3 s with farm.store (module docstring)
    from farm.store.models import Run  # lazy: ~0.3 s with farm.store (module docstring)

    store = open_store(spec.db)
    try:
        with store.session() as s:
            # ``before`` names a slot's run, or (over configurations or versions) its runs' series
            cur = s.scalar(select(Run.slot).where(Run.schedule == spec.name, (Run.name == before) | (Run.series == before)))
            q = select(Run).where(Run.status == "finished", Run.schedule == spec.name)
            if cur is not None:
                q = q.where(Run.slot < cur)
            prev = s.scalars(q.order_by(Run.slot.desc(), Run.id.desc()).limit(1)).first()
            return (prev.series or prev.name) if prev else None
    finally:
        store.dispose()


def slot_labels(db: str | None, slot_run: str) -> dict[str, str]:
    """The runs of a slot over configurations or versions (series ``slot_run``) by label:
    the configuration, or ``jax=V`` for a version's own run."""
    from sqlalchemy import select  # lazy: ~0.3 s with farm.store (module docstring)

    from farm.store import open_store  # lazy: ~0.3 s with farm.store (module docstring)
    from farm.store.models import Run  # lazy: ~0.3 s with farm.store (module docstring)

    store = open_store(db)
    try:
        with store.session() as s:
            runs = s.scalars(select(Run).where(Run.series == slot_run, Run.exported_on.is_(None))).all()
            return {r.config or f"jax={r.jax_version}": r.name for r in runs if r.config or r.jax_version}
    finally:
        store.dispose()
