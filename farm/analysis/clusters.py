"""Failure clusters: the failing records of one or more runs grouped by signature.

56 artifacts failing for one cause are 56 red cells but one problem. A cluster is every
failing record with one ``Signature`` (``farm.analysis.signatures``), across harnesses,
platforms, runs, configurations and jax versions: how many records and harnesses, on
which platforms and dtypes, which runs saw it first and last, and whether it is new (no
earlier run had it). An acknowledged cluster (a known failure with a note and a link)
sorts after the others and says what changed since it was acknowledged.

Pure: result rows (``farm.store.queries.failing_rows``: each with ``run_id``) and run
briefs in, frozen clusters out; ``diff`` says which clusters appeared and went between
two runs (``farm compare``, the sweep summary).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from farm.analysis import shapes
from farm.analysis.signatures import Signature, signature
from farm.results import SEVERITY

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Cluster:
    """The failing records of the asked-about runs with one signature.

    ``first_seen`` / ``last_seen``: the earliest and latest run (``{"id", "name"}``) of
    all runs known that have the signature; ``new``: no run before the asked-about ones
    has it; ``example``: one member (harness, platform, stage, dtype, run, the raw error);
    ``acknowledged``: the acknowledgement (note, url, when, what it covered) or None;
    ``since_ack``: what changed since (``new_harnesses``, ``new_platforms``)."""

    signature: Signature
    records: int
    harnesses: tuple[str, ...]
    platforms: tuple[str, ...]
    dtypes: tuple[str, ...]
    runs: tuple[int, ...]
    first_seen: Mapping[str, Any] | None
    last_seen: Mapping[str, Any] | None
    new: bool
    example: Mapping[str, Any]
    acknowledged: Mapping[str, Any] | None = None
    since_ack: Mapping[str, Any] = field(default_factory=dict)
    fingerprints: Mapping[str, str] = field(default_factory=dict)  # harness name -> fingerprint

    @property
    def key(self) -> str:
        return self.signature.key

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "signature": self.signature.to_dict(), "summary": self.signature.describe(),
                "records": self.records, "harnesses": list(self.harnesses), "platforms": list(self.platforms),
                "dtypes": list(self.dtypes), "runs": list(self.runs), "first_seen": self.first_seen,
                "last_seen": self.last_seen, "new": self.new, "example": dict(self.example),
                "acknowledged": dict(self.acknowledged) if self.acknowledged else None,
                "since_ack": dict(self.since_ack), "fingerprints": dict(self.fingerprints)}


def signed(rows: Iterable[Row], expected: bool = False) -> list[tuple[Signature, Row]]:
    """Each failing row with its signature (rows with nothing wrong are dropped; expected
    failures too, unless ``expected``). A symbolic failure's signature carries its scope
    (``farm.analysis.shapes.scopes``: symbolic-only, or on one platform), read from the
    harness's other rows in the same run, so ``rows`` must hold every failing row of a run."""
    rows = list(rows)
    found = shapes.scopes(rows, expected)
    out = []
    for r in rows:
        s = signature(r, expected=expected, scope=shapes.scope_of(r, found))
        if s is not None:
            out.append((s, r))
    return out


def clusters(rows: Iterable[Row], runs: Mapping[int, Mapping[str, Any]], focus: Collection[int], *,
             acks: Mapping[str, Mapping[str, Any]] | None = None, expected: bool = False) -> list[Cluster]:
    """The clusters of the runs in ``focus``, worst first.

    Args:
      rows: failing result rows of every run known (each with ``run_id``), or at least of
        ``focus`` and the runs before it: they say first/last seen and what is new.
      runs: run id -> brief (``id``, ``name``) of every run the rows name.
      focus: the run ids asked about.
      acks: cluster key -> acknowledgement (``note``, ``url``, ``harnesses``, ``platforms``...).
      expected: cluster the expected failures (``Limitation`` data) too.
    """
    focus = set(focus)
    acks = acks or {}
    start = min(focus) if focus else 0
    seen: dict[str, set[int]] = defaultdict(set)
    members: dict[str, list[Row]] = defaultdict(list)
    sigs: dict[str, Signature] = {}
    for s, r in signed(rows, expected):
        k = s.key
        seen[k].add(r["run_id"])
        if r["run_id"] in focus:
            members[k].append(r)
            sigs[k] = s
    out = [_cluster(sigs[k], rs, seen[k], runs, focus, start, acks.get(k)) for k, rs in members.items()]
    return sorted(out, key=rank)


def rank(c: Cluster) -> tuple:
    """Worst first: unacknowledged before acknowledged, then the worst status, the most
    harnesses, the most records; the key breaks ties (a stable order)."""
    return (c.acknowledged is not None, -SEVERITY[c.signature.status], -len(c.harnesses), -c.records, c.key)


def _cluster(sig: Signature, rows: Sequence[Row], seen: set[int], runs: Mapping[int, Mapping[str, Any]],
             focus: set[int], start: int, ack: Mapping[str, Any] | None) -> Cluster:
    harnesses = tuple(sorted({r["harness"] for r in rows}))
    platforms = tuple(sorted({r["platform"] for r in rows}))
    first, last = min(seen), max(seen)
    ex = min(rows, key=lambda r: (r["run_id"], r["harness"], r["platform"]))
    example = {"harness": ex["harness"], "fingerprint": ex.get("fingerprint"), "platform": ex["platform"], "stage": ex["stage"], "dtype": ex.get("dtype"),
               "run": _brief(runs, ex["run_id"]), "error_type": ex.get("error_type"), "error": ex.get("error")}
    since: dict[str, Any] = {}
    if ack is not None:
        since = {"new_harnesses": sorted(set(harnesses) - set(ack.get("harnesses") or ())),
                 "new_platforms": sorted(set(platforms) - set(ack.get("platforms") or ()))}
    return Cluster(sig, len(rows), harnesses, platforms, tuple(sorted({str(r.get("dtype")) for r in rows})),
                   tuple(sorted({r["run_id"] for r in rows})), _brief(runs, first), _brief(runs, last),
                   not any(i < start and i not in focus for i in seen), example, ack, since,
                   {r["harness"]: r["fingerprint"] for r in rows if r.get("fingerprint")})


