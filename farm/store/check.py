"""``farm db check``: the store checked as a whole.

Every artifact's bytes are read and hashed, every reference from a result to an artifact
is followed, and the blob directory (``FARM_ARTIFACT_DIR``) is matched against the rows.
The jax code each harness ran (``code_deps``) is checked the same way: every row must
decompress to a body that hashes to its address, and every outcome's code set must be
readable whole (one that is not only costs that harness its reuse on a later jax tree).
``repair`` removes orphan blob files (and staging files a killed writer left) and marks
each artifact whose bytes are lost ``damaged`` (a read says so in one line; the next
genuine write of that address replaces it). It never deletes a result, an artifact, nor
a blob file that a row names. A damaged ``code_deps`` row is deleted: it is a cache entry
that reads already skip, and the next sweep that runs that code writes it again (a
write skips addresses that have a row, so a damaged one would otherwise stay).
"""
from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from farm.store import artifacts, codedeps
from farm.store.models import ArtifactRow, CodeDepsRow, ResultRow, StoredOutcomeRow

#: a staging file is left by a dead writer when its pid is gone, or in any case after this long
STALE_STAGING_S = 24 * 3600.0
_KIND_OF_STAGE = {"export": "export", "serialize": "export", "execute": "io"}


@dataclass(frozen=True)
class CheckReport:
    """What ``check`` found; ``ok`` when nothing is wrong that has not been marked."""

    artifacts: int
    blob_files: int
    references: int
    bad: dict[str, str] = field(default_factory=dict)  # sha -> why its bytes are lost (not yet marked)
    damaged: int = 0  # artifacts already marked damaged
    broken_references: int = 0  # results naming an artifact that is bad, damaged or missing
    dangling: tuple[str, ...] = ()  # addresses results name that have no row
    orphans: tuple[str, ...] = ()  # blob-directory files no row names (incl. dead staging files)
    repaired: dict[str, int] = field(default_factory=dict)
    code_rows: int = 0  # code_deps rows
    bad_code: tuple[str, ...] = ()  # code_deps addresses whose body is unreadable or hashes elsewhere
    #: outcome rows whose code set has no row, a damaged one, or a part that is missing or damaged
    unreadable_sets: int = 0

    @property
    def ok(self) -> bool:
        return not (self.bad or self.dangling or self.orphans or self.bad_code)

    def lines(self) -> list[str]:
        out = [f"artifacts: {self.artifacts} rows, {len(self.bad)} whose bytes are missing or do not hash to "
               f"their address, {self.damaged} marked damaged",
               f"references: {self.references} results name an artifact, {self.broken_references} of them "
               f"broken, {len(self.dangling)} name an address with no row",
               f"blob directory: {self.blob_files} files, {len(self.orphans)} orphans",
               f"code_deps: {self.code_rows} rows, {len(self.bad_code)} unreadable or not hashing to their "
               f"address; {self.unreadable_sets} outcomes name a code set that cannot be read whole"]
        out += [f"  bad {sha[:12]}: {why}" for sha, why in list(self.bad.items())[:20]]
        out += [f"  orphan {name}" for name in self.orphans[:20]]
        out += [f"  bad code_deps {sha[:12]}" for sha in self.bad_code[:20]]
        if self.repaired:
            out.append("repaired: " + ", ".join(f"{v} {k}" for k, v in self.repaired.items()))
        return out


def _dead_staging(name: str, path: os.PathLike[str], now: float) -> bool:
    parts = os.path.basename(name).split(".")
    try:
        pid = int(parts[1])
        os.kill(pid, 0)
        alive = True
    except (IndexError, ValueError):
        alive = False
    except ProcessLookupError:
        alive = False
    except PermissionError:
        alive = True
    try:
        old = now - os.stat(path).st_mtime > STALE_STAGING_S
    except FileNotFoundError:
        return False
    return not alive or old


def _scan(session: Session, key: Any, *cols: Any, chunk: int) -> Iterator[Any]:
    """Every row of ``key``'s table (``key`` and ``cols``), in chunks of ``chunk`` rows by key,
    so a large store is never read whole."""
    last = ""
    while True:
        rows = session.execute(select(key, *cols).where(key > last).order_by(key).limit(chunk)).all()
        if not rows:
            return
        yield from rows
        last = rows[-1][0]
        session.expunge_all()


