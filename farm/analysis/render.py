"""Text and Markdown renderings of a ``report()`` dict (pure: a string out)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _num(v: Any, unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if unit == "s":
        if abs(v) < 1e-3:
            return f"{v * 1e6:.0f}µs"
        if abs(v) < 1:
            return f"{v * 1e3:.1f}ms"
        return f"{v:.2f}s"
    if unit == "bytes":
        return f"{v:.0f}B"
    return f"{v:.3g}"


def describe(f: Mapping[str, Any]) -> str:
    """One line for a finding."""
    where = f"{f['harness']} {f['platform']}/{f['stage']}"
    if f["kind"] == "status":
        s = f"{f['change']:<16} {where}: {f['base'] or 'absent'} -> {f['candidate'] or 'absent'}"
        if f.get("candidate_at") and f["candidate_at"].split("/")[0] != f["platform"]:
            s += f" (from {f['candidate_at']})"  # a whole-harness record, e.g. any/execute
        elif f.get("platforms"):
            s += f" (platforms {', '.join(f['platforms'])})"
        if f.get("flaky"):
            s += f" (flaky, rate {f['flaky']['rate']:.0%} over {f['flaky']['runs']} runs)"
        if f.get("error"):
            s += f"  [{f['error']}]"
        return s
    if f["kind"] == "numeric":
        parts = [f"{k} {_num(m['base'])} -> {_num(m['candidate'])} (x{_num(m['ratio'])})"
                 for k, m in f["metrics"].items()]
        return f"{f['verdict']:<16} {where}: " + ", ".join(parts)
    if f["kind"] == "perf":
        u = f.get("unit", "")
        s = (f"perf {f['verdict']:<11} {where} {f['metric']}: {_num(f.get('reference'), u)} -> "
             f"{_num(f.get('candidate'), u)}")
        if isinstance(f.get("ratio"), (int, float)):
            s += f" (x{f['ratio']:.2f})"
        s += f" by {f['method']}"
        if "p_value" in f:
            s += f", p={f['p_value']:.3g}"
        if "z" in f:
            s += f", z={f['z']}"
        return s
    return (f"flaky            {where}: usually {f['usual']}, rate {f['rate']:.0%} "
            f"over {f['runs']} runs ({f['transitions']} changes)")


def _header(rep: Mapping[str, Any]) -> list[str]:
    b, c = rep["base"], rep["candidate"]
    lines = [f"compare {b['name']} (id {b['id']}) -> {c['name']} (id {c['id']})"]
    env = rep["environment"]
    if env["differences"]:
        lines.append("environment differs: " + "; ".join(
            f"{k} {v['base']} -> {v['candidate']}" for k, v in env["differences"].items()))
    h = rep["harnesses"]
    lines.append(f"harnesses: {h['compared']} compared, {len(h['added'])} added, {len(h['removed'])} removed, "
                 f"{len(h.get('vanished', ()))} vanished, {len(h.get('pending', ()))} pending, "
                 f"{len(h['redefined'])} redefined (not compared); {rep['summary']['results_compared']} results; "
                 f"{rep['settings']['history_runs']} history runs")
    s = rep["summary"]
    lines.append("status: " + (", ".join(f"{k} {s[k]}" for k in ("new_error", "vanished", "new_failure",
                                                               "unexpected_pass", "fixed", "missing", "changed")
                                if s.get(k)) or "no change"))
    lines.append("numeric: " + (", ".join(f"{k} {s[k]}" for k in ("exceeds_tolerance", "grew", "shrank",
                                                                  "back_in_tolerance") if s[k]) or "no drift"))
    lines.append("perf: " + ", ".join(f"{k} {v}" for k, v in s["perf"].items()))
    reg = {k: v for k, v in rep["regressions"].items() if v}
    lines.append("regressions: " + ("; ".join(f"{k}: {', '.join(v)}" for k, v in reg.items()) if reg else "none"))
    if rep.get("clusters"):
        lines.append(clusters_line(rep["clusters"]))
    return lines


def clusters_line(d: Mapping[str, Any]) -> str:
    """``clusters: 3 -> 4; 2 new, 1 gone, 0 spread`` for a ``farm.analysis.clusters.diff``."""
    return (f"clusters: {d['base']} -> {d['candidate']}; {len(d['appeared'])} new, {len(d['gone'])} gone, "
            f"{len(d['spread'])} spread")


def cluster_lines(d: Mapping[str, Any], limit: int = 10) -> list[str]:
    """One line per cluster that appeared, went or spread (at most ``limit`` of each)."""
    lines = []
    for kind, label in (("appeared", "new"), ("gone", "gone"), ("spread", "spread")):
        for e in d.get(kind, ())[:limit]:
            more = ""
            if kind == "spread":
                more = f" (+{len(e['new_harnesses'])} harnesses" + (
                    f", new platforms {', '.join(e['new_platforms'])}" if e["new_platforms"] else "") + ")"
            lines.append(f"  {label:<7} {e['key']} {e['harnesses']} harnesses on {','.join(e['platforms'])}"
                         f"{more}: {e['summary'][:120]}")
        if len(d.get(kind, ())) > limit:
            lines.append(f"  ... {len(d[kind]) - limit} more {label}")
    return lines


def render_text(rep: Mapping[str, Any], limit: int = 50) -> str:
    lines = _header(rep)
    h = rep["harnesses"]
    for what in ("added", "removed", "vanished", "pending", "redefined"):
        if h.get(what):
            lines.append(f"{what}: {', '.join(h[what][:20])}{' ...' if len(h[what]) > 20 else ''}")
    lines += cluster_lines(rep.get("clusters") or {})
    n = 0
    for g in rep["primitives"]:
        lines.append(f"\n{g['primitive']} ({g['regressions']} regressions)")
        for f in g["findings"]:
            if n >= limit:
                break
            lines.append("  " + ("! " if f["regression"] else "  ") + describe(f))
            n += 1
    if len(rep["findings"]) > n:
        lines.append(f"... and {len(rep['findings']) - n} more (--format json for all)")
    return "\n".join(lines)


def render_markdown(rep: Mapping[str, Any], limit: int = 200) -> str:
    head = _header(rep)
    lines = [f"### {head[0]}", ""] + [f"- {x}" for x in head[1:]] + [""]
    if rep["findings"]:
        lines += ["| primitive | harness | platform/stage | kind | finding |", "|---|---|---|---|---|"]
        for f in rep["findings"][:limit]:
            what = describe(f).split(": ", 1)[-1].replace("|", "\\|")
            tag = f["change"] if f["kind"] == "status" else f.get("verdict", "flaky")
            mark = "**" if f["regression"] else ""
            lines.append(f"| {f['primitive']} | {f['harness']} | {f['platform']}/{f['stage']} | "
                         f"{mark}{f['kind']} {tag}{mark} | {what} |")
        if len(rep["findings"]) > limit:
            lines.append(f"\n... and {len(rep['findings']) - limit} more")
    else:
        lines.append("No differences.")
    return "\n".join(lines)
