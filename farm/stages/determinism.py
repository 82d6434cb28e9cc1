"""The ``determinism`` stage: a harness's lowered modules and its four-platform export made
again, in this process (after everything else the worker ran: a second export in one process)
and, where asked, in a fresh child process, set beside the ones the sweep kept.

What ran and what it made, never a verdict (``farm.judge.determinism`` gives that). A module
is compared by the digest of its text without debug information (the lowering stage's
``module_sha256``); the export by its module text without source locations and every other
field of ``jax.export.Exported`` (``identity``). Its serialized bytes are not compared: their
source locations are the call stack that exported it, which differs between a sweep's worker
and a fresh process by construction ("/work/farm/stages/export.py":66 called from
``run_harness`` or from the child's loop).
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from farm.results import Record
from farm.stages import export, lower
from farm.stages.parts import LOCATIONS
from farm.stages.record import Timer, failure
from farm.stages.trace import Traced


@dataclass(frozen=True)
class Made:
    """What one process made of a harness: per platform its module's digest (or the error
    that stopped it) and text, and the export's digest (or its error)."""

    modules: dict[str, str] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    export: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"modules": self.modules, "texts": self.texts, "export": self.export}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Made":
        return cls(dict(d["modules"]), dict(d["texts"]), str(d["export"]))


def made(lowered: Mapping[str, lower.Lowered], export_digest: str) -> Made:
    """What these lowerings (per platform) and an export's digest are: each module's digest, or
    the error that stopped it (the same words wherever it was made), and its text."""
    return Made({p: lo.module_sha256 if lo.ok else f"{lo.status}: {lo.error_type}: {lo.error}"
                 for p, lo in lowered.items()},
                {p: lo.handle.text for p, lo in lowered.items() if lo.ok}, export_digest)


def make(tr: Traced, platforms: tuple[str, ...]) -> Made:
    """Lower ``tr`` for each platform and export it for those that lowered, now, in this process."""
    lowered = {p: lower.run(tr, p) for p in platforms}
    return made(lowered, export_digest(tr, tuple(p for p, lo in lowered.items() if lo.ok)))


def export_digest(tr: Traced, platforms: tuple[str, ...]) -> str:
    """The four-platform export's ``identity`` (its error where it fails)."""
    if not platforms:
        return "nothing lowered"
    ex = export.run_all(tr, platforms)[0]
    if not ex.ok or ex.handle is None:
        return f"{ex.status}: {ex.error_type}: {ex.error}"
    return identity(ex.handle.exported)


#: The fields of ``jax.export.Exported`` besides its module, where this jax has them.
_FIELDS = ("fun_name", "in_tree", "in_avals", "out_tree", "out_avals", "in_shardings_hlo", "out_shardings_hlo",
           "nr_devices", "platforms", "ordered_effects", "unordered_effects", "disabled_safety_checks",
           "calling_convention_version", "module_kept_var_idx", "uses_global_constants")


def identity(exported: Any) -> str:
    """The digest of an export without its source locations: the module's text with every
    ``loc(...)`` and ``#loc`` definition removed, and every other field of ``Exported``."""
    text = "\n".join(line.rstrip() for line in LOCATIONS.sub("", exported.mlir_module()).splitlines() if line.strip())
    rest = repr([(f, getattr(exported, f, None)) for f in _FIELDS])
    return hashlib.sha256(f"{text}\n{rest}".encode()).hexdigest()


def run(kept: Made, again: Made, fresh: Made | None, fresh_why: str | None) -> Record:
    """The record: every pair that differs, by where it was made (``again``: in this worker,
    after everything else; ``fresh``: in a fresh child, or why there is none)."""
    differs: dict[str, dict[str, str]] = {}
    for where, other in (("again", again), ("fresh", fresh)):
        if other is None:
            continue
        for p, digest in kept.modules.items():
            if other.modules.get(p) != digest:
                differs.setdefault(where, {})[p] = other.modules.get(p, "not made")
        if other.export != kept.export:
            differs.setdefault(where, {})["export"] = other.export
    facts: dict[str, Any] = {"compared": ["again"] + (["fresh"] if fresh is not None else []),
                             "platforms": sorted(kept.modules), "differs": differs}
    if fresh is None and fresh_why:
        facts["fresh"] = fresh_why
    if differs:  # both texts of every module that differs: what a reader compares
        facts["texts"] = {f"{where}:{p}": {"kept": kept.texts.get(p, ""), where: made.texts.get(p, "")}
                          for where, made in (("again", again), ("fresh", fresh)) if made is not None
                          for p in differs.get(where, {}) if p != "export"}
    return Record("determinism", "any", "ok", facts=facts)


def failed(exc: BaseException, seconds: float) -> Record:
    return failure(Record, "determinism", "any", exc, seconds)


__all__ = ["Made", "Timer", "export_digest", "failed", "identity", "made", "make", "run"]
