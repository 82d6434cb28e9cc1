"""Content-addressed artifacts: verified when written, stored once by sha256, verified
again when read.

Like Git's object store and Bazel's remote cache, the address is checked on the way in:
``put`` hashes the bytes and refuses an address they do not hash to (``ArtifactMismatch``,
nothing written), so a bundle from another host cannot poison an address. Blobs live in
the database (default) or in a directory (``FARM_ARTIFACT_DIR``); a directory blob is
written to a staging file and renamed into place only when the session's transaction
commits (a rolled-back write leaves no file), and a blob file that does not hash to its
name is replaced by the next write of that address, never trusted. Reading a blob whose
bytes no longer hash to its address raises ``ArtifactCorrupt``; ``farm db check`` finds
every such blob, and ``--repair`` marks it ``damaged`` so the next genuine write replaces it.
"""
from __future__ import annotations

import hashlib
import os
import re
import uuid
import zlib
from pathlib import Path

from sqlalchemy import event, select
from sqlalchemy.orm import Session

from farm.errors import ArtifactCorrupt, ArtifactMismatch, ArtifactNotFound, UnknownFormatVersion
from farm.store.inserts import insert_skipping
from farm.store.models import ArtifactRow
from farm.store.models.base import utcnow

FORMAT_VERSION = 1
_SHA = re.compile(r"^[0-9a-f]{64}$")
_PENDING = "farm_staged_blobs"  # session.info key: sha -> (staging file, final path)


def check_sha(sha: str) -> str:
    if not isinstance(sha, str) or not _SHA.match(sha):
        raise ArtifactNotFound(f"not an artifact address: {sha!r} (expected 64 hex digits)")
    return sha


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def unpack(packed: bytes | None) -> bytes | None:
    """The bytes of a stored blob, or None when it cannot be decompressed."""
    if packed is None:
        return None
    try:
        return zlib.decompress(packed)
    except zlib.error:
        return None


class BlobDir:
    """A directory of zlib blobs, fanned out by the first two hex digits."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()

    def path(self, sha: str) -> Path:
        p = (self.root / check_sha(sha)[:2] / sha).resolve()
        if self.root not in p.parents:
            raise ArtifactNotFound(f"artifact path escapes its store: {sha!r}")
        return p

    def stage(self, session: Session, sha: str, packed: bytes) -> None:
        """Write ``packed`` to a staging file that becomes ``path(sha)`` when ``session`` commits."""
        p = self.path(sha)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.parent / f"{sha}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        with open(tmp, "wb") as f:
            f.write(packed)
            f.flush()
            os.fsync(f.fileno())
        pending = _pending(session)
        if sha in pending:
            pending[sha][0].unlink(missing_ok=True)
        pending[sha] = (tmp, p)

    def get(self, sha: str) -> bytes | None:
        p = self.path(sha)
        return p.read_bytes() if p.exists() else None

    def names(self) -> dict[str, Path]:
        """Every file of the fan-out folders (blobs, and staging files a killed writer left) by name."""
        out: dict[str, Path] = {}
        if self.root.is_dir():
            for sub in self.root.iterdir():
                if sub.is_dir() and re.fullmatch(r"[0-9a-f]{2}", sub.name):
                    for f in sub.iterdir():
                        out[f"{sub.name}/{f.name}"] = f
        return out


def _pending(session: Session) -> dict[str, tuple[Path, Path]]:
    """This session's staged blobs; the first call hooks publishing/discarding to its transaction."""
    if _PENDING not in session.info:
        session.info[_PENDING] = {}
        event.listen(session, "after_commit", _publish)
        event.listen(session, "after_transaction_end", _discard)
    return session.info[_PENDING]


def _publish(session: Session) -> None:
    pending = session.info.get(_PENDING) or {}
    for tmp, final in pending.values():
        os.replace(tmp, final)  # replaces a file that did not hash to its name, too
    pending.clear()


def _discard(session: Session, transaction: object) -> None:
    if getattr(transaction, "parent", None) is not None:
        return
    pending = session.info.get(_PENDING) or {}
    for tmp, _ in pending.values():  # the transaction ended without committing
        tmp.unlink(missing_ok=True)
    pending.clear()


def blob_dir() -> BlobDir | None:
    d = os.environ.get("FARM_ARTIFACT_DIR")
    return BlobDir(d) if d else None


def stored_bytes(row: ArtifactRow, bd: BlobDir | None) -> bytes | None:
    """The packed bytes of ``row``: in the row, else in the blob directory (None if neither)."""
    if row.data is not None:
        return row.data
    return bd.get(row.sha256) if bd else None


