"""The web dashboard over a database filled by real sweeps (Flask's test client)."""
from __future__ import annotations

import hashlib
from typing import Any

import pytest
from sqlalchemy import event

from tests.helpers.dashboard import EVIL, TOKEN, dashboard_fixtures, html, shared_db

farm_db, app, client = dashboard_fixtures("dash")


# --------------------------------------------------------------------------- overview
def test_overview_matrix_colours_worst_status(client: Any, farm_db: dict[str, Any]) -> None:
    r = client.get("/")
    assert r.status_code == 200
    page = html(r)
    for prim in ("sin", "exp", "asinh", "add"):
        assert f">{prim}</a>" in page
    # sin's planted execute failure makes its cpu cell "fail", counts on hover.
    assert 'class="cell st-fail" title="fail 1, ok ' in page
    assert 'class="cell st-expected_fail"' in page  # asinh: chlo.asinh is a known limitation


def test_overview_json_twin_has_the_same_context(client: Any, farm_db: dict[str, Any]) -> None:
    d = client.get("/overview.json").get_json()
    assert d["run"]["id"] == farm_db["head"]
    assert d["by"] == "primitive"
    assert d["matrix"]["sin"]["cpu"]["worst"] == "fail"
    assert d["matrix"]["sin"]["cpu"]["counts"]["fail"] == 1
    assert set(d["platforms"]) >= {"cpu", "cuda", "rocm", "tpu"}


def test_overview_filters_in_url_drill_down_to_dtype(client: Any, farm_db: dict[str, Any]) -> None:
    d = client.get("/overview.json?primitive=sin&platform=cpu").get_json()
    assert d["by"] == "dtype" and list(d["matrix"]) == ["float32"]
    assert d["platforms"] == ["cpu"]
    assert [h["name"] for h in d["harnesses"]] == ["sin_float32_3x4"]
    page = html(client.get("/?primitive=sin"))
    assert f'/harness/{farm_db["fp"]["sin"]}?run={farm_db["head"]}' in page
    assert html(client.get("/?status=unexpected_pass")).count("/harness/") == 1  # only add


def test_overview_paginates_harnesses(app: Any, farm_db: dict[str, Any]) -> None:
    app.config["PAGE_SIZE"] = 3
    try:
        c = app.test_client()
        p1 = c.get("/overview.json?dtype=float32").get_json()
        p2 = c.get("/overview.json?dtype=float32&page=2").get_json()
        assert p1["pager"] == {"page": 1, "size": 3, "total": 4, "pages": 2}
        assert len(p1["harnesses"]) == 3 and len(p2["harnesses"]) == 1
        assert "next →" in html(c.get("/?dtype=float32"))
    finally:
        app.config["PAGE_SIZE"] = None


def test_pages_use_a_bounded_number_of_queries(app: Any, farm_db: dict[str, Any]) -> None:
    engine = app.config["STORE"].engine
    seen: list[str] = []
    listener = lambda *a: seen.append(a[2])  # noqa: E731
    event.listen(engine, "before_cursor_execute", listener)
    try:
        c = app.test_client()
        for url in ("/?dtype=float32", "/runs", "/coverage", "/boundary", "/compare"):
            seen.clear()
            assert c.get(url).status_code == 200
            assert len(seen) <= 13, (url, len(seen))  # 12 for the page, 1 for its validator (dashboards.cache)
    finally:
        event.remove(engine, "before_cursor_execute", listener)


# --------------------------------------------------------------------------- runs and compare
def test_runs_list_environment_duration_totals(client: Any, farm_db: dict[str, Any]) -> None:
    d = client.get("/runs.json").get_json()
    assert [r["id"] for r in d["runs"]] == [farm_db["head"], farm_db["base"]]
    r = d["runs"][0]
    assert r["total"] == 4 and r["done"] == 4 and r["duration_s"] > 0
    assert r["environment"]["jax_version"]
    page = html(client.get("/runs"))
    assert 'name="base"' in page and 'name="head"' in page and "jax " in page


def test_compare_reports_the_planted_regression(client: Any, farm_db: dict[str, Any]) -> None:
    from farm.analysis import FORMAT_VERSION

    d = client.get(f"/compare.json?base={farm_db['base']}&head={farm_db['head']}").get_json()
    flips = {(f["harness"], f["platform"], f["stage"]): f for f in d["report"]["flips"]}
    f = flips[("sin_float32_3x4", "cpu", "execute")]
    assert (f["before"], f["after"], f["kind"]) == ("ok", "fail", "regression")
    stale = flips[("add_float32_3x4_3x4", "cpu", "compare")]  # a stale limitation is a finding too
    assert (stale["before"], stale["after"], stale["kind"]) == ("ok", "unexpected_pass", "regression")
    assert d["report"]["summary"]["regression"] == 2 and d["report"]["summary"]["compared"] > 50
    assert d["report"]["source"] == "farm.analysis" and d["report"]["analysis"]["format_version"] == FORMAT_VERSION
    page = html(client.get("/compare"))  # defaults: previous -> latest
    assert "sin_float32_3x4" in page and 'class="flip-regression"' in page


