"""The Accuracy page: heat map, drill-down, versions, JSON, and no stale cached page after
a new measurement."""
from __future__ import annotations

from typing import Any

from dashboards.app import create_app
from farm.store import accuracy as S
from farm.store import open_store


def _row(p: str, d: str, plat: str, m: float) -> dict[str, Any]:
    return {"primitive": p, "dtype": d, "platform": plat, "n": 65536, "max_ulp": m, "max_ulp_normal": m,
            "distribution": {"0": 10, "<=0.5": 5, "<=1": 0, "<=2": 0, "<=4": 0, ">4": 1 if m > 4 else 0},
            "worst": [{"x": [-0.41373577106448634], "got": -0.5339846884108188, "exact": -0.5339846884108327, "ulp": m}],
            "special": {"nan": [1, 1], "inf": [2, 2], "signed_zero": [2, 2], "finite": [16, 16], "agree": True},
            "error": None, "seconds": 0.1}


def test_accuracy_page(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    app = create_app(sqlite_url)
    client = app.test_client()
    r = client.get("/accuracy")
    assert r.status_code == 200 and "No accuracy table" in r.get_data(as_text=True)
    with store.session() as s:
        S.put(s, "0.9.2", "0.9.2", "k", [_row("log1p", "float64", "cpu", 1.1), _row("exp", "float16", "cpu", 0.5)])
    r = client.get("/accuracy")  # a new table is a new page, never the cached empty one
    page = r.get_data(as_text=True)
    assert r.status_code == 200 and "<svg" in page and "log1p" in page
    with store.session() as s:
        S.put(s, "0.10.2", "0.10.2", "k", [_row("log1p", "float64", "cpu", 125.0), _row("exp", "float16", "cpu", 0.5)])
    j = client.get("/accuracy.json").get_json()
    assert j["jax"] == "0.10.2" and j["previous"] == "0.9.2"
    assert [(m["primitive"], m["change"]) for m in j["moved"]] == [("log1p", "worse")]
    assert {c["primitive"]: c["max_ulp"] for c in j["cells"]} == {"log1p": 125.0, "exp": 0.5}
    page = client.get("/accuracy?primitive=log1p").get_data(as_text=True)
    assert 'id="accuracy-drill"' in page and "-0.41373577106448634" in page and "0.9.2" in page
    j = client.get("/accuracy.json?primitive=log1p&jax=0.9.2").get_json()
    assert j["drill"]["rows"][0]["max_ulp"] == 1.1
    assert [h["max_ulp"] for h in j["drill"]["history"]] == [1.1, 125.0]
    assert client.get("/accuracy?jax=9.9").status_code in (400, 404)
    assert client.get("/accuracy?stauts=x").status_code == 400
    assert 'href="/accuracy"' in client.get("/runs").get_data(as_text=True)
    app.config["STORE"].dispose()
    store.dispose()
