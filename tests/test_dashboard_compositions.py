"""The composition × family matrix (``farm.analysis.compositions``, ``/compositions``): the pure
counting, and the page over real outcomes of the compositions check written to a store, HTML
and JSON faces, with the run's own records as the check."""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from farm.analysis import compositions
from tests.helpers.dashboard import html


def _row(platform: str, status: str, family: str = "elementwise_unary", harness: str = "h") -> dict:
    return {"stage": "composition", "platform": platform, "status": status, "family": family, "harness": harness}


def test_each_family_is_a_row_each_composition_a_column_and_a_cell_is_coloured_by_its_worst() -> None:
    rows = [_row("vmap", "expected_fail"), _row("scan", "ok"), _row("scan", "fail", harness="g"),
            _row("call", "expected_fail", family="sharding"), _row("jit_sharded", "skipped", family="sharding"),
            {**_row("compile", "fail"), "stage": "compile"}]  # not a composition: not in the matrix
    m = compositions.matrix(rows)
    assert m["families"] == ["elementwise_unary", "sharding"]
    assert m["columns"] == ["call", "jit_sharded", "vmap", "scan"]  # in the compositions' order
    assert m["worst"]["elementwise_unary"] == {"vmap": "expected_fail", "scan": "fail"}
    assert m["harnesses"] == {"elementwise_unary": 2, "sharding": 1}
    assert m["totals"]["scan"] == {"ok": 1, "fail": 1}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from dashboards.app import create_app
    from farm import catalog
    from farm.host import describe
    from farm.pipeline import run_harness
    from farm.results import Options
    from farm.store import open_store, writes

    url = f"sqlite:///{tmp_path_factory.mktemp('compositions') / 'c.db'}"
    hs = catalog.load()
    picked = [next(h for h in hs if h.name == "sin_float32_3x4"),
              next(h for h in hs if h.family == "export_features" and "donation" in h.name)]
    outs = [run_harness(h, Options(compositions="all", repeats=1, platforms=("cpu", "tpu"))) for h in picked]
    store = open_store(url)
    with store.session() as s:
        run = writes.create_run(s, env=describe(), name="c", platforms=["cpu", "tpu"], run_on=["cpu"], total=2)
        writes.Writer(s, run, writes.harness_ids(s, picked)).write(outs)
        writes.finish_run(s, run, "finished")
    store.dispose()
    app = create_app(url)
    yield app.test_client()
    app.config["STORE"].dispose()


def test_the_page_counts_every_composition_record_of_the_run(client: Any) -> None:
    m = client.get("/compositions.json?run=c").get_json()
    assert m["families"] == ["elementwise_unary", "export_features"]
    assert m["worst"]["elementwise_unary"]["vmap"] == "expected_fail" and m["worst"]["export_features"]["scan"] == "ok"
    from farm.store import queries

    store = client.application.config["STORE"]
    with store.session() as sess:
        rows = queries.results(sess, queries.resolve_run(sess, "c").id)
    want = Counter(r["status"] for r in rows if r["stage"] == "composition")
    got: Counter[str] = Counter()
    for counts in m["totals"].values():
        got.update(counts)
    assert got == want and sum(want.values()) == 16  # eight compositions of two harnesses
    page = html(client.get("/compositions?run=c"))
    assert 'id="compositions"' in page and 'data-column="jit_sharded"' in page and "export_features" in page
    assert client.get("/compositions.json?run=c&status=bogus").status_code == 400
