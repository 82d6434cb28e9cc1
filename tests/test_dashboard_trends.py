"""The trend page, the plots (Altair specs rendered to SVG by vl-convert), the overview's
heat map and the compare page's perf dot plot, over two real sweeps (tests.test_dashboard's
database) and a one-run copy of it (``farm.bench.db.make_db``)."""
from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select, update

from dashboards import plots
from dashboards.views.compare import perf_dots
from tests.helpers.dashboard import EVIL, dashboard_fixtures, html


farm_db, app, client = dashboard_fixtures("trends")


def _by(rows: list[dict[str, Any]], run: str, key: str, value: str, outcome: str) -> int:
    return sum(r["n"] for r in rows if r["run"] == run and r[key] == value and r["outcome"] == outcome)


def test_trends_json_counts_runs_platforms_and_stages(client: Any, farm_db: dict[str, Any]) -> None:
    d = client.get("/trends.json").get_json()
    assert [r["id"] for r in d["runs"]] == [farm_db["base"], farm_db["head"]]  # oldest first
    base, head = d["order"]
    for r in d["runs"]:
        assert r["harnesses"] == 4 and r["wall_s"] > 0 and r["per_s"] == pytest.approx(4 / r["wall_s"])
        assert r["pass"] + r["fail"] + r["expected"] + r["skipped"] > 4 * 8
    # The planted failure (sin's cpu execute in the head run) is one more failing result on cpu, in execute.
    assert _by(d["by_platform"], head, "platform", "cpu", "fail") == _by(d["by_platform"], base, "platform", "cpu",
                                                                         "fail") + 1
    assert _by(d["by_stage"], head, "stage", "execute", "fail") == _by(d["by_stage"], base, "stage", "execute",
                                                                       "fail") + 1
    times = {(t["run"], t["stage"]): t for t in d["stage_times"]}
    for stage in ("trace", "lower", "compile", "execute"):
        t = times[(head, stage)]
        assert 0 < t["p05"] <= t["q1"] <= t["median"] <= t["q3"] <= t["p95"] and t["n"] >= 4


def test_trends_page_draws_the_plots_as_svg(client: Any) -> None:
    page = html(client.get("/trends"))
    for label in ("sweep wall time", "throughput", "passing results per platform", "failing results per platform",
                  "failing results per stage", "stage time distributions"):
        figure = page[page.index(f'aria-label="{label}"'):]
        assert figure.index("<svg") < figure.index("</figure>"), label
    assert "farm-plot-" not in page  # every placeholder was filled
    assert page.count('<tr><td><a href="/?run=') == 2  # the runs table


def test_trend_summaries_are_kept_and_refused_when_a_run_changes(app: Any, client: Any,
                                                                  farm_db: dict[str, Any]) -> None:
    from farm.store import trends
    from farm.store.models import ReportRow, ResultRow, StoredResultRow

    client.get("/trends.json")
    store = app.config["STORE"]

    def trace_fails() -> tuple[int, int]:
        with store.session() as s:
            runs = trends.recent_runs(s, 2)
            got = trends.summaries(s, runs)[farm_db["base"]]
            n = s.scalar(select(ReportRow.id).where(ReportRow.settings_key == trends.SUMMARY_KEY,
                                                    ReportRow.head_run_id == farm_db["base"]))
        return sum(c["n"] for c in got["counts"] if c["stage"] == "trace" and c["status"] == "error"), n

    with store.session() as s:
        kept = s.scalars(select(ReportRow.head_run_id).where(ReportRow.settings_key == trends.SUMMARY_KEY)).all()
        assert sorted(kept) == [farm_db["base"], farm_db["head"]]
        # Tamper with the kept text: its hash no longer matches, so it is recomputed, not served.
        s.execute(update(ReportRow).where(ReportRow.settings_key == trends.SUMMARY_KEY)
                  .values(content='{"format_version": 1, "counts": [], "seconds": []}'))
    before, _ = trace_fails()
    with store.session() as s:
        # A result of the base run changes status: the run's stamp changes, the summary is recomputed.
        rid = s.scalar(select(ResultRow.id).where(ResultRow.run_id == farm_db["base"], ResultRow.stage == "trace",
                                                  ResultRow.status == "ok").limit(1))
        s.execute(update(StoredResultRow).where(StoredResultRow.id == rid).values(status="error"))
    try:
        after, _ = trace_fails()
        assert after == before + 1
    finally:
        with store.session() as s:
            s.execute(update(StoredResultRow).where(StoredResultRow.id == rid).values(status="ok"))
    assert trace_fails()[0] == before


@pytest.mark.parametrize("query", ["runs=0", "runs=abc", "runs=201", "run=1"])
def test_trends_parameters_are_checked(client: Any, query: str) -> None:
    r = client.get(f"/trends.json?{query}")
    assert r.status_code == 400 and r.get_json()["error"]


def test_overview_draws_the_matrix_as_a_heat_map(client: Any) -> None:
    page = html(client.get("/"))
    heat = page[page.index('id="heatmap"'):]
    heat = heat[:heat.index("</figure>")]
    assert "<svg" in heat and all(p in heat for p in ("asinh", "sin", "exp", "add"))


