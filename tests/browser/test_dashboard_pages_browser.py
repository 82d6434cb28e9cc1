"""The trend page, the plots, search, sortable tables and the first-run case in Debian's
chromium (Playwright, headless), against real servers over a database filled by two real
sweeps (with one execute time planted 40x slower, for the compare page's perf plot) and
over a one-run copy of it (``farm.bench.db.make_db``).

Screenshots land in test-artifacts/ (gitignored)."""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import delete, select, update

from tests.helpers.browser import ARGS, CHROMIUM, SHOTS, pytestmark  # noqa: F401 (markers, skip)

SLOWER = 40.0


def _plant_slow_execute(url: str, base: int, head: int) -> None:
    """exp's cpu execute: five timed samples in ``base`` (one sweep with repeats=1 has one,
    too few for a verdict) and the same SLOWER times slower in ``head``."""
    from farm.store import open_store
    from farm.store.models import HarnessRow, ReportRow, ResultRow, StoredResultRow

    store = open_store(url)
    try:
        with store.session() as s:
            hid = s.scalar(select(HarnessRow.id).where(HarnessRow.primitive == "exp"))
            t = s.scalar(select(ResultRow.metrics).where(ResultRow.run_id == base, ResultRow.harness_id == hid,
                                                         ResultRow.platform == "cpu", ResultRow.stage == "execute"))
            for run, k in ((base, 1.0), (head, SLOWER)):
                samples = [t["execute_s"] * k * (1 + 0.01 * i) for i in range(5)]
                s.execute(update(StoredResultRow).where(StoredResultRow.run_id == run, StoredResultRow.harness_id == hid,
                                                  StoredResultRow.platform == "cpu", StoredResultRow.stage == "execute")
                          .values(metrics={"execute_s": samples[2], "execute_min_s": samples[0],
                                           "execute_max_s": samples[-1], "repeats": 5.0},
                                  facts={"samples_s": samples, "warmup_calls": 10}))
            s.execute(delete(ReportRow))  # derived from the rows just changed (the sweep stored one)
    finally:
        store.dispose()


@pytest.fixture(scope="module")
def dbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from farm.bench.db import make_db as copy_runs
    from tests.helpers.dashboard import shared_db

    root = tmp_path_factory.mktemp("pages")
    two = shared_db(tmp_path_factory, "pages-two")
    _plant_slow_execute(two["url"], two["base"], two["head"])
    one = f"sqlite:///{root / 'one.db'}"
    copy_runs(two["url"], one, runs=1, src_run=str(two["base"]), log=lambda s: None)
    return {"two": two, "one": one}


@pytest.fixture(scope="module")
def serve(dbs: dict[str, Any]) -> Iterator[Callable[[str], str]]:
    """serve(url) -> the base URL of a real server (werkzeug, threaded) over that database."""
    from werkzeug.serving import make_server

    from dashboards.app import create_app

    running: list[tuple[Any, threading.Thread, Any]] = []

    def start(url: str) -> str:
        app = create_app(url)
        srv = make_server("127.0.0.1", 0, app, threaded=True)
        t = threading.Thread(target=srv.serve_forever, daemon=True)
        t.start()
        running.append((srv, t, app))
        return f"http://127.0.0.1:{srv.server_port}"

    yield start
    for srv, t, app in running:
        srv.shutdown()
        t.join(5)
        app.config["STORE"].dispose()


@pytest.fixture(scope="module")
def page(dbs: dict[str, Any]) -> Iterator[Any]:
    pw = pytest.importorskip("playwright.sync_api")
    SHOTS.mkdir(exist_ok=True)
    with pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        ctx = browser.new_context(viewport={"width": 1280, "height": 900})
        pg = ctx.new_page()
        pg.set_default_timeout(15_000)
        errors: list[str] = []
        outside: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.on("response", lambda r: errors.append(f"{r.status} {r.url}")
              if r.status >= 400 and not r.url.endswith("/favicon.ico") else None)
        pg.on("request", lambda r: None if r.url.startswith("http://127.0.0.1:") else outside.append(r.url))
        yield pg
        ctx.close()
        browser.close()
        assert not errors, errors  # no script error, no failed load (pages, sort.js, style.css)
        assert not outside, outside  # nothing fetched from anywhere else: no CDN


def column(page: Any, table: str, n: int) -> list[str]:
    return page.locator(f"#{table} tbody tr").evaluate_all(
        f"rows => rows.filter(r => r.cells.length > {n} && r.cells[{n}].tagName === 'TD')"
        f".map(r => r.cells[{n}].textContent.trim())")


def test_trend_page_plots(page: Any, serve: Callable[[str], str], dbs: dict[str, Any]) -> None:
    base = serve(dbs["two"]["url"])
    page.goto(base + "/")
    page.get_by_role("link", name="Trends", exact=True).click()
    page.wait_for_url("**/trends")
    assert page.title() == "Trends · Lowering Farm"
    for label in ("sweep wall time", "throughput", "passing results per platform", "failing results per platform",
                  "failing results per stage", "stage time distributions"):
        fig = page.get_by_role("img", name=label)
        assert fig.locator("svg").is_visible(), label
        box = fig.locator("svg").bounding_box()
        assert box["width"] > 200 and box["height"] > 100, label
    assert page.locator("#trend-runs tbody tr").count() == 2
    page.screenshot(path=str(SHOTS / "10-trends.png"), full_page=True)


