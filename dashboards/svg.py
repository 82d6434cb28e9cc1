"""Server-side SVG plots for history pages: no JavaScript, no CDN.

Inputs are plain data; every label is escaped. ``line_chart`` draws one polyline per
series over the runs on the x axis; ``status_strip`` draws one coloured square per run.
"""
from __future__ import annotations

import math
from typing import Any

from markupsafe import Markup, escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
STATUS_COLOURS = {"ok": "#4caf50", "fail": "#e53935", "error": "#c62828", "crashed": "#6a1b9a",
                  "timeout": "#8e24aa", "unexpected_pass": "#ffb300", "expected_fail": "#9e9e9e",
                  "skipped": "#cfd8dc", "not_runnable_here": "#e0e0e0"}


def _nice(v: float, unit: str = "") -> str:
    if v == 0:
        return "0"
    if unit == "s":
        return f"{v * 1e6:.3g} µs" if v < 1e-3 else f"{v * 1e3:.3g} ms" if v < 1 else f"{v:.3g} s"
    if abs(v) >= 1000 or abs(v) < 1e-2:
        return f"{v:.1e}"
    return f"{v:.3g}"


def line_chart(series: dict[str, list[float | None]], xlabels: list[str], title: str, unit: str = "",
               width: int = 520, height: int = 180) -> Markup:
    """One line per series; ``None`` values leave a gap. x positions are ``xlabels`` (runs)."""
    left, right, top, bottom = 58, 110, 22, 28
    pw, ph = width - left - right, height - top - bottom
    vals = [v for s in series.values() for v in s if v is not None and math.isfinite(v)]
    parts = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
             f'<text x="{left}" y="14" class="ct">{escape(title)}{" (" + str(escape(unit)) + ")" if unit and unit != "s" else ""}'
             f'</text>']
    unit = unit.strip()
    suffix = "" if unit in ("", "s") else f" {escape(unit)}"
    if not vals:
        parts.append(f'<text x="{left}" y="{top + ph / 2}" class="cn">no data</text></svg>')
        return Markup("".join(parts))
    hi = max(vals) * 1.1 or 1.0
    n = max(1, len(xlabels) - 1)

    def x(i: int) -> float:
        return left + (pw * i / n if len(xlabels) > 1 else pw / 2)

    def y(v: float) -> float:
        return top + ph - ph * v / hi

    for frac in (0, 0.5, 1):
        yy = top + ph - ph * frac
        parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{yy:.1f}" y2="{yy:.1f}" class="grid"/>'
                     f'<text x="{left - 4}" y="{yy + 4:.1f}" class="ax" text-anchor="end">{_nice(hi * frac, unit)}</text>')
    step = max(1, len(xlabels) // 6)
    for i, lab in enumerate(xlabels):
        if i % step == 0 or i == len(xlabels) - 1:
            short = lab if len(lab) <= 14 else "…" + lab[-13:]
            parts.append(f'<text x="{x(i):.1f}" y="{height - 8}" class="ax" text-anchor="middle">'
                         f'<title>{escape(lab)}</title>{escape(short)}</text>')
    for k, (name, ys) in enumerate(series.items()):
        colour = PALETTE[k % len(PALETTE)]
        seg: list[str] = []
        for i, v in enumerate(ys):
            if v is None or not math.isfinite(v):
                if len(seg) > 1:
                    parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{" ".join(seg)}"/>')
                seg = []
                continue
            seg.append(f"{x(i):.1f},{y(v):.1f}")
            parts.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="2.5" fill="{colour}">'
                         f'<title>{escape(name)} @ {escape(xlabels[i])}: {_nice(v, unit)}{suffix}</title></circle>')
        if len(seg) > 1:
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{" ".join(seg)}"/>')
        ly = top + 12 * k + 6
        parts.append(f'<rect x="{left + pw + 10}" y="{ly - 7}" width="9" height="9" fill="{colour}"/>'
                     f'<text x="{left + pw + 23}" y="{ly + 1}" class="ax">{escape(name)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def status_strip(rows: dict[str, list[str | None]], xlabels: list[str], cell: int = 14) -> Markup:
    """One row per label (stage@platform), one square per run coloured by status."""
    left = 150
    width = left + cell * max(1, len(xlabels)) + 4
    height = cell * len(rows) + 6
    parts = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'role="img" aria-label="status history">']
    for r, (name, statuses) in enumerate(rows.items()):
        yy = 3 + r * cell
        parts.append(f'<text x="{left - 6}" y="{yy + cell - 4}" class="ax" text-anchor="end">{escape(name)}</text>')
        for i, st in enumerate(statuses):
            if st is None:
                continue
            colour = STATUS_COLOURS.get(st, "#000")
            parts.append(f'<rect x="{left + i * cell}" y="{yy}" width="{cell - 2}" height="{cell - 2}" '
                         f'fill="{colour}"><title>{escape(xlabels[i])}: {escape(st)}</title></rect>')
    parts.append("</svg>")
    return Markup("".join(parts))


def chart_data(history: list[dict[str, Any]]) -> dict[str, Any]:
    """Plain series from ``queries.harness_history`` rows (oldest run first)."""
    runs: list[str] = []
    for h in history:
        if h["run"] not in runs:
            runs.append(h["run"])
    idx = {r: i for i, r in enumerate(runs)}

    def series(pick: Any) -> dict[str, list[float | None]]:
        out: dict[str, list[float | None]] = {}
        for h in history:
            got = pick(h)
            if got is None:
                continue
            label, v = got
            out.setdefault(label, [None] * len(runs))[idx[h["run"]]] = v
        return out

    def metric(stage: str, key: str | None) -> Any:
        def pick(h: dict[str, Any]) -> Any:
            if h["stage"] != stage or h["status"] not in ("ok", "unexpected_pass", "fail"):
                return None
            v = (h["metrics"] or {}).get(key) if key else h["seconds"]
            return (h["platform"], float(v)) if v is not None else None
        return pick

    status: dict[str, list[str | None]] = {}
    for h in history:
        status.setdefault(f'{h["stage"]}@{h["platform"]}', [None] * len(runs))[idx[h["run"]]] = h["status"]
    return {"runs": runs,
            "compile_s": series(metric("compile", "compile_s")),
            "execute_s": series(metric("execute", "execute_s")),
            "max_ulp_err": series(metric("compare", "max_ulp_err")),
            "max_rel_err": series(metric("compare", "max_rel_err")),
            "status": status}
