"""The exported-on × run-on table of a version sweep (pure, over result rows).

Native runs (one per jax version, its own catalog) give the diagonal: how each version
does against the reference. Cross runs give the rest: an artifact exported by version A,
deserialized and run by version B (``xhost`` records), compared with the reference, with
A's outputs and with B's own lowering. Below the diagonal (A older than B) is JAX's
backward-compatibility promise; above it, forward compatibility.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

Row = Mapping[str, Any]
#: The xhost comparisons, in the order the table shows them.
AGAINST = ("vs_reference", "vs_cpu_host", "vs_native")


def vkey(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split(".") if x.isdigit())


def native_summary(rows: Iterable[Row]) -> dict[str, Any]:
    """One version's own run: harnesses, compare statuses, calling-convention versions and
    custom-call targets of its exports."""
    harnesses: set[str] = set()
    compare: Counter = Counter()
    cc: Counter = Counter()
    targets: Counter = Counter()
    for r in rows:
        harnesses.add(r["harness"])
        if r["stage"] == "compare" and r["platform"] == "cpu":
            compare[r["status"]] += 1
        facts = r.get("facts") or {}
        if r["stage"] == "export" and r["status"] == "ok" and facts.get("calling_convention_version") is not None:
            cc[str(facts["calling_convention_version"])] += 1
        if r["stage"] == "census" and r["platform"] == "export":  # what the artifact carries
            for t in facts.get("custom_calls") or []:
                targets[t] += 1
    return {"harnesses": len(harnesses), "compare": dict(compare), "calling_convention": dict(cc),
            "custom_call_targets": sorted(targets)}


def cross_summary(rows: Iterable[Row], stats: Mapping[str, Any] | None = None, examples: int = 5) -> dict[str, Any]:
    """One (exported on, run on) pair: xhost statuses, each comparison's statuses, the
    artifacts the run-on version's catalog had no harness for, and the first failures."""
    status: Counter = Counter()
    against: dict[str, Counter] = {a: Counter() for a in AGAINST}
    errors: Counter = Counter()
    first: list[dict[str, Any]] = []
    for r in rows:
        if r["stage"] != "xhost":
            continue
        status[r["status"]] += 1
        facts = r.get("facts") or {}
        for a in AGAINST:
            if facts.get(a) is not None:
                against[a][facts[a]] += 1
        if r["status"] not in ("ok", "expected_fail", "skipped"):
            errors[_kind(r.get("error") or "")] += 1
            if len(first) < examples:
                first.append({"harness": r["harness"], "status": r["status"], "error": (r.get("error") or "")[:300]})
    stats = stats or {}
    return {"xhost": dict(status), **{a: dict(c) for a, c in against.items()},
            "artifacts": int(stats.get("jobs") or 0), "no_harness_here": int(stats.get("missing") or 0),
            "error_kinds": dict(errors.most_common()), "examples": first, "pallas": pallas_summary(rows, examples)}


def pallas_summary(rows: Iterable[Row], examples: int = 5) -> dict[str, Any]:
    """A pair's ``pallas_xver`` records (kernel artifacts deserialized only): statuses, and by
    target kind (``tpu``, ``cuda:triton``...) how many deserialized and how many read back the
    same in every respect; what differed, counted; the first failures."""
    status: Counter = Counter()
    by_target: dict[str, Counter] = {}
    differs: Counter = Counter()
    first: list[dict[str, Any]] = []
    for r in rows:
        if r["stage"] != "pallas_xver":
            continue
        status[r["status"]] += 1
        facts = r.get("facts") or {}
        kind = "tpu" if r["platform"].startswith("tpu:") else r["platform"]
        c = by_target.setdefault(kind, Counter())
        c["artifacts"] += 1
        c["deserialized"] += bool(facts.get("deserialized"))
        c["same"] += bool(facts.get("deserialized")) and all((facts.get("same") or {}).values())
        for k in facts.get("differs") or {}:
            differs[k] += 1
        if r["status"] not in ("ok", "expected_fail", "skipped") and len(first) < examples:
            first.append({"harness": r["harness"], "target": r["platform"], "status": r["status"],
                          "error": (r.get("error") or "")[:300]})
    return {"status": dict(status), "by_target": {k: dict(v) for k, v in sorted(by_target.items())},
            "differs": dict(differs), "examples": first}


def _kind(error: str) -> str:
    """A failure's kind, for counting: its first clause, each number written N."""
    head = error.split(":", 1)[0].strip() or "(no message)"
    return re.sub(r"\d+", "N", head)[:100]


def matrix(native: Mapping[str, list[Row]], cross: Mapping[tuple[str, str], list[Row]],
           stats: Mapping[tuple[str, str], Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The whole table: versions in order, the diagonal, and every pair."""
    stats = stats or {}
    versions = sorted(set(native) | {v for pair in cross for v in pair}, key=vkey)
    pairs = {f"{a}>{b}": {"exported_on": a, "run_on": b,
                           "direction": "backward" if vkey(a) < vkey(b) else "forward",
                           **cross_summary(rows, stats.get((a, b)))}
             for (a, b), rows in sorted(cross.items(), key=lambda kv: (vkey(kv[0][0]), vkey(kv[0][1])))}
    return {"versions": versions, "native": {v: native_summary(native[v]) for v in versions if v in native},
            "pairs": pairs}


def _cell(counts: Mapping[str, int]) -> str:
    return " ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])) or "-"


def render_text(m: Mapping[str, Any]) -> str:
    """The table as text: rows exported on, columns run on; then each pair's failures."""
    vs = m["versions"]
    lines = ["exported on (rows) x run on (columns): the diagonal is each version's own compare against the "
             "reference; other cells the xhost verdicts of the row's artifacts run by the column's jax", ""]
    head = ["exported on"] + vs
    table = [head]
    for a in vs:
        row = [a]
        for b in vs:
            if a == b:
                row.append("own: " + _cell((m["native"].get(a) or {}).get("compare", {})))
            else:
                p = m["pairs"].get(f"{a}>{b}")
                row.append(_cell(p["xhost"]) if p else "(not run)")
        table.append(row)
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in table]
    lines.append("")
    for v in vs:
        n = m["native"].get(v)
        if n:
            lines.append(f"jax {v}: {n['harnesses']} harnesses; export calling convention "
                         f"{_cell(n['calling_convention'])}; {len(n['custom_call_targets'])} custom-call targets in its artifacts")
    for key, p in m["pairs"].items():
        lines.append(f"\n{key} ({p['direction']}): {p['artifacts']} artifacts, {p['no_harness_here']} without a "
                     f"harness in {p['run_on']}'s catalog; xhost {_cell(p['xhost'])}; "
                     + "; ".join(f"{a.replace('_', ' ')} {_cell(p[a])}" for a in AGAINST))
        for kind, n in p["error_kinds"].items():
            lines.append(f"  {n} x {kind}")
        for e in p["examples"]:
            lines.append(f"  e.g. {e['harness']}: {e['status']}: {e['error']}")
        px = p.get("pallas") or {}
        if px.get("status"):
            per = ", ".join(f"{t} {c.get('deserialized', 0)}/{c.get('artifacts', 0)} deserialized, {c.get('same', 0)} same"
                            for t, c in px["by_target"].items())
            lines.append(f"  pallas kernel artifacts (deserialize only, not run: no TPU/GPU): {_cell(px['status'])}; "
                         f"{per}" + (f"; differs: {_cell(px['differs'])}" if px["differs"] else ""))
            for e in px["examples"]:
                lines.append(f"  e.g. {e['harness']} {e['target']}: {e['status']}: {e['error']}")
    return "\n".join(lines)