def intact(row: ArtifactRow, bd: BlobDir | None) -> bool:
    """Whether ``row``'s stored bytes decompress and hash to its address."""
    data = unpack(stored_bytes(row, bd))
    return data is not None and digest(data) == row.sha256


def put(session: Session, sha: str, kind: str, data: bytes, *, jax_version: str, meta: dict | None = None,
        existing: set[str] | None = None) -> None:
    """Store a blob once (idempotent); ``existing`` is a caller's cache of known, intact hashes.
    A writer that has just read (``stored``) which addresses no row holds adds those with
    ``put_new`` instead: one INSERT, no lookup per artifact (a SELECT and an autoflush per
    artifact were a quarter of a big sweep's driver time).

    Raises:
        ArtifactMismatch: ``data`` does not hash to ``sha`` (nothing is written).
    """
    if existing is not None and sha in existing:
        return
    _verify(sha, data)
    bd = blob_dir()
    row = session.get(ArtifactRow, sha)
    if row is None:
        _add(session, [(sha, kind, data, jax_version, meta or {})])
    elif row.damaged is not None or not intact(row, bd):
        # the stored bytes are lost or wrong: these (verified) bytes replace them
        packed = zlib.compress(data, 3)
        if row.data is None and bd is not None:
            bd.stage(session, sha, packed)
        else:
            row.data = packed
        row.size, row.damaged = len(data), None
    if existing is not None:
        existing.add(sha)


def put_new(session: Session, blobs: list[tuple[str, str, bytes, str, dict]]) -> None:
    """Store blobs ``(sha, kind, data, jax_version, meta)`` that no row held when the caller
    looked, in one INSERT that skips an address stored meanwhile: two sweeps on one database
    write the same module between their lookup and their commit (a plain INSERT failed the
    second sweep on the primary key).

    Raises:
        ArtifactMismatch: a blob's bytes do not hash to its address (nothing is written).
    """
    for sha, _, data, _, _ in blobs:
        _verify(sha, data)
    _add(session, blobs)


def _verify(sha: str, data: bytes) -> None:
    actual = digest(data)
    if actual != sha:
        raise ArtifactMismatch(f"artifact bytes hash to {actual[:12]}, not to the address they claim "
                               f"({str(sha)[:12]}): refused, nothing stored")


def _add(session: Session, blobs: list[tuple[str, str, bytes, str, dict]]) -> None:
    """Insert verified blobs, skipping an address another writer stored meanwhile."""
    bd = blob_dir()
    rows = []
    for sha, kind, data, jax_version, meta in dict((b[0], b) for b in blobs).values():
        packed = zlib.compress(data, 3)
        if bd is not None:
            bd.stage(session, sha, packed)
        rows.append({"sha256": sha, "kind": kind, "size": len(data), "format_version": FORMAT_VERSION,
                     "jax_version": jax_version, "meta": meta, "data": None if bd else packed,
                     "created_at": utcnow()})
    if rows:
        session.execute(insert_skipping(session, ArtifactRow, ["sha256"]), rows)


def get(session: Session, sha: str) -> tuple[ArtifactRow, bytes]:
    """The row and its verified bytes."""
    row = session.get(ArtifactRow, check_sha(sha))
    if row is None:
        raise ArtifactNotFound(f"no artifact {sha}")
    if row.damaged is not None:
        raise ArtifactCorrupt(f"artifact {sha[:12]} is damaged ({row.damaged}; found by farm db check): "
                              "its bytes are lost until a run or bundle writes them again")
    if row.format_version != FORMAT_VERSION:
        raise UnknownFormatVersion(f"artifact {sha[:12]} has format version {row.format_version}; "
                                   f"this farm reads {FORMAT_VERSION}")
    packed = stored_bytes(row, blob_dir())
    if packed is None:
        raise ArtifactNotFound(f"artifact {sha[:12]} has no stored bytes")
    try:
        data = zlib.decompress(packed)
    except zlib.error as e:
        raise ArtifactCorrupt(f"artifact {sha[:12]} is corrupt: cannot decompress ({e})") from None
    actual = digest(data)
    if actual != sha:
        raise ArtifactCorrupt(f"artifact {sha[:12]} is corrupt: content hashes to {actual[:12]}")
    return row, data


def stored(session: Session, shas: list[str]) -> dict[str, bool]:
    """The addresses among ``shas`` that have a row, each with whether it is not marked damaged
    (True: writes of it can be skipped; False: the next write replaces its bytes)."""
    out: dict[str, bool] = {}
    for i in range(0, len(shas), 500):
        out.update(session.execute(select(ArtifactRow.sha256, ArtifactRow.damaged.is_(None))
                                   .where(ArtifactRow.sha256.in_(shas[i:i + 500]))).tuples().all())
    return out