def _code_deps(session: Session, chunk: int) -> tuple[int, list[str], int]:
    """(rows, bad addresses, outcome rows whose set cannot be read whole) of ``code_deps``."""
    good: set[str] = set()
    bad: list[str] = []
    parts_of: dict[str, list[str]] = {}  # a set's parts (sets are the rows with a "parts" list)
    n = 0
    for sha, body in _scan(session, CodeDepsRow.sha256, CodeDepsRow.body, chunk=chunk):
        n += 1
        obj = codedeps.decode(sha, body)
        if obj is None:
            bad.append(sha)
            continue
        good.add(sha)
        if isinstance(obj, dict) and isinstance(obj.get("parts"), list):
            parts_of[sha] = obj["parts"]
    whole = {s for s, ps in parts_of.items() if all(p in good for p in ps)}
    named = session.execute(select(StoredOutcomeRow.deps_sha, func.count()).where(StoredOutcomeRow.deps_sha.is_not(None))
                            .group_by(StoredOutcomeRow.deps_sha)).tuples().all()
    return n, bad, sum(k for sha, k in named if sha not in whole)


def check(session: Session, repair: bool = False, chunk: int = 200) -> CheckReport:
    """Verify the store behind ``session``; with ``repair``, fix what can be fixed (caller commits)."""
    bd = artifacts.blob_dir()
    files = bd.names() if bd else {}  # listed before the rows: a blob published meanwhile has its row
    bad: dict[str, str] = {}
    damaged: set[str] = set()
    shas: set[str] = set()
    for sha, packed, mark in _scan(session, ArtifactRow.sha256, ArtifactRow.data, ArtifactRow.damaged, chunk=chunk):
        shas.add(sha)
        if mark is not None:
            damaged.add(sha)
            continue
        if packed is None:
            packed = bd.get(sha) if bd else None
        data = artifacts.unpack(packed)
        if packed is None:
            bad[sha] = "no stored bytes"
        elif data is None:
            bad[sha] = "cannot decompress"
        elif artifacts.digest(data) != sha:
            bad[sha] = f"bytes hash to {artifacts.digest(data)[:12]}"
    refs = dict(session.execute(select(ResultRow.artifact_sha, func.count()).where(ResultRow.artifact_sha.is_not(None))
                                .group_by(ResultRow.artifact_sha)).tuples().all())
    dangling = tuple(sorted(s for s in refs if s not in shas))
    broken = sum(n for s, n in refs.items() if s in bad or s in damaged or s not in shas)
    now = time.time()
    orphans = tuple(sorted(name for name, path in files.items()
                           if (_dead_staging(name, path, now) if name.endswith(".tmp")
                               else os.path.basename(name) not in shas)))
    code_rows, bad_code, unreadable = _code_deps(session, chunk)
    report = CheckReport(artifacts=len(shas), blob_files=sum(not n.endswith(".tmp") for n in files),
                         references=sum(refs.values()), bad=bad, damaged=len(damaged), broken_references=broken,
                         dangling=dangling, orphans=orphans, code_rows=code_rows, bad_code=tuple(bad_code),
                         unreadable_sets=unreadable)
    if not repair or report.ok:
        return report
    for i in range(0, len(bad_code), 200):
        session.execute(delete(CodeDepsRow).where(CodeDepsRow.sha256.in_(bad_code[i:i + 200])))
    for name in orphans:
        files[name].unlink(missing_ok=True)
    for sha, why in bad.items():
        session.get(ArtifactRow, sha).damaged = why[:200]
    stages = dict(session.execute(select(ResultRow.artifact_sha, ResultRow.stage)
                                  .where(ResultRow.artifact_sha.in_(dangling))).tuples().all()) if dangling else {}
    for sha in dangling:  # a reference the database let through (no foreign keys): keep it, marked
        session.add(ArtifactRow(sha256=sha, kind=_KIND_OF_STAGE.get(stages.get(sha, ""), "module"), size=0,
                                jax_version="", meta={}, data=None, damaged="no row: referenced but never stored"))
    return CheckReport(artifacts=report.artifacts, blob_files=report.blob_files, references=report.references,
                       damaged=len(damaged) + len(bad) + len(dangling), broken_references=broken,
                       code_rows=code_rows - len(bad_code), unreadable_sets=unreadable,
                       repaired={"orphan files removed": len(orphans), "artifacts marked damaged": len(bad),
                                 "missing rows marked damaged": len(dangling),
                                 "damaged code_deps rows deleted": len(bad_code)})
