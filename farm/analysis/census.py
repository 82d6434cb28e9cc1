"""What a run's census says about the plugin boundary, and its stage × platform × status
counts (pure, over plain rows).

The census walks every per-platform lowering and the exported artifact: which
non-StableHLO ops (``chlo.*``...) would cross the plugin boundary, and which custom-call
targets each platform's modules call, with or without JAX's export guarantee.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

PLATFORM_ORDER = ("any", "cpu", "cuda", "rocm", "tpu", "export")


def stage_table(counts: Iterable[tuple[str, str, str, int]]) -> dict[str, dict[str, dict[str, int]]]:
    """{stage: {platform: {status: n}}} from grouped (stage, platform, status, n) rows."""
    out: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    for stage, platform, status, n in counts:
        out[stage][platform][status] = out[stage][platform].get(status, 0) + n
    return {s: dict(p) for s, p in out.items()}


def boundary(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Per platform: modules walked, modules with chlo ops / any non-StableHLO op, the ops
    and custom-call targets with how many modules carry each (and which are unguaranteed)."""
    per: dict[str, dict[str, Any]] = {}
    for r in rows:
        f = r.get("facts") or {}
        p = per.setdefault(r["platform"], {"modules": 0, "with_chlo": 0, "with_non_stablehlo": 0,
                                           "with_unguaranteed": 0, "ops": Counter(), "custom_calls": Counter(),
                                           "unguaranteed": Counter(), "primitives_with_chlo": set()})
        p["modules"] += 1
        ops = list(f.get("non_stablehlo") or [])
        if any(op.startswith("chlo.") for op in ops):
            p["with_chlo"] += 1
            p["primitives_with_chlo"].add(r.get("primitive"))
        p["with_non_stablehlo"] += bool(ops)
        p["ops"].update(set(ops))
        p["custom_calls"].update(set(f.get("custom_calls") or []))
        ung = set(f.get("unguaranteed") or [])
        p["unguaranteed"].update(ung)
        p["with_unguaranteed"] += bool(ung)
    order = {p: i for i, p in enumerate(PLATFORM_ORDER)}
    return {pl: {**{k: v for k, v in d.items() if not isinstance(v, (Counter, set))},
                 "ops": dict(d["ops"].most_common()), "custom_calls": dict(d["custom_calls"].most_common()),
                 "unguaranteed": dict(d["unguaranteed"].most_common()),
                 "primitives_with_chlo": sorted(x for x in d["primitives_with_chlo"] if x)}
            for pl, d in sorted(per.items(), key=lambda kv: order.get(kv[0], 99))}


def render_text(table: Mapping[str, Any], census: Mapping[str, Any]) -> str:
    from farm.results import SEVERITY, STAGES

    platforms = sorted({p for s in table.values() for p in s}, key=lambda p: (PLATFORM_ORDER + (p,)).index(p))
    statuses = sorted({st for s in table.values() for p in s.values() for st in p}, key=SEVERITY.__getitem__)
    lines = ["stage × platform × status (results):"]
    stages = sorted(table, key=lambda s: (STAGES + (s,)).index(s))
    for st in statuses:
        lines.append(f"  {st}")
        for s in stages:
            cells = [f"{table[s].get(p, {}).get(st, 0):>8}" if p in table[s] else "       ." for p in platforms]
            if any(c.strip() not in ("0", ".") for c in cells):
                lines.append(f"    {s:<10}" + "".join(cells))
    lines.insert(1, "    " + " " * 10 + "".join(f"{p:>8}" for p in platforms))
    lines.append("")
    lines.append("plugin boundary (census of per-platform lowerings and of the exported artifact):")
    for pl, d in census.items():
        lines.append(f"  {pl:<7} {d['modules']:>5} modules: {d['with_chlo']} with chlo ops, "
                     f"{d['with_non_stablehlo']} with any non-StableHLO op, {d['with_unguaranteed']} with "
                     f"unguaranteed custom calls")
        if d["ops"]:
            lines.append("          ops: " + ", ".join(f"{k} ×{v}" for k, v in list(d["ops"].items())[:12]))
        if d["custom_calls"]:
            lines.append("          custom calls: " + ", ".join(
                f"{k} ×{v}{' (unguaranteed)' if k in d['unguaranteed'] else ''}"
                for k, v in list(d["custom_calls"].items())[:14]))
    return "\n".join(lines)
