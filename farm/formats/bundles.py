"""Results bundles, the file format: what a standalone worker writes and ``farm import`` loads
(``farm.run.bundles`` puts them into the store).

A gzip'd JSON document with a format name and version; bytes are base64. A bundle of
an unknown version is refused with a clear error. A bundle is untrusted input: it is
decompressed as a stream under a limit on its decompressed size (``FARM_BUNDLE_MAX_MB``,
default 512 MiB: a gzip bomb stops there) and checked against ``farm.formats.bundle_schema``
before anything is stored.
"""
from __future__ import annotations

import base64
import gzip
import json
import os
import zlib
from typing import Any

from farm.errors import FarmError, UnknownFormatVersion
from farm.formats.bundle_schema import validate
from farm.formats.outcomes import to_json
from farm.results import Outcome

FORMAT = "lowering-farm-bundle"
VERSION = 1
#: the default limit on a bundle's (or journal's) decompressed size, in MiB
DEFAULT_MAX_MB = 512


def max_bytes() -> int:
    """The limit on a decompressed bundle: ``FARM_BUNDLE_MAX_MB`` MiB (default ``DEFAULT_MAX_MB``)."""
    text = os.environ.get("FARM_BUNDLE_MAX_MB", str(DEFAULT_MAX_MB))
    try:
        mb = float(text)
    except ValueError:
        mb = -1.0
    if not mb > 0:
        raise FarmError(f"FARM_BUNDLE_MAX_MB must be a number of MiB > 0, not {text!r}")
    return int(mb * 2**20)


def inflate(path: str, opener: Any = gzip.open, limit: int | None = None) -> bytes:
    """The file's (decompressed) bytes, read 1 MiB at a time; refused past ``limit``."""
    limit = max_bytes() if limit is None else limit
    parts, n = [], 0
    try:
        with opener(path, "rb") as f:
            while chunk := f.read(1 << 20):
                n += len(chunk)
                if n > limit:
                    raise FarmError(f"{path!r} decompresses to more than {limit / 2**20:.0f} MiB: refused (the "
                                    "limit is FARM_BUNDLE_MAX_MB; split bundles with --per-bundle)")
                parts.append(chunk)
    except (OSError, EOFError, zlib.error, ValueError) as e:  # ValueError: a path with a NUL byte
        raise FarmError(f"cannot read {path!r}: {e}") from None
    return b"".join(parts)


def parse(data: bytes, what: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as e:
        raise FarmError(f"cannot read {what}: not JSON ({str(e)[:120]})") from None


def write(path: str, *, environment: dict[str, Any], run: dict[str, Any], harnesses: list[dict[str, Any]],
          outcomes: list[Outcome]) -> None:
    doc = {"format": FORMAT, "version": VERSION, "environment": environment, "run": run,
           "harnesses": harnesses, "outcomes": [to_json(o) for o in outcomes]}
    with gzip.open(path, "wt") as f:
        json.dump(doc, f, default=str)


def read(path: str) -> dict[str, Any]:
    """A bundle, decompressed under ``max_bytes()``, validated, its artifacts decoded and verified."""
    doc = parse(inflate(path), f"bundle {path!r}")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise FarmError(f"{path!r} is not a Lowering Farm results bundle")
    if doc.get("version") != VERSION:
        raise UnknownFormatVersion(f"bundle {path!r} has version {doc.get('version')!r}; this farm reads {VERSION}")
    return validate(doc, f"bundle {path!r}")


def keep_only(outcomes: list[Outcome], kinds: set[str]) -> list[Outcome]:
    """The outcomes without artifacts of other kinds (and the records' references to
    them), to make a bundle smaller."""
    out = []
    for o in outcomes:
        dropped = {a.sha256 for a in o.artifacts if a.kind not in kinds}
        if dropped:
            o = o.replace(artifacts=[a for a in o.artifacts if a.kind in kinds],
                          records=[r.with_status(r.status, artifact=None) if r.artifact in dropped else r
                                   for r in o.records])
        out.append(o)
    return out


def write_parts(path: str, *, per_part: int, harnesses: list[dict[str, Any]], outcomes: list[Outcome],
                **kw: Any) -> list[str]:
    """``path`` itself, or ``NAME-1.json.gz``, ``NAME-2.json.gz``... of at most ``per_part`` outcomes."""
    if len(outcomes) <= per_part:
        write(path, harnesses=harnesses, outcomes=outcomes, **kw)
        return [path]
    stem = path[:-len(".json.gz")] if path.endswith(".json.gz") else path
    by_fp = {h["fingerprint"]: h for h in harnesses}
    paths = []
    for k, i in enumerate(range(0, len(outcomes), per_part), 1):
        chunk = outcomes[i:i + per_part]
        paths.append(f"{stem}-{k}.json.gz")
        write(paths[-1], harnesses=[by_fp[o.fingerprint] for o in chunk], outcomes=chunk, **kw)
    return paths
