"""The lowered-on × run-on view of a device host's run (pure, over result rows).

A device-host run (imported from a standalone worker's bundle) holds, per harness, the
native records of the device (``compare``/``execute`` on ``cuda``) and, where the jobs
carried the CPU host's artifacts, one ``xhost`` record whose facts say how the CPU
host's artifact, run on the device, compared with (a) the reference, (b) the CPU host's
outputs, (c) the device host's own lowering. This module turns those rows into the
tables people read: status counts, the cross-host matrix, where they disagree, and the
slowest harnesses.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from farm.analysis.rows import number

Row = Mapping[str, Any]

#: Cross-host comparisons, in the order the table shows them.
AGAINST = ("reference", "cpu_host", "native", "invariant")


def status_counts(rows: Iterable[Row]) -> dict[str, dict[str, int]]:
    """{"stage/platform": {status: n}} over every record."""
    out: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        out[f"{r['stage']}/{r['platform']}"][r["status"]] += 1
    return {k: dict(v) for k, v in sorted(out.items())}


def harness_worst(rows: Iterable[Row]) -> dict[str, int]:
    """Harnesses by their worst status (what a person counts first)."""
    from farm.results import worst_status

    by: dict[str, list[str]] = {}
    for r in rows:
        by.setdefault(r["harness"], []).append(r["status"])
    return dict(Counter(worst_status(s) for s in by.values()))


def matrix(rows: Iterable[Row]) -> dict[str, Any]:
    """The lowered-on × run-on table.

    Rows: "device-host lowering" (the native compare against the reference) and
    "CPU-host artifact" (xhost facts). Columns: what it was compared with. Cells: status
    counts. Also the agreement by dtype for the CPU-host artifact against the CPU host's
    own outputs (where device numerics show)."""
    native_vs_ref: Counter = Counter()
    native_vs_cpu: Counter = Counter()
    art: dict[str, Counter] = {a: Counter() for a in AGAINST}
    by_dtype: dict[str, Counter] = defaultdict(Counter)
    disagreements: list[dict[str, Any]] = []
    for r in rows:
        if r["stage"] == "compare" and r["platform"] != "cpu":
            native_vs_ref[r["status"]] += 1
        if r["stage"] != "xhost":
            continue
        facts = r.get("facts") or {}
        if r["status"] in ("error", "not_runnable_here"):
            art["cpu_host"][r["status"]] += 1
            if r["status"] == "error":
                disagreements.append(_finding(r, "error"))
            continue
        if "native_vs_cpu_host" in facts:
            native_vs_cpu[facts["native_vs_cpu_host"]] += 1
        for a in AGAINST:
            st = facts.get(f"vs_{a}")
            if st is not None:
                art[a][st] += 1
        by_dtype[r["dtype"]][facts.get("vs_cpu_host", "skipped")] += 1
        bad = [a for a in AGAINST if facts.get(f"vs_{a}") == "fail"]
        if facts.get("vs_invariant") == "ok":  # non-unique results: raw differences are expected
            bad = []
        if bad:
            disagreements.append(_finding(r, ",".join(bad)))
    return {"device_lowering": {"reference": dict(native_vs_ref), "cpu_host": dict(native_vs_cpu)},
            "cpu_host_artifact": {a: dict(c) for a, c in art.items() if c},
            "cpu_host_artifact_vs_cpu_host_by_dtype": {d: dict(c) for d, c in sorted(by_dtype.items())},
            "disagreements": sorted(disagreements, key=lambda f: (f["against"], f["harness"]))}


def _finding(r: Row, against: str) -> dict[str, Any]:
    m = r.get("metrics") or {}
    return {"harness": r["harness"], "primitive": r["primitive"], "dtype": r["dtype"], "against": against,
            "error": r.get("error"),
            "max_rel_err_vs_cpu_host": number(m.get("cpu_host_max_rel_err")),
            "max_ulp_err_vs_cpu_host": number(m.get("cpu_host_max_ulp_err"))}


def slowest(rows: Iterable[Row], platform: str, n: int = 15) -> list[dict[str, Any]]:
    """Harnesses by (compile + execute) time on ``platform``, slowest first."""
    t: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r["platform"] != platform or r["stage"] not in ("compile", "execute"):
            continue
        d = t.setdefault(r["harness"], {"harness": r["harness"], "compile_s": 0.0, "execute_s": 0.0,
                                         "device_peak_bytes": None})
        m = r.get("metrics") or {}
        if r["stage"] == "compile":
            d["compile_s"] = number(m.get("compile_s")) or 0.0
        else:
            d["execute_s"] = number(m.get("execute_s")) or 0.0
            d["device_peak_bytes"] = number(m.get("device_peak_bytes_in_use"))
    return sorted(t.values(), key=lambda d: -(d["compile_s"] + d["execute_s"]))[:n]


def render_text(summary: Mapping[str, Any]) -> str:
    lines = [f"harnesses by worst status: {summary['worst']}", "", "lowered-on × run-on (status counts):"]
    m = summary["matrix"]
    for a, c in m["device_lowering"].items():
        lines.append(f"  device-host lowering   vs {a.replace('_', ' ')}: {c}")
    for a, c in m["cpu_host_artifact"].items():
        lines.append(f"  CPU-host artifact      vs {a.replace('_', ' ')}: {c}")
    lines.append("  CPU-host artifact vs CPU-host outputs, by dtype:")
    for d, c in m["cpu_host_artifact_vs_cpu_host_by_dtype"].items():
        lines.append(f"    {d:<10} {c}")
    if m["disagreements"]:
        lines.append(f"disagreements ({len(m['disagreements'])}, first 30):")
        for f in m["disagreements"][:30]:
            lines.append(f"  {f['against']:<18} {f['harness'][:70]:<70} {(f['error'] or '')[:90]}")
    lines.append("slowest on the device (compile + execute):")
    for d in summary["slowest"]:
        peak = d["device_peak_bytes"]
        lines.append(f"  {d['compile_s'] * 1e3:8.1f} ms compile {d['execute_s'] * 1e3:8.3f} ms execute  "
                     f"{'' if peak is None else f'{peak / 2**20:7.1f} MiB peak  '}{d['harness'][:80]}")
    return "\n".join(lines)


def summarize(rows: list[Row], platform: str = "cuda") -> dict[str, Any]:
    return {"worst": harness_worst(rows), "stages": status_counts(rows), "matrix": matrix(rows),
            "slowest": slowest(rows, platform)}
