"""The Failures page in Debian's chromium (Playwright, headless) against a real server:
from the navigation to the clusters of a configuration sweep, then to a harness of one;
nothing injected by error text. The database is tests/test_triage.py's (the farm's own
writer on SQLite) with a failure whose error text is a script."""
from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.browser import ARGS, CHROMIUM, SHOTS, pytestmark  # noqa: F401 (markers, skip)
from tests.helpers.triage import ENV, EVIL, HARNESSES, PLATFORMS, outcome  # noqa: F401


@pytest.fixture
def base_url(triage_db: str) -> Iterator[str]:  # noqa: F811
    from werkzeug.serving import make_server

    from dashboards.app import create_app
    from farm.results import Record
    from farm.store import open_store, writes

    store = open_store(triage_db)
    with store.session() as s:
        run = writes.create_run(s, env=ENV, name="evil", platforms=PLATFORMS, run_on=["cpu"], total=1)
        writes.Writer(s, run, writes.harness_ids(s, HARNESSES)).write(
            [outcome("sin_f32", Record("compare", "cpu", "error", error_type="RuntimeError", error=EVIL))])
        writes.finish_run(s, run, "finished")
    store.dispose()
    app = create_app(triage_db)
    srv = make_server("127.0.0.1", 0, app, threaded=True)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()
    t.join(5)
    app.config["STORE"].dispose()


def test_failures_page_from_the_navigation_to_a_harness(base_url: str) -> None:
    pw = pytest.importorskip("playwright.sync_api")
    SHOTS.mkdir(exist_ok=True)
    errors: list[str] = []
    with pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(15_000)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
        page.goto(base_url + "/failures?run=evil")
        assert page.locator("#clusters tr.cluster").count() == 1
        assert EVIL in page.locator("#clusters").inner_text()  # shown as text, not run
        page.get_by_role("link", name="Failures", exact=True).click()
        page.fill("input[name=run]", "n")
        page.get_by_role("button", name="show").click()
        page.wait_for_url("**/failures?run=n")
        rows = page.locator("#clusters tr.cluster")
        assert rows.count() == 3 and page.locator("#clusters tr.cluster.new").count() == 3
        assert "farm repro reshape_a --run n@x64=off --platform cpu" in page.locator("#clusters").inner_text()
        page.screenshot(path=str(SHOTS / "failures.png"), full_page=True)
        page.locator("#clusters").get_by_role("link", name="reshape_b").click()
        page.wait_for_url("**/harness/**")
        assert "reshape_b" in page.title() or page.locator("h1", has_text="reshape_b").count() == 1
        browser.close()
    assert not errors, errors
