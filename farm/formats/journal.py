"""The standalone worker's journal: results written as they finish, so a device host
killed mid-run keeps everything but the harness in flight.

JSON lines next to the bundle (``OUT.journal.jsonl``), append-only, each line flushed and
fsynced before the next harness starts. The first line is a header (format, version,
the job's identity, the worker's environment); each further line is one harness's
description and outcome (artifact bytes in base64, as in a bundle). A line torn by a kill
is ignored on reading. ``farm import`` reads a journal as a partial bundle, and the
worker rerun with the same ``--jobs``/``--out`` resumes from it.

Needs neither Ray nor SQLAlchemy (a lent device host runs it with jax alone).
"""
from __future__ import annotations

import json
import os
import threading
from typing import Any

from farm.errors import FarmError, UnknownFormatVersion
from farm.formats.outcomes import to_json
from farm.results import Outcome

FORMAT = "lowering-farm-journal"
VERSION = 1


def path_for(out_path: str) -> str:
    """The journal of the bundle ``out_path``."""
    return out_path + ".journal.jsonl"


class Journal:
    """Appends one fsynced line per finished harness; thread-safe (the worker's threads share one)."""

    def __init__(self, path: str, header: dict[str, Any]) -> None:
        self.path = path
        self.header = header
        self.lock = threading.Lock()
        self.f: Any = None

    def _open(self, environment: dict[str, Any]) -> None:
        fresh = not os.path.exists(self.path) or os.path.getsize(self.path) == 0
        self.f = open(self.path, "a", encoding="utf-8")
        if fresh:
            self._line({"format": FORMAT, "version": VERSION, **self.header, "environment": environment})
        elif not _ends_with_newline(self.path):
            self.f.write("\n")  # a torn last line (a kill) stays one bad line, not glued to the next

    def _line(self, doc: dict[str, Any]) -> None:
        self.f.write(json.dumps(doc, default=str, separators=(",", ":")) + "\n")
        self.f.flush()
        os.fsync(self.f.fileno())

    def append(self, harness: dict[str, Any], outcome: Outcome, environment: dict[str, Any]) -> None:
        with self.lock:
            if self.f is None:
                self._open(environment)
            self._line({"harness": harness, "outcome": to_json(outcome)})

    def close(self) -> None:
        with self.lock:
            if self.f is not None:
                self.f.close()
                self.f = None


def _ends_with_newline(path: str) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def read(path: str) -> dict[str, Any]:
    """A journal as a bundle document (``farm.formats.bundles.read``'s shape), the last
    outcome of each harness winning; torn lines are skipped and counted in ``run.stats``."""
    from farm.formats.bundle_schema import validate
    from farm.formats.bundles import inflate

    text = inflate(path, opener=open).decode("utf-8", errors="replace")  # under FARM_BUNDLE_MAX_MB, like a bundle
    docs, torn = [], 0
    for line in text.split("\n"):
        if line.strip():
            try:
                docs.append(json.loads(line))
            except (ValueError, RecursionError):
                torn += 1
    if not docs or not isinstance(docs[0], dict) or docs[0].get("format") != FORMAT:
        raise FarmError(f"{path!r} is not a Lowering Farm worker journal")
    head = docs[0]
    if head.get("version") != VERSION:
        raise UnknownFormatVersion(f"journal {path!r} has version {head.get('version')!r}; this farm reads {VERSION}")
    entries: dict[str, tuple[Any, Any]] = {}
    for d in docs[1:]:
        if not (isinstance(d, dict) and isinstance(d.get("outcome"), dict)
                and isinstance(d["outcome"].get("fingerprint"), str)):
            torn += 1  # validated below as a whole; a line without an outcome is not one
            continue
        entries[d["outcome"]["fingerprint"]] = (d.get("harness"), d["outcome"])
    run = dict(head.get("run") or {}) if isinstance(head.get("run"), dict) else {}
    run["stats"] = {**(run["stats"] if isinstance(run.get("stats"), dict) else {}), "partial": True,
                    "journal_lines_torn": torn}
    doc = {"format": FORMAT, "version": VERSION, "environment": head.get("environment", {}), "run": run,
           "job": head.get("job"), "harnesses": [h for h, _ in entries.values()],
           "outcomes": [o for _, o in entries.values()]}
    return validate(doc, f"journal {path!r}")
