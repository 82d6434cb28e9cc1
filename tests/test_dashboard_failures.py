"""The dashboard's Failures page (Flask's test client): clusters, not cells; new ones on
top; links to each harness; the reproducer command; acknowledgements shown; error text
escaped; an unknown run is a 404 with one line. The database is the one of
tests/test_triage.py (real SQLite, written by the farm's own writer)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.triage import ENV, EVIL, HARNESSES, PLATFORMS, outcome



@pytest.fixture
def client(triage_db: str) -> Iterator[Any]:  # noqa: F811
    from dashboards.app import create_app
    from farm.results import Record
    from farm.store import open_store, writes

    store = open_store(triage_db)
    with store.session() as s:  # a failure whose error text is markup
        run = writes.create_run(s, env=ENV, name="evil", platforms=PLATFORMS, run_on=["cpu"], total=1)
        writes.Writer(s, run, writes.harness_ids(s, HARNESSES)).write(
            [outcome("sin_f32", Record("compare", "cpu", "error", error_type="RuntimeError", error=EVIL))])
        writes.finish_run(s, run, "finished")
    store.dispose()
    app = create_app(triage_db)
    yield app.test_client()
    app.config["STORE"].dispose()


def test_failures_page_lists_clusters_new_first_with_links_and_the_reproducer(client: Any) -> None:
    data = client.get("/failures.json?run=n").get_json()
    assert [r["name"] for r in data["runs"]] == ["n@x64=off", "n@x64=on"]
    assert len(data["clusters"]) == 3 and all(c["new"] for c in data["clusters"])
    page = client.get("/failures?run=n").get_data(as_text=True)
    assert 'id="clusters"' in page and page.count('class="cluster new') == 3
    reshape = next(c for c in data["clusters"] if c["signature"]["primitives"] == ["reshape"])
    assert f'href="/harness/{reshape["fingerprints"]["reshape_a"]}?run=' in page
    assert "farm repro reshape_a --run n@x64=off --platform cpu" in page
    assert '>Failures</a>' in page  # in the navigation

    later = client.get("/failures.json?run=later").get_json()
    assert [c["new"] for c in later["clusters"]] == [False]


def test_acknowledgement_shows_and_error_text_is_escaped(client: Any, triage_db: str) -> None:  # noqa: F811
    from farm.reports import triage
    from farm.store import open_store, triage as triage_rows

    key = client.get("/failures.json?run=evil").get_json()["clusters"][0]["key"]
    before = client.get("/failures?run=evil")
    assert before.headers.get("X-Farm-Cache") == "miss" and client.get("/failures?run=evil").headers[
        "X-Farm-Cache"] == "hit"
    store = open_store(triage_db)
    with store.session() as s:  # as `farm triage ack` does, from another process
        triage.acknowledge(s, key, "known <b>bad</b>", "https://example.org/issue/1")
    store.dispose()
    # the page cache and the ETag must not hide the acknowledgement
    r = client.get("/failures?run=evil", headers={"If-None-Match": before.headers["ETag"]})
    assert r.status_code == 200 and r.headers.get("X-Farm-Cache") == "miss"
    page = r.get_data(as_text=True)
    assert EVIL not in page and "&lt;script&gt;" in page
    assert "known &lt;b&gt;bad&lt;/b&gt;" in page and 'href="https://example.org/issue/1"' in page
    assert 'class="cluster new acked"' in page
    with open_store(triage_db).session() as s:  # taken back: shown at once too
        triage_rows.unacknowledge(s, key)
    r2 = client.get("/failures?run=evil", headers={"If-None-Match": r.headers["ETag"]})
    assert r2.status_code == 200 and "known &lt;b&gt;" not in r2.get_data(as_text=True)


def test_unknown_run_is_a_404_with_one_line(client: Any) -> None:
    r = client.get("/failures.json?run=nosuch")
    assert r.status_code == 404 and "no run 'nosuch'" in r.get_json()["error"]
    assert client.get("/failures?bogus=1").status_code == 400


def test_compare_page_says_which_clusters_appeared_and_went(client: Any) -> None:
    page = client.get("/compare?base=n%40x64%3Doff&head=n%40x64%3Don").get_data(as_text=True)
    assert 'id="clusters-diff"' in page and "<b>1</b> new · 0 gone" in page and "execute crashed [sin]" in page
