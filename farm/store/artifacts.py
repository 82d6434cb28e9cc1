"""Content-addressed artifacts: stored once by sha256, read back with a hash check.

Blobs live in the database (default) or in a directory (``FARM_ARTIFACT_DIR``) behind
the same small interface. Reading a blob whose bytes no longer hash to its address
raises ``ArtifactCorrupt``: a corrupt artifact is never silently used.
"""
from __future__ import annotations

import hashlib
import os
import re
import zlib
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from farm.errors import ArtifactCorrupt, ArtifactNotFound, UnknownFormatVersion
from farm.store.models import ArtifactRow

FORMAT_VERSION = 1
_SHA = re.compile(r"^[0-9a-f]{64}$")


def check_sha(sha: str) -> str:
    if not _SHA.match(sha or ""):
        raise ArtifactNotFound(f"not an artifact address: {sha!r} (expected 64 hex digits)")
    return sha


class BlobDir:
    """A directory of zlib blobs, fanned out by the first two hex digits."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()

    def path(self, sha: str) -> Path:
        p = (self.root / check_sha(sha)[:2] / sha).resolve()
        if self.root not in p.parents:
            raise ArtifactNotFound(f"artifact path escapes its store: {sha!r}")
        return p

    def put(self, sha: str, packed: bytes) -> None:
        p = self.path(sha)
        if p.exists():
            return
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(".tmp")
        tmp.write_bytes(packed)
        os.replace(tmp, p)

    def get(self, sha: str) -> bytes | None:
        p = self.path(sha)
        return p.read_bytes() if p.exists() else None


def blob_dir() -> BlobDir | None:
    d = os.environ.get("FARM_ARTIFACT_DIR")
    return BlobDir(d) if d else None


def put(session: Session, sha: str, kind: str, data: bytes, *, jax_version: str, meta: dict | None = None,
        existing: set[str] | None = None) -> None:
    """Store a blob once (idempotent); ``existing`` is a caller's cache of known hashes."""
    if existing is not None and sha in existing:
        return
    if session.get(ArtifactRow, sha) is None:
        packed = zlib.compress(data, 3)
        bd = blob_dir()
        if bd is not None:
            bd.put(sha, packed)
        session.add(ArtifactRow(sha256=sha, kind=kind, size=len(data), format_version=FORMAT_VERSION,
                                jax_version=jax_version, meta=meta or {}, data=None if bd else packed))
    if existing is not None:
        existing.add(sha)


def get(session: Session, sha: str) -> tuple[ArtifactRow, bytes]:
    """The row and its verified bytes."""
    row = session.get(ArtifactRow, check_sha(sha))
    if row is None:
        raise ArtifactNotFound(f"no artifact {sha}")
    if row.format_version != FORMAT_VERSION:
        raise UnknownFormatVersion(f"artifact {sha[:12]} has format version {row.format_version}; "
                                   f"this farm reads {FORMAT_VERSION}")
    packed = row.data
    if packed is None:
        bd = blob_dir()
        packed = bd.get(sha) if bd else None
        if packed is None:
            raise ArtifactNotFound(f"artifact {sha[:12]} has no stored bytes")
    try:
        data = zlib.decompress(packed)
    except zlib.error as e:
        raise ArtifactCorrupt(f"artifact {sha[:12]} is corrupt: cannot decompress ({e})") from None
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha:
        raise ArtifactCorrupt(f"artifact {sha[:12]} is corrupt: content hashes to {actual[:12]}")
    return row, data


def known(session: Session, shas: list[str]) -> set[str]:
    out: set[str] = set()
    for i in range(0, len(shas), 500):
        out |= set(session.scalars(select(ArtifactRow.sha256).where(ArtifactRow.sha256.in_(shas[i:i + 500]))))
    return out
