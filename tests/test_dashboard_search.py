"""Harness search (server-side, in the URL) over two real sweeps (tests.test_dashboard's
database): words, run, status and platform filters, order, pages and checked parameters."""
from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.dashboard import dashboard_fixtures, html


farm_db, app, client = dashboard_fixtures("search")


def names(client: Any, query: str) -> list[str]:
    d = client.get(f"/search.json?{query}").get_json()
    assert d["pager"]["total"] >= len(d["harnesses"])
    return [h["name"] for h in d["harnesses"]]


def test_every_word_must_match_case_insensitively(client: Any) -> None:
    assert names(client, "q=sin") == ["asinh_float32_3x4", "sin_float32_3x4"]  # a substring of asinh too
    assert names(client, "q=SIN+float32") == ["asinh_float32_3x4", "sin_float32_3x4"]
    assert names(client, "q=asinh+3x4") == ["asinh_float32_3x4"]
    assert names(client, "q=sin+float64") == []
    assert names(client, "q=%25") == [] and names(client, "q=s_n") == []  # LIKE wildcards are literal
    assert len(names(client, "")) == 4  # no text: every harness of the run


def test_status_and_platform_filters_find_the_planted_failure(client: Any, farm_db: dict[str, Any]) -> None:
    assert names(client, "status=fail&platform=cpu") == ["sin_float32_3x4"]  # sin's cpu execute, planted
    assert names(client, f"status=fail&platform=cpu&run={farm_db['base']}") == []  # not in the base run
    d = client.get("/search.json?q=sin_float32").get_json()
    row = {h["name"]: h for h in d["harnesses"]}["sin_float32_3x4"]
    assert row["platforms"]["cpu"] == "fail" and d["run"]["id"] == farm_db["head"]


def test_order_and_pages_stay_in_the_url(app: Any, client: Any) -> None:
    assert names(client, "sort=-name") == sorted(names(client, "sort=name"), reverse=True)
    app.config["PAGE_SIZE"] = 3
    try:
        page = html(client.get("/search?q=float32&sort=-name"))
        assert "4 harnesses matching <b>float32</b>" in " ".join(page.split())
        # The next-page link keeps the text and the order.
        assert 'href="/search?q=float32&amp;sort=-name&amp;page=2"' in page
        assert names(client, "q=float32&sort=-name&page=2") == ["add_float32_3x4_3x4"]
    finally:
        app.config["PAGE_SIZE"] = None


def test_results_link_to_the_harness_in_that_run(client: Any, farm_db: dict[str, Any]) -> None:
    page = html(client.get(f"/search?q=asinh&run={farm_db['base']}"))
    assert f'href="/harness/{farm_db["fp"]["asinh"]}?run={farm_db["base"]}"' in page
    # The header's search box is on every page.
    assert 'action="/search"' in html(client.get("/runs"))


@pytest.mark.parametrize("query", ["sort=size", "status=bogus", "platform=gpu", "q=" + "x" * 201,
                                   "q=" + "+".join("abcdefghi"), "page=0", "primitive=sin", "run=nope"])
def test_bad_parameters_are_one_line_errors(client: Any, query: str) -> None:
    r = client.get(f"/search.json?{query}")
    assert r.status_code in (400, 404) and "\n" not in r.get_json()["error"]