def test_error_strings_are_escaped(client: Any, farm_db: dict[str, Any]) -> None:
    for url in ("/compare", f"/harness/{farm_db['fp']['sin']}"):
        page = html(client.get(url))
        assert "<script>alert" not in page and "<b>bold</b>" not in page, url
        assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in page, url
    flips = client.get("/compare.json").get_json()["report"]["flips"]
    assert [f["error"] for f in flips if f["harness"] == "sin_float32_3x4"] == [EVIL]


def test_write_endpoint_requires_the_token(client: Any, farm_db: dict[str, Any]) -> None:
    form = {"base": farm_db["base"], "head": farm_db["head"], "fingerprint": farm_db["fp"]["sin"],
            "platform": "cpu", "stage": "execute"}
    assert client.post("/compare/accept", data=form).status_code == 403
    assert client.post("/compare/accept", data={**form, "token": "wrong"}).status_code == 403
    assert client.post("/compare/accept", data=form, headers={"Authorization": "Bearer nope"}).status_code == 403
    assert not any(f["accepted"] for f in client.get("/compare.json").get_json()["report"]["flips"])
    r = client.post("/compare/accept", data=form, headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 201
    r = client.post("/compare/accept", data={**form, "token": TOKEN})  # the HTML form
    assert r.status_code == 303
    flips = client.get("/compare.json").get_json()["report"]["flips"]
    assert [f["harness"] for f in flips if f["accepted"]] == ["sin_float32_3x4"]
    assert "✔ accepted" in html(client.get("/compare"))
    assert client.get("/compare/accept").status_code == 405


def test_read_only_without_a_token(farm_db: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from dashboards.app import create_app

    monkeypatch.delenv("FARM_TOKEN", raising=False)
    app = create_app(farm_db["url"])
    try:
        c = app.test_client()
        r = c.post("/compare/accept", data={"token": ""}, headers={"Accept": "application/json"})
        assert r.status_code == 403 and "read-only" in r.get_json()["error"]
        assert "read-only" in html(c.get("/runs"))
    finally:
        app.config["STORE"].dispose()


# --------------------------------------------------------------------------- harness
def test_harness_detail_definition_stages_modules_history(client: Any, farm_db: dict[str, Any]) -> None:
    fp = farm_db["fp"]["asinh"]
    page = html(client.get(f"/harness/{fp}"))
    assert "asinh_float32_3x4" in page and "[[3, 4]]" in page
    assert "lowers to chlo.asinh, which crosses the plugin boundary" in page  # the limitation
    assert '<span class="hl-chlo" title="not StableHLO: crosses the plugin boundary">chlo.asinh</span>' in page
    assert page.count('<details class="module"') == 4  # cpu, cuda, rocm, tpu
    assert 'aria-label="compile time"' in page and 'aria-label="status history"' in page
    d = client.get(f"/harness/{fp}.json").get_json()
    stages = {(r["stage"], r["platform"]): r for r in d["results"]}
    assert stages[("compile", "cpu")]["metrics"]["compile_s"] > 0
    assert d["modules"]["cpu"]["non_stablehlo"] == ["chlo.asinh"]
    assert "chlo.asinh" in d["modules"]["cpu"]["text"]
    assert "export" in [a["kind"] for a in d["artifacts"]]
    assert len(d["history"]["runs"]) == 2 and {r["series"] for r in d["history"]["compile_s"]} == {"cpu"}
    assert {r["run"] for r in d["history"]["compile_s"]} == set(d["history"]["runs"])
    # The plots are Vega's SVG, rendered on the server: a line per platform, a cell per status.
    figure = page[page.index('aria-label="compile time"'):]
    assert figure.index("<svg") < figure.index("</figure>") and 'class="marks"' in figure[:400]
    grid = page[page.index('aria-label="status history"'):]
    assert "compare@cpu" in grid[:grid.index("</figure>")]


def test_module_page_and_diff_between_runs(client: Any, farm_db: dict[str, Any]) -> None:
    fp = farm_db["fp"]["asinh"]
    d = client.get(f"/harness/{fp}/module/tpu.json").get_json()
    assert d["module"]["sha256"] == farm_db["asinh_module"] and d["platforms"] == ["cpu", "cuda", "rocm", "tpu"]
    assert 'id="module-text"' in html(client.get(f"/harness/{fp}/module/cpu"))
    assert client.get(f"/harness/{fp}/module/nowhere").status_code == 404
    diff = client.get(f"/harness/{fp}/diff.json?platform=cpu").get_json()
    assert diff["identical"] and diff["diff"] == []
    assert "identical in both runs" in html(client.get(f"/harness/{fp}/diff?platform=cpu"))


def test_unknown_run_and_harness_are_404(client: Any) -> None:
    for url in ("/?run=no-such-run", "/harness/0123456789abcdef0123", "/compare?base=no-such-run",
                "/coverage?run=77"):
        r = client.get(url)
        assert r.status_code == 404, url
        assert 'id="error-message"' in html(r)
    r = client.get("/overview.json?run=no-such-run")
    assert r.status_code == 404 and "no run 'no-such-run'" in r.get_json()["error"]
    assert client.get("/harness/0123456789abcdef0123.json").get_json()["status"] == 404


# --------------------------------------------------------------------------- artifacts
def test_artifact_download_is_verified(client: Any, farm_db: dict[str, Any]) -> None:
    sha = farm_db["asinh_module"]
    r = client.get(f"/artifacts/{sha}")
    assert r.status_code == 200 and hashlib.sha256(r.data).hexdigest() == sha
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    for bad in ("../../../etc/passwd", "..%2F..%2Fetc%2Fpasswd", "ABC", sha.upper(), "0" * 64):
        assert client.get(f"/artifacts/{bad}").status_code == 404, bad


def test_corrupt_artifact_is_an_error_page(client: Any, farm_db: dict[str, Any]) -> None:
    r = client.get(f"/artifacts/{farm_db['corrupt']}")
    assert r.status_code == 500
    assert "ArtifactCorrupt" in html(r) and "is corrupt: content hashes to" in html(r)
    # The harness page still renders, with the error where the module text would be.
    page = html(client.get(f"/harness/{farm_db['fp']['exp']}"))
    assert "is corrupt: content hashes to" in page
    assert client.get(f"/harness/{farm_db['fp']['exp']}/module/cpu.json").get_json()["module"]["text"] is None


# --------------------------------------------------------------------------- coverage and boundary
def test_coverage_marks_stale_limitations(client: Any, farm_db: dict[str, Any]) -> None:
    d = client.get("/coverage.json").get_json()
    cells = {(r["primitive"], r["dtype"]): r["platforms"] for r in d["rows"]}
    assert cells[("add", "float32")]["cpu"]["stale"] is True
    assert cells[("sin", "float32")]["cpu"]["stale"] is False
    assert [x["harness"] for x in d["stale"]] == ["add_float32_3x4_3x4"]
    page = html(client.get("/coverage"))
    assert "cell st-unexpected_pass stale" in page and 'id="stale"' in page
    assert client.get("/coverage.json?primitive=sin").get_json()["stale"] == []


def test_boundary_lists_non_stablehlo_ops_per_platform(client: Any) -> None:
    d = client.get("/boundary.json").get_json()
    assert {r["harness"] for r in d["rows"]} == {"asinh_float32_3x4"}
    assert sorted(r["platform"] for r in d["rows"]) == ["cpu", "cuda", "rocm", "tpu"]
    assert d["ops"] == {"chlo.asinh": ["asinh_float32_3x4"]}
    assert "chlo.asinh" in html(client.get("/boundary"))


# --------------------------------------------------------------------------- API
def test_openapi_describes_every_json_twin(client: Any, farm_db: dict[str, Any]) -> None:
    spec = client.get("/openapi.json").get_json()
    assert spec["openapi"].startswith("3.")
    fp = farm_db["fp"]["asinh"]
    for path in spec["paths"]:
        if path.endswith(".json"):
            url = path.replace("{fp}", fp).replace("{platform}", "cpu")
            r = client.get(url)
            assert r.status_code == 200 and r.is_json, path
    assert spec["paths"]["/compare/accept"]["post"]["security"] == [{"token": []}]


def test_highlight_escapes_before_marking() -> None:
    from dashboards.views import highlight

    out = str(highlight('%0 = chlo.erf_inv %a\n"<img src=x onerror=alert(1)>" stablehlo.custom_call @evil_target(%0)',
                        unguaranteed=["evil_target"]))
    assert "<img" not in out and "&lt;img src=x" in out
    assert '<span class="hl-chlo"' in out and "chlo.erf_inv</span>" in out
    assert '<span class="hl-cc hl-cc-bad" title="custom call">stablehlo.custom_call @evil_target</span>' in out


def test_every_view_module_is_a_registered_page() -> None:
    """``dashboards.app.PAGES`` is what create_app registers: a view module left out of it
    would serve nothing."""
    from pathlib import Path

    from dashboards.app import PAGES

    views = Path(__file__).resolve().parents[1] / "dashboards" / "views"
    assert sorted(PAGES) == sorted(p.stem for p in views.glob("*.py") if p.stem != "__init__")


def test_each_caller_of_the_shared_database_gets_a_whole_copy_of_its_own(farm_db, tmp_path_factory) -> None:  # noqa: ANN001
    """``shared_db`` sweeps once per test session and copies: a copy holds every row, and what
    one module writes no other module's copy sees."""
    import sqlite3

    other = shared_db(tmp_path_factory, "other")
    assert other["url"] != farm_db["url"] and {k: v for k, v in other.items() if k != "url"} == \
        {k: v for k, v in farm_db.items() if k != "url"}
    mine, theirs = (sqlite3.connect(d["url"].removeprefix("sqlite:///")) for d in (farm_db, other))
    try:
        count = "SELECT count(*) FROM stored_results"
        n = mine.execute(count).fetchone()[0]
        assert n > 0 and theirs.execute(count).fetchone()[0] == n
        theirs.execute("DELETE FROM stored_results")
        theirs.commit()
        assert theirs.execute(count).fetchone()[0] == 0 and mine.execute(count).fetchone()[0] == n
    finally:
        mine.close()
        theirs.close()
