"""Static against symbolic shapes in Debian's chromium (Playwright, headless) against a real
server over a real `farm sweep --shapes static,symbolic` of sin and cumsum (float32) with
sin planted wrong for symbolic shapes on tpu (tests.helpers.shapes): from the overview's
shapes filter to sin's page, whose side-by-side table shows tpu static ok, symbolic fail at
b = 1 with the error; its shapes filter keeps the stage table to the symbolic stages."""
from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.browser import ARGS, CHROMIUM, SHOTS, pytestmark  # noqa: F401 (markers, skip)
from tests.helpers.shapes import RUN, make_shapes_db


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from werkzeug.serving import make_server

    from dashboards.app import create_app

    db = make_shapes_db(str(tmp_path_factory.mktemp("shapes-browser") / "farm.db"))
    app = create_app(db["url"])
    srv = make_server("127.0.0.1", 0, app, threaded=True)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield {**db, "base": f"http://127.0.0.1:{srv.server_port}"}
    srv.shutdown()
    t.join(5)
    app.config["STORE"].dispose()


@pytest.mark.slow(reason="a static,symbolic sweep, then Chromium over its pages")
def test_static_against_symbolic_side_by_side(served: dict[str, Any]) -> None:
    pw = pytest.importorskip("playwright.sync_api")
    SHOTS.mkdir(exist_ok=True)
    errors: list[str] = []
    with pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(15_000)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(served["base"] + f"/?run={RUN}")
        page.select_option("form.filters select[name=shapes]", "symbolic")
        page.locator("form.filters button[type=submit]").click()
        page.wait_for_url("**shapes=symbolic**")
        assert page.locator("#shapes-shown").inner_text() == "symbolic shapes"
        page.locator("#harnesses").get_by_role("link", name=served["sin_name"]).click()
        page.wait_for_url("**/harness/**")
        table = page.locator("#static-vs-symbolic")
        assert table.is_visible()
        assert table.locator("tr[data-platform]").count() == 4
        tpu = table.locator('tr[data-platform="tpu"]')
        assert tpu.locator("td.static").inner_text().strip() == "ok"
        assert tpu.locator("td.symbolic").inner_text().startswith("fail")
        assert tpu.locator("td.size").inner_text().strip() == "b=1,d3=3,d4=4"
        assert "12 of 12 elements differ from the float64 reference" in tpu.inner_text()
        assert table.locator('tr[data-platform="cpu"] td.symbolic').inner_text().strip() == "ok"
        page.screenshot(path=str(SHOTS / "static_vs_symbolic.png"), full_page=True)
        page.select_option("#shapes-form select[name=shapes]", "symbolic")
        page.locator("#shapes-form button").click()
        page.wait_for_url("**shapes=symbolic**")
        stages = set(page.locator("#stages tr td:first-child").all_inner_texts())
        assert stages == {"symbolic_export", "symbolic_serialize", "symbolic_call"}
        assert page.locator("#static-vs-symbolic").is_visible()  # the comparison stays whole
        browser.close()
    assert not errors, errors
