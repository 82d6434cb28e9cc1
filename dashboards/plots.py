"""The dashboard's plots: Vega-Lite charts built with Altair, rendered here to SVG.

Every builder is a pure function of plain rows (lists of dicts, as the store's queries
and the pages' contexts hold them) that returns an Altair chart; ``svg`` turns a chart
into inline SVG with ``vl-convert`` (Vega's own renderer, run in-process: no browser
JavaScript, no CDN, nothing fetched). Vega escapes every label it draws, so a harness
name or an error string cannot inject markup. Identical specs render once
(``svg`` memoizes by the spec's JSON).

Example::

    chart = plots.lines([{"run": "r1", "series": "cpu", "value": 0.2}], "compile time", unit="s")
    markup = plots.svg(chart, "compile time")
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import altair as alt
import numpy  # noqa: F401  (see below)
import vl_convert as vlc
from markupsafe import Markup, escape

from farm.results import OUTCOME_CLASS

# numpy is imported here, before any request, because Altair's ``to_dict`` looks numpy up in
# ``sys.modules`` without importing it: a page that imports numpy for the first time (the
# compare page loads the catalog) while another thread builds a chart handed Altair a
# partially initialised module (AttributeError: a 500 on the first concurrent requests).

#: Altair validates every schema object as it is built ("debug mode"): on a year of runs that
#: was 0.2-0.35 s of the harness page's four line plots. The builders are fixed code, so
#: pages build without it, and the test suite validates every spec they make against the
#: Vega-Lite schema instead (``FARM_VALIDATE_PLOTS=1``, set by tests/conftest.py).
alt.utils.schemapi.disable_debug_mode()
VALIDATE = os.environ.get("FARM_VALIDATE_PLOTS") == "1"

#: One colour per status, shared by every plot and by style.css.
STATUS_COLOURS = {"ok": "#4caf50", "fail": "#e53935", "error": "#c62828", "crashed": "#6a1b9a",
                  "timeout": "#8e24aa", "unexpected_pass": "#ffb300", "expected_fail": "#9e9e9e",
                  "skipped": "#cfd8dc", "not_runnable_here": "#e0e0e0"}
#: Statuses grouped for the trend counts: what a reader asks first is "how many passed, how many broke".
OUTCOME_CLASSES = OUTCOME_CLASS
CLASS_COLOURS = {"pass": "#4caf50", "fail": "#e53935", "expected": "#9e9e9e", "skipped": "#cfd8dc"}
#: The generic family: Vega measures labels in it about 3x faster than in a named font
#: (a heat map of 132 primitives: 60 ms against 175 ms), and browsers draw it in theirs.
_FONT = "sans-serif"
_CONFIG = {"font": _FONT, "view": {"stroke": "#ddd"}, "axis": {"labelFontSize": 10, "titleFontSize": 11},
           "legend": {"labelFontSize": 10, "titleFontSize": 11}, "title": {"fontSize": 12, "anchor": "start"}}


def _scale(colours: dict[str, str], present: Iterable[str]) -> alt.Scale:
    seen = set(present)
    keys = [k for k in colours if k in seen] or list(colours)
    return alt.Scale(domain=keys, range=[colours[k] for k in keys])


def _room(labels: Iterable[str], limit: int) -> dict[str, int]:
    """Padding for a chart whose left axis carries ``labels`` cut at ``limit`` pixels: Vega
    measures them in its own sans-serif, a browser may draw a wider one (DejaVu Sans, when
    style.css's font list finds none of its own): one pixel more per character drawn. Only
    the characters within the limit are drawn (about 5 pixels each at the axis' 10 pixels):
    counting every character of a long harness name left hundreds of pixels blank."""
    drawn = max((len(x) for x in labels), default=0)
    return {"left": 5 + min(drawn, limit // 5), "top": 5, "right": 5, "bottom": 5}


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


# --------------------------------------------------------------------------- builders
def lines(rows: list[dict[str, Any]], title: str, *, unit: str = "", log: bool = False, counts: bool = False,
          order: list[str] | None = None, width: int = 420, height: int = 150) -> alt.Chart:
    """One line per ``series`` over ``run`` (x, in ``order`` or first-seen order); rows
    ``{run, series, value}``; a missing or non-finite value leaves a gap. ``counts``:
    whole-number ticks; seconds get SI ticks (``120µ``, ``50m``). One series gets no
    legend (the title names it)."""
    data = [r for r in rows if _finite(r.get("value")) and (not log or r["value"] > 0)]
    runs = order or list(dict.fromkeys(r["run"] for r in rows))
    one = len({r["series"] for r in data}) <= 1
    return (alt.Chart({"values": data}, title=title, width=width, height=height)
            .mark_line(point=True, strokeWidth=1.5)
            .encode(x=alt.X("run:O", sort=runs, title=None, axis=alt.Axis(labelAngle=-30, labelLimit=150)),
                    y=alt.Y("value:Q", title=unit or None,
                            scale=alt.Scale(type="log") if log else alt.Scale(zero=True),
                            axis=alt.Axis(tickMinStep=1, format="d") if counts else
                            alt.Axis(format="~s", labelExpr="datum.value == 0 ? '0' : datum.label") if unit == "s"
                            else alt.Axis()),  # 12µ, not 0.000012 (and 0, not 0µ)
                    color=alt.Color("series:N", title=None, legend=None if one else alt.Legend(labelLimit=160))))


def status_grid(rows: list[dict[str, Any]], *, order: list[str] | None = None, x: str = "run",
                y: str = "row", title: str = "") -> alt.Chart:
    """A heat map of statuses: one cell per ``{x, y, status}`` row, coloured by status
    (the harness page's stage@platform x run strip, the overview's matrix)."""
    xs = order or list(dict.fromkeys(str(r[x]) for r in rows))
    ys = list(dict.fromkeys(str(r[y]) for r in rows))
    cell = 16 if len(ys) < 60 else 11
    return (alt.Chart({"values": rows}, title=title or alt.Undefined, width=max(60, 22 * len(xs)), height=cell * len(ys),
                      padding=_room(ys, 160))
            .mark_rect(stroke="white", strokeWidth=1)
            .encode(x=alt.X(f"{x}:O", sort=xs, title=None, axis=alt.Axis(orient="top", labelAngle=-30, labelLimit=150)),
                    y=alt.Y(f"{y}:O", sort=ys, title=None, axis=alt.Axis(labelLimit=160)),
                    color=alt.Color("status:N", scale=_scale(STATUS_COLOURS, (r["status"] for r in rows)),
                                    title="status")))


def matrix_heat(matrix: dict[str, dict[str, dict[str, Any]]], by: str, platforms: list[str]) -> alt.Chart:
    """The overview's matrix (``{key: {platform: {worst, counts}}}``) as a heat map: one
    column per primitive (or dtype), one row per platform, each cell its worst status."""
    rows = [{by: key, "platform": p, "status": cell["worst"]}
            for key, cells in sorted(matrix.items()) for p in platforms if (cell := cells.get(p))]
    keys = sorted(matrix)
    many = len(keys) > 40
    # The legend goes above the cells: on the right it was beyond a 1280-pixel window's page
    # width for the upstream catalog's 132 primitives (hidden behind a horizontal scroll).
    return (alt.Chart({"values": rows}, width=(8 if many else 20) * max(1, len(keys)),
                      height=16 * max(1, len(platforms)))
            .mark_rect(stroke="white", strokeWidth=0.5)
            .encode(x=alt.X(f"{by}:O", sort=keys, title=None,
                            axis=alt.Axis(labelAngle=-90 if many else -40, labelLimit=110,
                                          labelFontSize=8 if many else 10)),
                    y=alt.Y("platform:O", sort=platforms, title=None),
                    color=alt.Color("status:N", scale=_scale(STATUS_COLOURS, (r["status"] for r in rows)),
                                    title="worst status",
                                    legend=alt.Legend(orient="top", direction="horizontal", labelLimit=160))))


def class_lines(rows: list[dict[str, Any]], series: str, outcome: str = "fail", *,
                order: list[str] | None = None, title: str = "") -> alt.Chart:
    """Results of one outcome class (``fail``: fail, error, crashed, timeout; ``pass``;
    ...) per run, one line per ``series`` value; rows ``{run, <series>, outcome, n}``."""
    runs = order or list(dict.fromkeys(r["run"] for r in rows))
    totals: dict[tuple[str, str], int] = {}
    for r in rows:
        key = (r["run"], r[series])
        totals[key] = totals.get(key, 0) + (r["n"] if r["outcome"] == outcome else 0)
    data = [{"run": k[0], "series": k[1], "value": v} for k, v in totals.items()]
    return lines(data, title or f"{outcome} results per {series}", order=runs, counts=True, width=380, height=150)


def boxes(rows: list[dict[str, Any]], *, order: list[str] | None = None, title: str = "") -> alt.LayerChart:
    """Time distributions from precomputed quantiles: per stage (x, pipeline order as in
    ``rows``) one box per run side by side, oldest first: rows ``{run, stage, p05, q1,
    median, q3, p95}`` in seconds (log scale); whisker 5th-95th, box quartiles, tick median."""
    runs = order or list(dict.fromkeys(r["run"] for r in rows))
    data = [r for r in rows if all(_finite(r.get(k)) and r[k] > 0 for k in ("p05", "q1", "median", "q3", "p95"))]
    stages = list(dict.fromkeys(r["stage"] for r in data))
    base = alt.Chart().encode(x=alt.X("stage:N", sort=stages, title=None, axis=alt.Axis(labelAngle=0)),
                              xOffset=alt.XOffset("run:N", sort=runs))
    y = alt.Scale(type="log")
    whisker = base.mark_rule(color="#777").encode(y=alt.Y("p05:Q", scale=y, title="seconds"), y2="p95:Q")
    box = base.mark_bar(stroke="#1f77b4", strokeWidth=0.5).encode(
        y=alt.Y("q1:Q", scale=y), y2="q3:Q",
        color=alt.Color("run:N", sort=runs, scale=alt.Scale(scheme="blues"), title="run",
                        legend=alt.Legend(labelLimit=200)))
    mid = base.mark_tick(color="#0d47a1", thickness=2).encode(y=alt.Y("median:Q", scale=y))
    width = max(300, len(stages) * max(30, 7 * len(runs)))
    return alt.layer(whisker, box, mid, data={"values": data}, title=title or alt.Undefined, width=width, height=220)


def dots(rows: list[dict[str, Any]], *, title: str = "") -> alt.Chart:
    """A dot plot of changes: one row per ``label``, the head/base ``ratio`` on a log x
    axis around 1, coloured by ``kind`` (regression, improvement, changed); rows
    ``{label, ratio, kind}``."""
    data = [r for r in rows if _finite(r.get("ratio")) and r["ratio"] > 0]
    labels = [r["label"] for r in sorted(data, key=lambda r: -r["ratio"])]
    colours = {"regression": "#e53935", "improvement": "#2ca02c", "changed": "#1f77b4"}
    lo = min([r["ratio"] for r in data] + [0.5])
    hi = max([r["ratio"] for r in data] + [2.0])
    rule = alt.Chart({"values": [{"one": 1}]}).mark_rule(color="#999", strokeDash=[4, 3]).encode(x="one:Q")
    pts = (alt.Chart({"values": data})
           .mark_circle(size=60, opacity=0.9)
           .encode(x=alt.X("ratio:Q", scale=alt.Scale(type="log", domain=[lo / 1.1, hi * 1.1]),
                           title="head / base (log scale)"),
                   y=alt.Y("label:N", sort=labels, title=None, axis=alt.Axis(labelLimit=260)),
                   color=alt.Color("kind:N", scale=_scale(colours, (r["kind"] for r in data)), title=None)))
    return alt.layer(rule, pts, title=title or alt.Undefined, width=420, height=max(40, 14 * len(labels)),
                     padding=_room(labels, 260))


#: The builders templates may call through ``dashboards.views.plot``.
BUILDERS = ("lines", "status_grid", "matrix_heat", "class_lines", "boxes", "dots", "ulp_heat")


# --------------------------------------------------------------------------- rendering
_MEMO: OrderedDict[str, str] = OrderedDict()
_MEMO_MAX = 256
_LOCK = threading.Lock()


def spec(chart: alt.TopLevelMixin) -> dict[str, Any]:
    """The chart's Vega-Lite spec (a plain dict, what the JSON faces carry)."""
    d = chart.to_dict(validate=VALIDATE)
    d["config"] = {**_CONFIG, **d.get("config", {})}
    return d


def svg(chart: alt.TopLevelMixin | dict[str, Any], label: str, css: str = "chart") -> Markup:
    """Inline SVG for a chart (or a spec), in a ``<figure>`` labelled ``label``."""
    d = chart if isinstance(chart, dict) else spec(chart)
    text = json.dumps(d, sort_keys=True, default=str)
    key = hashlib.sha256(text.encode()).hexdigest()
    with _LOCK:
        out = _MEMO.get(key)
        if out is not None:
            _MEMO.move_to_end(key)
    if out is None:
        out = vlc.vegalite_to_svg(d, allowed_base_urls=[])  # data inline only: nothing is fetched
        with _LOCK:
            _MEMO[key] = out
            while len(_MEMO) > _MEMO_MAX:
                _MEMO.popitem(last=False)
    return Markup(f'<figure class="{escape(css)}" role="img" aria-label="{escape(label)}">{out}</figure>')


def forget() -> None:
    """Drop the memoized SVGs (benchmarks time plots uncached with it)."""
    with _LOCK:
        _MEMO.clear()


def warm() -> None:
    """Start Vega's renderer (the first conversion in a process costs ~0.4 s)."""
    vlc.vegalite_to_svg({"mark": "point", "data": {"values": [{"x": 1}]},
                         "encoding": {"x": {"field": "x", "type": "quantitative"}}}, allowed_base_urls=[])


def ulp_heat(cells: list[dict[str, Any]], *, title: str = "") -> alt.Chart:
    """The accuracy heat map: one row per primitive, one column per dtype × platform, each
    cell coloured by log2(1 + max ULP on normal data), 0 to 16 (``farm.analysis.accuracy.cells``)."""
    rows = [c for c in cells if c.get("log_ulp") is not None]
    prims = sorted({c["primitive"] for c in rows})
    cols = sorted({c["column"] for c in rows})
    return (alt.Chart({"values": rows}, title=title or alt.Undefined, width=max(60, 18 * len(cols)),
                      height=14 * max(1, len(prims)))
            .mark_rect(stroke="white", strokeWidth=0.5)
            .encode(x=alt.X("column:O", sort=cols, title=None, axis=alt.Axis(orient="top", labelAngle=-40, labelLimit=150)),
                    y=alt.Y("primitive:O", sort=prims, title=None),
                    color=alt.Color("log_ulp:Q", title="log2(1 + max ULP), normal data",
                                    scale=alt.Scale(scheme="orangered", domain=[0, 16])),
                    tooltip=["primitive:N", "column:N", "max_ulp_normal:Q", "max_ulp:Q"]))
