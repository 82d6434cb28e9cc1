"""Results bundles, the file format: what a standalone worker writes and ``farm import`` loads
(``farm.run.bundles`` puts them into the store).

A gzip'd JSON document with a format name and version; bytes are base64. A bundle of
an unknown version is refused with a clear error.
"""
from __future__ import annotations

import base64
import gzip
import json
from typing import Any

from farm.errors import FarmError, UnknownFormatVersion
from farm.results import Outcome

FORMAT = "lowering-farm-bundle"
VERSION = 1


def write(path: str, *, environment: dict[str, Any], run: dict[str, Any], harnesses: list[dict[str, Any]],
          outcomes: list[Outcome]) -> None:
    def enc(o: Outcome) -> dict[str, Any]:
        d = o.to_dict()
        for a in d["artifacts"]:
            a["data"] = base64.b64encode(a["data"]).decode()
        return d

    doc = {"format": FORMAT, "version": VERSION, "environment": environment, "run": run,
           "harnesses": harnesses, "outcomes": [enc(o) for o in outcomes]}
    with gzip.open(path, "wt") as f:
        json.dump(doc, f, default=str)


def read(path: str) -> dict[str, Any]:
    try:
        with gzip.open(path, "rt") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise FarmError(f"cannot read bundle {path!r}: {e}") from None
    if doc.get("format") != FORMAT:
        raise FarmError(f"{path!r} is not a Lowering Farm results bundle")
    if doc.get("version") != VERSION:
        raise UnknownFormatVersion(f"bundle {path!r} has version {doc.get('version')}; this farm reads {VERSION}")
    for o in doc["outcomes"]:
        for a in o["artifacts"]:
            a["data"] = base64.b64decode(a["data"])
    return doc


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
