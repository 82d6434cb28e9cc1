"""The jax code each harness ran (``code_deps``, see ``farm.cache.units``): written
once per address, read back by set, every body checked against its address."""
from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from farm.cache.units import address, canonical
from farm.store.inserts import bulk_insert_skipping
from farm.store.models import CodeDepsRow


def put(session: Session, rows: Mapping[str, Any]) -> int:
    """Store parts and sets (address -> body) not stored yet; a body that does not hash to
    its address is refused (never stored, so a lookup through it misses). Returns how
    many were offered intact."""
    good = [{"sha256": sha, "body": zlib.compress(canonical(body), 6)}
            for sha, body in rows.items() if address(body) == sha]
    if good:
        session.flush()
        bulk_insert_skipping(session, CodeDepsRow.__table__, good, ["sha256"])
    return len(good)


def decode(sha: str, body: bytes | None) -> Any | None:
    """A stored row's body, or None where it is damaged (unreadable, or not hashing to ``sha``)."""
    try:
        obj = json.loads(zlib.decompress(body))  # type: ignore[arg-type]
    except (zlib.error, ValueError, TypeError):
        return None
    return obj if address(obj) == sha else None


def get(session: Session, shas: Iterable[str]) -> dict[str, Any]:
    """address -> body of the intact rows among ``shas`` (a damaged one is left out)."""
    out: dict[str, Any] = {}
    shas = list(dict.fromkeys(shas))
    for i in range(0, len(shas), 500):
        for sha, body in session.execute(select(CodeDepsRow.sha256, CodeDepsRow.body)
                                         .where(CodeDepsRow.sha256.in_(shas[i:i + 500]))).tuples():
            obj = decode(sha, body)
            if obj is not None:
                out[sha] = obj
    return out


def sets(session: Session, set_shas: Iterable[str]) -> dict[str, dict[str, Any]]:
    """set address -> {part address: part} for every set whose parts are all intact."""
    got = get(session, set_shas)
    wanted = {s: b.get("parts", []) for s, b in got.items() if isinstance(b.get("parts"), list)}
    parts = get(session, {p for ps in wanted.values() for p in ps})
    return {s: {p: parts[p] for p in ps} for s, ps in wanted.items() if all(p in parts for p in ps)}
