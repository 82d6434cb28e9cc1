"""The dashboard's shapes faces (Flask's test client) over a real `farm sweep --shapes
static,symbolic` of sin and cumsum with sin wrong only for symbolic shapes on tpu: the
``shapes`` filter (static | symbolic | both) on the overview, the failures and the harness
pages and their JSON twins, and the harness page's static-against-symbolic table with the
failing size and error. Without the filter every page is what it was."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from farm.results import SYMBOLIC_STAGES
from tests.helpers.dashboard import html
from tests.helpers.shapes import RUN, make_shapes_db

pytestmark = pytest.mark.slow  # a real sweep in its own process


@pytest.fixture(scope="module")
def shapes_db(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return make_shapes_db(str(tmp_path_factory.mktemp("shapes") / "farm.db"))


@pytest.fixture(scope="module")
def client(shapes_db: dict[str, Any]) -> Iterator[Any]:
    from dashboards.app import create_app

    app = create_app(shapes_db["url"])
    yield app.test_client()
    app.config["STORE"].dispose()


@pytest.mark.slow(reason="its module fixture runs a static,symbolic sweep in its own process")
def test_overview_matrix_by_shapes(client: Any) -> None:
    both = client.get(f"/overview.json?run={RUN}").get_json()
    static = client.get(f"/overview.json?run={RUN}&shapes=static").get_json()
    symbolic = client.get(f"/overview.json?run={RUN}&shapes=symbolic").get_json()
    assert both["matrix"]["sin"]["tpu"]["worst"] == "fail"  # no filter: every record, as before
    assert static["matrix"]["sin"]["tpu"]["worst"] == "ok"  # the static lowering is right
    assert symbolic["matrix"]["sin"]["tpu"]["worst"] == "fail"
    assert symbolic["matrix"]["sin"]["cpu"]["worst"] == "ok" and symbolic["matrix"]["cumsum"]["tpu"]["worst"] == "ok"
    assert "any" in static["platforms"] and "any" not in symbolic["platforms"]  # trace is a static stage
    n = lambda d: sum(sum(c["counts"].values()) for cells in d["matrix"].values() for c in cells.values())  # noqa: E731
    assert n(static) + n(symbolic) == n(both) and n(static) and n(symbolic)
    assert both["harnesses"] == [] and {h["name"] for h in symbolic["harnesses"]} == set(_names(client))
    sin = next(h for h in symbolic["harnesses"] if h["primitive"] == "sin")
    assert sin["platforms"]["tpu"] == "fail" and "any" not in sin["platforms"]
    page = html(client.get(f"/?run={RUN}&shapes=symbolic"))
    assert 'id="shapes-shown"' in page and '<option value="symbolic" selected>' in page and 'id="harnesses"' in page


def _names(client: Any) -> list[str]:
    return [h["name"] for h in client.get(f"/overview.json?run={RUN}&primitive=sin,cumsum").get_json()["harnesses"]]


def test_no_filter_is_the_page_it_was(client: Any) -> None:
    plain = client.get(f"/overview.json?run={RUN}").get_json()
    assert plain == client.get(f"/overview.json?run={RUN}&shapes=both").get_json()
    assert plain["shapes"] == "both" and plain["harnesses"] == []  # no filter: no harness list, as before
    page = html(client.get(f"/?run={RUN}"))
    assert 'id="shapes-shown"' not in page and 'id="harnesses"' not in page
    assert '<select name="shapes"' in page  # a run swept with --shapes symbolic offers the filter


def test_a_shapes_value_that_does_not_exist_is_a_400(client: Any) -> None:
    for url in ("/?shapes=dynamic", "/failures.json?shapes=dynamic", "/overview.json?shapes=Static"):
        r = client.get(url)
        assert r.status_code == 400, url
    assert "static" in client.get("/failures.json?shapes=dynamic").get_json()["error"]


def test_failures_by_shapes_and_the_symbolic_only_label(client: Any) -> None:
    every = client.get(f"/failures.json?run={RUN}").get_json()
    symbolic = client.get(f"/failures.json?run={RUN}&shapes=symbolic").get_json()
    static = client.get(f"/failures.json?run={RUN}&shapes=static").get_json()
    assert static["clusters"] == [] and static["failing_records"] == 0
    [c] = symbolic["clusters"]
    assert c["signature"]["stage"] == "symbolic_call" and c["signature"]["scope"] == "symbolic-only on tpu"
    assert c["platforms"] == ["tpu"] and "<symbolic-only on tpu>" in c["summary"]
    assert [x["key"] for x in every["clusters"]] == [c["key"]]
    page = html(client.get(f"/failures?run={RUN}&shapes=symbolic"))
    assert '<span class="badge scope"' in page and "symbolic-only on tpu" in page
    assert "Nothing failed" in html(client.get(f"/failures?run={RUN}&shapes=static"))


def test_harness_page_static_against_symbolic(client: Any, shapes_db: dict[str, Any]) -> None:
    d = client.get(f"/harness/{shapes_db['sin']}.json?run={RUN}").get_json()
    by = {row["platform"]: row for row in d["static_vs_symbolic"]}
    assert sorted(by) == ["cpu", "cuda", "rocm", "tpu"]
    tpu = by["tpu"]
    assert tpu["static"]["status"] == "ok" and tpu["symbolic"]["status"] == "fail" and tpu["differ"]
    assert tpu["symbolic"]["stage"] == "symbolic_call" and tpu["symbolic"]["size"] == "b=1,d3=3,d4=4"
    assert tpu["symbolic"]["error"].startswith("b=1,d3=3,d4=4, vs the reference")
    assert all(by[p]["static"]["status"] == by[p]["symbolic"]["status"] == "ok" for p in ("cpu", "cuda", "rocm"))
    page = html(client.get(f"/harness/{shapes_db['sin']}?run={RUN}"))
    row = page[page.index('data-platform="tpu"'):]
    row = row[:row.index("</tr>")]
    assert "st-ok" in row.split('class="symbolic"')[0] and "st-fail" in row.split('class="symbolic"')[1]
    assert "b=1,d3=3,d4=4" in row and "12 of 12 elements differ" in row
    clean = client.get(f"/harness/{shapes_db['cumsum']}.json?run={RUN}").get_json()["static_vs_symbolic"]
    # cumsum is clean; on jax 0.11.2 and later its cuda/rocm module crosses the boundary as chlo.scan
    # and aborts XLA:CPU (its static census and crossexec: known, expected_fail)
    pairs = {r["platform"]: (r["static"]["status"], r["symbolic"]["status"]) for r in clean}
    assert pairs["cpu"] == pairs["tpu"] == ("ok", "ok")
    assert all(pairs[p] in (("ok", "ok"), ("expected_fail", "ok")) for p in ("cuda", "rocm")), pairs


def test_harness_page_stages_by_shapes(client: Any, shapes_db: dict[str, Any]) -> None:
    url = f"/harness/{shapes_db['sin']}.json?run={RUN}"
    both, sym, static = (client.get(url + q).get_json() for q in ("", "&shapes=symbolic", "&shapes=static"))
    assert {r["stage"] for r in sym["results"]} == set(SYMBOLIC_STAGES)
    assert not {r["stage"] for r in static["results"]} & set(SYMBOLIC_STAGES) and static["results"]
    assert len(sym["results"]) + len(static["results"]) == len(both["results"])
    assert all(r.split("@")[0] in SYMBOLIC_STAGES for r in {x["row"] for x in sym["history"]["status"]})
    assert sym["static_vs_symbolic"] == both["static_vs_symbolic"]  # the comparison is of every record


@pytest.mark.slow(reason="a static-only sweep in its own process, beside the fixture's")
def test_a_run_without_symbolic_records_has_no_side_by_side(tmp_path: Any) -> None:
    from dashboards.app import create_app
    from tests.helpers.shapes import sweep

    url = f"sqlite:///{tmp_path / 'static.db'}"
    sweep(url, "static-only", None, shapes="static", primitives="sin")
    app = create_app(url)
    try:
        c = app.test_client()
        [h] = c.get("/overview.json?primitive=sin").get_json()["harnesses"]
        d = c.get(f"/harness/{h['fingerprint']}.json").get_json()
        assert d["static_vs_symbolic"] == []
        page = html(c.get(f"/harness/{h['fingerprint']}"))
        assert 'id="static-vs-symbolic"' not in page and 'id="shapes-form"' not in page
        assert c.get("/overview.json?shapes=symbolic").get_json()["matrix"] == {}
        for url in ("/", "/failures"):  # a static run's forms are what they were: no shapes field to submit
            assert 'name="shapes"' not in html(c.get(url)), url
    finally:
        app.config["STORE"].dispose()