def test_overview_heat_map_and_compare_perf_plot(page: Any, serve: Callable[[str], str], dbs: dict[str, Any]) -> None:
    base = serve(dbs["two"]["url"])
    page.goto(base + "/")
    heat = page.locator("#heatmap svg")
    assert heat.is_visible()
    assert heat.locator("text", has_text="asinh").count() >= 1 and heat.locator("text", has_text="cpu").count() >= 1
    page.screenshot(path=str(SHOTS / "11-overview-heatmap.png"), full_page=True)

    page.get_by_role("link", name="compare with the previous run").click()
    page.wait_for_url("**/compare?*")
    dots = page.get_by_role("img", name="performance changes, head over base")
    assert dots.locator("svg").is_visible()
    assert dots.locator("text", has_text="exp_float32_3x4 cpu/execute").count() >= 1  # the planted slowdown
    page.screenshot(path=str(SHOTS / "14-compare-perf.png"), full_page=True)


def test_search_from_the_header_with_filters_in_the_url(page: Any, serve: Callable[[str], str],
                                                        dbs: dict[str, Any]) -> None:
    base = serve(dbs["two"]["url"])
    page.goto(base + "/coverage")
    box = page.get_by_role("searchbox", name="search harnesses")
    box.fill("sin")
    box.press("Enter")
    page.wait_for_url("**/search?q=sin")
    assert column(page, "results", 0) == ["asinh_float32_3x4", "sin_float32_3x4"]
    page.select_option("#search-form select[name=status]", "fail")
    page.locator("#search-form button[type=submit]").click()
    page.wait_for_url("**/search?q=sin&status=fail*")
    assert column(page, "results", 0) == ["sin_float32_3x4"]
    page.screenshot(path=str(SHOTS / "12-search.png"), full_page=True)

    # Server-side order: the harness header is a link that keeps the text and the filter.
    page.goto(base + "/search?q=float32")
    page.locator("#results thead").get_by_role("link", name="harness").click()
    page.wait_for_url("**sort=-name*")
    assert "q=float32" in page.url
    names = column(page, "results", 0)
    assert names == sorted(names, reverse=True) and len(names) == 4
    # A deep link is the same page.
    page.goto(page.url)
    assert column(page, "results", 0) == names
    page.locator("#results").get_by_role("link", name="sin_float32_3x4", exact=True).click()
    page.wait_for_url(f"**/harness/{dbs['two']['fp']['sin']}?run=*")


def test_tables_sort_in_the_browser_and_keep_it_in_the_url(page: Any, serve: Callable[[str], str],
                                                           dbs: dict[str, Any]) -> None:
    base = serve(dbs["two"]["url"])
    page.goto(base + "/?dtype=float32")
    table = page.locator("#harnesses")
    before = column(page, "harnesses", 0)
    assert before == sorted(before)
    cpu = [c.inner_text() for c in table.locator("th").all()].index("cpu")
    table.locator("th").nth(cpu).click()  # by cpu status: ascending severity, the failure last
    assert table.locator("th").nth(cpu).get_attribute("aria-sort") == "ascending"
    assert column(page, "harnesses", cpu)[-1] == "fail"
    table.locator("th").nth(cpu).click()
    assert table.locator("th").nth(cpu).get_attribute("aria-sort") == "descending"
    assert column(page, "harnesses", cpu)[0] == "fail"
    assert f"#sort=harnesses.{cpu}.desc" in page.url
    page.screenshot(path=str(SHOTS / "13-sorted-overview.png"), full_page=True)
    # The fragment is a deep link: a fresh load applies the order again.
    page.goto(base + "/trends")
    page.goto(base + f"/?dtype=float32#sort=harnesses.{cpu}.desc")
    assert column(page, "harnesses", cpu)[0] == "fail"

    # Numbers sort as numbers (with their units) on the harness page's stages table.
    page.goto(base + f"/harness/{dbs['two']['fp']['exp']}")
    stages = page.locator("#stages")
    time_col = [c.inner_text() for c in stages.locator("th").all()].index("time")
    stages.locator("th").nth(time_col).click()
    stages.locator("th").nth(time_col).click()  # descending: the slowest first
    texts = column(page, "stages", time_col)
    scale = {"µs": 1e-6, "ms": 1e-3, "s": 1.0}
    secs = [float(t.split()[0]) * scale[t.split()[1]] if " " in t else float(t or 0) for t in texts]
    assert secs == sorted(secs, reverse=True) and secs[0] > 0


def test_first_run_has_no_dead_links(page: Any, serve: Callable[[str], str], dbs: dict[str, Any]) -> None:
    base = serve(dbs["one"])
    page.goto(base + "/")
    assert "comparing needs a second run" in page.locator("#compare-needs").inner_text()
    page.screenshot(path=str(SHOTS / "15-first-run-overview.png"), full_page=True)
    # Every link on the first-run pages answers 200: none is a dead "Compare" link.
    seen: set[str] = set()
    for path in ("/", "/trends", "/compare", "/runs", "/search?q=sin"):
        page.goto(base + path)
        hrefs = page.locator("main a[href], nav a[href]").evaluate_all("as => as.map(a => a.href)")
        for href in hrefs:
            href = href.split("#")[0]
            if href.startswith(base) and "/artifacts/" not in href and href not in seen:
                seen.add(href)
                r = page.request.get(href)
                assert r.status == 200, (path, href, r.status)
    assert any("/compare" in h for h in seen)
    page.goto(base + "/compare")
    assert "Comparison needs two runs" in page.locator("#compare-needs").inner_text()
    page.screenshot(path=str(SHOTS / "17-first-run-compare.png"), full_page=True)
    page.goto(base + "/trends")
    assert page.locator("#one-run").is_visible()
    page.screenshot(path=str(SHOTS / "16-first-run-trends.png"), full_page=True)
