"""The dashboard in Debian's chromium (Playwright, headless) against a real server over
a database filled by two real sweeps: overview → harness → module text → compare.

Screenshots land in test-artifacts/ (gitignored)."""
from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.browser import ARGS, CHROMIUM, SHOTS, pytestmark  # noqa: F401 (markers, skip)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A werkzeug server on 127.0.0.1:<random port> in a thread, over a freshly swept DB."""
    from werkzeug.serving import make_server

    from dashboards.app import create_app
    from tests.helpers.dashboard import TOKEN, shared_db

    db = shared_db(tmp_path_factory, "browser")
    app = create_app(db["url"], token=TOKEN)
    srv = make_server("127.0.0.1", 0, app, threaded=True)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield {**db, "base_url": f"http://127.0.0.1:{srv.server_port}"}
    finally:
        srv.shutdown()
        t.join(5)
        app.config["STORE"].dispose()


@pytest.fixture(scope="module")
def page(server: dict[str, Any]) -> Iterator[Any]:
    pw = pytest.importorskip("playwright.sync_api")
    SHOTS.mkdir(exist_ok=True)
    with pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        ctx = browser.new_context(viewport={"width": 1280, "height": 900})
        pg = ctx.new_page()
        pg.set_default_timeout(15_000)
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
        yield pg
        ctx.close()
        browser.close()
        assert not errors, errors  # no script ran: nothing injected, no alert()


def test_overview_to_harness_to_module_to_compare(page: Any, server: dict[str, Any]) -> None:
    base = server["base_url"]
    page.goto(base + "/")
    assert page.title() == "Overview · Lowering Farm"
    matrix = page.locator("#matrix")
    assert matrix.locator("th", has_text="asinh").count() == 1
    assert matrix.locator("td.st-fail").count() == 1  # sin on cpu: the planted failure
    page.screenshot(path=str(SHOTS / "01-overview.png"), full_page=True)

    # Drill down: primitive asinh -> dtype matrix and its harness list.
    matrix.get_by_role("link", name="asinh", exact=True).click()
    page.wait_for_url("**/?primitive=asinh*")
    assert page.locator("#matrix th", has_text="float32").count() == 1
    page.screenshot(path=str(SHOTS / "02-overview-asinh.png"), full_page=True)
    page.locator("#harnesses").get_by_role("link", name="asinh_float32_3x4").click()

    # Harness detail: definition, stages, highlighted module, history plots.
    page.wait_for_url(f"**/harness/{server['fp']['asinh']}*")
    assert "lowers to chlo.asinh" in page.locator("#definition").inner_text()
    assert page.locator("#stages tr").count() > 15
    assert page.locator("#module-cpu .hl-chlo", has_text="chlo.asinh").first.is_visible()
    assert page.locator("#history svg").count() == 4
    page.screenshot(path=str(SHOTS / "03-harness.png"), full_page=True)

    # Module text, full page.
    page.locator("#module-cpu").get_by_role("link", name="full page").click()
    page.wait_for_url("**/module/cpu*")
    text = page.locator("#module-text").inner_text()
    assert "module @jit_asinh" in text and "chlo.asinh" in text
    assert page.locator("#module-text .hl-chlo").count() >= 1
    page.screenshot(path=str(SHOTS / "04-module.png"), full_page=True)

    # Compare: pick the two runs on the Runs page.
    page.get_by_role("link", name="Runs", exact=True).click()
    page.wait_for_url("**/runs")
    assert page.locator("#runs input[name=base]").count() == 2
    page.locator("#pick button[type=submit]").click()
    page.wait_for_url("**/compare?*")
    flips = page.locator("#flips")
    row = flips.locator("tr.flip-regression", has_text="sin_float32_3x4")
    assert row.count() == 1
    # The planted error string is shown as text, never run.
    assert '<script>alert("pwned")</script> & <b>bold</b>' in row.inner_text()
    assert "2 regressions" in page.locator("#summary").inner_text().replace("\n", " ")
    page.screenshot(path=str(SHOTS / "05-compare.png"), full_page=True)

    # Accept the regression with the token through the form.
    row.locator("input[name=token]").fill("t0ken-for-tests")
    row.get_by_role("button", name="accept").click()
    page.wait_for_url("**/compare?*")
    assert "accepted" in page.locator("#flips tr.flip-regression", has_text="sin_float32_3x4").inner_text()


def test_other_pages_render(page: Any, server: dict[str, Any]) -> None:
    base = server["base_url"]
    page.goto(base + "/coverage")
    assert page.locator("#coverage td.stale").count() == 1
    page.screenshot(path=str(SHOTS / "06-coverage.png"), full_page=True)
    page.goto(base + "/boundary")
    assert "chlo.asinh" in page.locator("#ops").inner_text()
    page.screenshot(path=str(SHOTS / "07-boundary.png"), full_page=True)
    page.goto(base + "/runs")
    assert page.locator("#runs tr").count() == 3
    page.screenshot(path=str(SHOTS / "08-runs.png"), full_page=True)
    resp = page.goto(f"{base}/artifacts/{server['corrupt']}")
    assert resp.status == 500
    assert "is corrupt" in page.locator("#error-message").inner_text()
    page.screenshot(path=str(SHOTS / "09-corrupt-artifact.png"), full_page=True)
    page.goto(f"{base}/harness/{server['fp']['asinh']}/diff?platform=cpu")
    assert "identical in both runs" in page.locator("#identical").inner_text()