def test_plots_escape_labels_and_render_one_mark_per_value() -> None:
    rows = [{"run": "r1", "series": EVIL, "value": 1.0}, {"run": "r2", "series": EVIL, "value": 2.0}]
    out = str(plots.svg(plots.lines(rows, "t", unit="s"), EVIL))
    assert "<script>" not in out and "&lt;script&gt;" in out
    grid = str(plots.svg(plots.status_grid([{"run": "r1", "row": "lower@cpu", "status": "fail"},
                                             {"run": "r2", "row": "lower@cpu", "status": "ok"}]), "g"))
    assert plots.STATUS_COLOURS["fail"] in grid and plots.STATUS_COLOURS["ok"] in grid


def test_perf_dots_keep_the_largest_changes_and_plot_them() -> None:
    findings = [{"kind": "perf", "harness": f"h{i}", "fingerprint": str(i), "platform": "cpu", "stage": "execute",
                 "metric": "execute_s", "verdict": "regression" if r > 1 else "improvement", "ratio": r}
                for i, r in enumerate([1.1, 3.0, 0.2, 1.5])]
    findings.append({"kind": "numeric", "harness": "n", "fingerprint": "n", "platform": "cpu", "stage": "compare"})
    rows = perf_dots(findings, limit=2)
    assert [r["harness"] for r in rows] == ["h2", "h1"]  # |log 0.2| > |log 3.0|
    out = str(plots.svg(plots.dots(rows), "dots"))
    assert "h2 cpu/execute execute_s" in out and "head / base" in out


def test_one_run_trends_and_overview_have_no_dead_links(farm_db: dict[str, Any],
                                                        tmp_path_factory: pytest.TempPathFactory) -> None:
    from dashboards.app import create_app
    from farm.bench.db import make_db as copy_runs

    url = f"sqlite:///{tmp_path_factory.mktemp('one') / 'one.db'}"
    copy_runs(farm_db["url"], url, runs=1, src_run=str(farm_db["head"]), log=lambda s: None)
    a = create_app(url)
    try:
        c = a.test_client()
        page = html(c.get("/trends"))
        assert 'id="one-run"' in page and 'aria-label="sweep wall time"' in page
        overview = html(c.get("/"))
        assert 'id="compare-needs"' in overview and "/compare" not in overview.split("<main>")[1]
        assert c.get("/compare").status_code == 200
    finally:
        a.config["STORE"].dispose()


def test_plots_fetch_nothing() -> None:
    spec = {"data": {"url": "http://127.0.0.1:9/data.json"}, "mark": "point",
            "encoding": {"x": {"field": "a", "type": "quantitative"}}}
    with pytest.raises(Exception, match="not allowed"):
        plots.svg(spec, "external data")


def test_plots_fit_a_1280_pixel_page_and_waste_no_room() -> None:
    """The overview heat map of the upstream catalog (132 primitives x 6 platforms) fits a
    1280-pixel window with its legend above the cells (it was on the right, scrolled out of
    sight); a dot plot of long harness names keeps no more left padding than its labels draw."""
    import re

    keys = [f"primitive_{i:03d}" for i in range(132)]
    platforms = ["any", "cpu", "cuda", "export", "rocm", "tpu"]
    matrix = {k: {p: {"worst": "fail" if i % 7 == 0 else "ok", "counts": {}} for p in platforms}
              for i, k in enumerate(keys)}
    heat = plots.spec(plots.matrix_heat(matrix, "primitive", platforms))
    assert heat["encoding"]["color"]["legend"]["orient"] == "top"
    width = int(re.search(r'<svg[^>]* width="(\d+)"', str(plots.svg(heat, "h"))).group(1))
    assert width <= 1228, width  # main's content width at 1280 pixels, less the figure's padding
    name = "scatter_mul_uint16_4x2x3_2_case=2_dimension_numbers=((0),(0,2),(0,2),(),())" * 3
    dots = plots.spec(plots.dots([{"label": f"{name} {i}", "ratio": 2.0 + i, "kind": "regression"} for i in range(3)]))
    assert dots["padding"]["left"] <= 5 + 260 // 5  # was 5 + len(name) = 241


def test_seconds_axes_read_in_si_units() -> None:
    chart = plots.spec(plots.lines([{"run": "r1", "series": "cpu", "value": 1.2e-5}], "execute time", unit="s"))
    assert chart["encoding"]["y"]["axis"]["format"] == "~s"
    assert "12µ" in str(plots.svg(chart, "t"))  # not 0.000012


def test_numpy_is_loaded_before_any_request() -> None:
    """Altair's to_dict takes numpy from sys.modules without importing it: a first request
    that imports numpy (the compare page loading the catalog) while another thread built a
    chart handed it a partially initialised module, and the chart's page was a 500."""
    import subprocess
    import sys

    code = "import sys, dashboards.plots; assert 'numpy' in sys.modules and sys.modules['numpy'].ndarray"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