def _brief(runs: Mapping[int, Mapping[str, Any]], rid: int) -> dict[str, Any]:
    r = runs.get(rid) or {}
    return {"id": rid, "name": r.get("name")}


def diff(base_rows: Iterable[Row], cand_rows: Iterable[Row], ran: Collection[str] | None = None) -> dict[str, Any]:
    """Which clusters appeared in the candidate and which went (were in the base, and the
    candidate ran at least one of their harnesses without that failure: probably fixed),
    and, of those in both, the ones that spread to more harnesses or platforms. Each entry:
    key, summary, status, records, harnesses (a count), platforms.

    ``ran``: the fingerprints the candidate ran (default: those of ``cand_rows``, which must
    then be all its rows, not only the failing ones): a cluster whose harnesses the
    candidate did not run is not gone. Acknowledgements are not read here (a stored report
    must not depend on them): ``acknowledged_changes`` picks theirs out."""
    cand_rows = list(cand_rows)
    ran = set(ran) if ran is not None else {r["fingerprint"] for r in cand_rows}
    b, c = _groups(base_rows), _groups(cand_rows)
    appeared = [_entry(k, c[k]) for k in c if k not in b]
    gone = [_entry(k, b[k]) for k in b if k not in c and any(r["fingerprint"] in ran for r in b[k][1])]
    spread = []
    for k in sorted(set(b) & set(c)):
        more_h = sorted({r["harness"] for r in c[k][1]} - {r["harness"] for r in b[k][1]})
        more_p = sorted({r["platform"] for r in c[k][1]} - {r["platform"] for r in b[k][1]})
        if more_h or more_p:
            spread.append({**_entry(k, c[k]), "new_harnesses": more_h, "new_platforms": more_p})
    order = lambda e: (-SEVERITY[e["status"]], -e["harnesses"], e["key"])  # noqa: E731
    return {"appeared": sorted(appeared, key=order), "gone": sorted(gone, key=order),
            "spread": sorted(spread, key=order), "base": len(b), "candidate": len(c)}


def acknowledged_changes(d: Mapping[str, Any], acks: Collection[str]) -> list[dict[str, Any]]:
    """The entries of ``diff`` about acknowledged clusters, each with its ``change``
    (appeared, gone: probably fixed, spread): what an acknowledgement does not silence."""
    return [dict(e, change=kind) for kind in ("appeared", "gone", "spread") for e in d.get(kind, ())
            if e["key"] in acks]


def _groups(rows: Iterable[Row]) -> dict[str, tuple[Signature, list[Row]]]:
    out: dict[str, tuple[Signature, list[Row]]] = {}
    for s, r in signed(rows):
        out.setdefault(s.key, (s, []))[1].append(r)
    return out


def _entry(key: str, group: tuple[Signature, list[Row]]) -> dict[str, Any]:
    sig, rows = group
    return {"key": key, "summary": sig.describe(), "status": sig.status, "records": len(rows),
            "harnesses": len({r["harness"] for r in rows}), "platforms": sorted({r["platform"] for r in rows})}


def keys_of(rows: Iterable[Row]) -> dict[tuple[str, str, str], str]:
    """(fingerprint, platform, stage) -> signature key of each failing row, and
    (fingerprint, platform, "*") -> the key of its worst one, (fingerprint, "*", "*") of the
    harness's worst one: which cluster a finding of ``farm compare`` (stage by stage, or the
    gate's stage "*") belongs to."""
    out: dict[tuple[str, str, str], str] = {}
    worst: dict[tuple[str, str], tuple[int, str]] = {}
    for s, r in signed(rows):
        out[(r["fingerprint"], r["platform"], r["stage"])] = s.key
        for w in ((r["fingerprint"], r["platform"]), (r["fingerprint"], "*")):
            if w not in worst or SEVERITY[s.status] > worst[w][0]:
                worst[w] = (SEVERITY[s.status], s.key)
    out.update({(fp, p, "*"): k for (fp, p), (_, k) in worst.items()})
    return out


def causes(found: Sequence[Cluster]) -> list[dict[str, Any]]:
    """Clusters that differ only in their primitives, rolled up (``Signature.cause_key``):
    one error across many primitives (the 0.10.2 → 0.8.3 deserialization break) is one
    line to read. Only causes of two or more clusters; the most harnesses first."""
    groups: dict[str, list[Cluster]] = defaultdict(list)
    for c in found:
        groups[c.signature.cause_key].append(c)
    out = [{"cause": k, "clusters": [c.key for c in cs],
            "primitives": sorted({p for c in cs for p in c.signature.primitives}),
            "harnesses": len({h for c in cs for h in c.harnesses}), "records": sum(c.records for c in cs),
            "platforms": sorted({p for c in cs for p in c.platforms}),
            "summary": Signature(cs[0].signature.stage, cs[0].signature.status, ("…",), cs[0].signature.error_type,
                                 cs[0].signature.message, cs[0].signature.numeric, cs[0].signature.scope).describe()}
           for k, cs in groups.items() if len(cs) > 1]
    return sorted(out, key=lambda d: (-d["harnesses"], d["cause"]))
