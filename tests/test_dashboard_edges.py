"""The dashboard at its edges: query parameters validated (400 with one line, HTML and
JSON faces), a database with a single run (no dead Compare links), the Cross-host page
on a run that has nothing cross-host. One real harness outcome, imported as a bundle."""
from __future__ import annotations

import html
from collections.abc import Iterator
from typing import Any

import pytest

from farm import catalog
from farm.pipeline import run_harness
from farm.host import describe
from farm.results import Options
from farm.run import bundles as bundle


@pytest.fixture(scope="module")
def one_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """An app over a database holding exactly one run (sin float32 on cpu, imported)."""
    from dashboards.app import create_app
    from farm.store import open_store

    d = tmp_path_factory.mktemp("edges")
    url = f"sqlite:///{d / 'one.db'}"
    hs = catalog.select(catalog.Filters.parse(primitive="sin", dtype="float32"))[:1]
    opts = Options(platforms=("cpu",), run_on=("cpu",), crossexec=False, repeats=1)
    path = str(d / "b.json.gz")
    bundle.write(path, environment=describe(), run={"name": "only", "catalog": "farm", "platforms": ["cpu"],
                                                    "run_on": ["cpu"]},
                 harnesses=[h.describe() for h in hs], outcomes=[run_harness(h, opts) for h in hs])
    store = open_store(url)
    bundle.import_bundle(store, path, name="only")
    store.dispose()
    app = create_app(url)
    app.config["BUNDLE"] = path  # for tests that make a second database from the same outcome
    yield app
    app.config["STORE"].dispose()


@pytest.fixture
def client(one_run: Any) -> Any:
    return one_run.test_client()


@pytest.mark.parametrize("url,needle", [
    ("/?status=bogus", "unknown status 'bogus'"),
    ("/?status=ok,fial", "unknown status 'fial'; did you mean fail"),
    ("/?platform=metal", "unknown platform 'metal'"),
    ("/?primitive=sine", "unknown primitive 'sine'; did you mean sin"),
    ("/?dtype=float33", "unknown dtype 'float33'; did you mean float32"),
    ("/?by=harness", "unknown by 'harness'"),
    ("/?page=0", "page must be a whole number >= 1, not '0'"),
    ("/?page=two", "page must be a whole number >= 1, not 'two'"),
    ("/?stauts=fail", "unknown query parameter 'stauts'; did you mean status"),
    ("/runs?page=-1", "page must be a whole number >= 1"),
    ("/boundary?status=bogus", "unknown status 'bogus'"),
    ("/crosshost?platform=metal", "unknown platform 'metal'"),
    ("/compare?bse=1", "unknown query parameter 'bse'; did you mean base"),
])
def test_bad_query_parameters_are_400_with_one_line(client: Any, url: str, needle: str) -> None:
    r = client.get(url)
    assert r.status_code == 400, (url, r.status_code)
    page = r.get_data(as_text=True)
    assert 'id="error-message"' in page and needle in html.unescape(page), page
    path, _, query = url.partition("?")
    twin = {"/": "/overview.json"}.get(path, path + ".json")
    d = client.get(f"{twin}?{query}").get_json()
    assert d["status"] == 400 and needle in d["error"] and "\n" not in d["error"], d


def test_good_parameters_still_answer(client: Any) -> None:
    for url in ("/?status=ok,fail&platform=cpu", "/?primitive=sin&page=1", "/?by=dtype", "/runs?page=1",
                "/boundary?status=ok", "/crosshost?platform=cuda"):
        assert client.get(url).status_code == 200, url


def test_one_run_compare_says_what_comparison_needs(client: Any) -> None:
    r = client.get("/compare")  # the navigation's Compare link
    assert r.status_code == 200
    page = r.get_data(as_text=True)
    assert 'id="compare-needs"' in page and "Comparison needs two runs; this database has one run (only)" in page
    d = client.get("/compare.json").get_json()
    assert d["report"] is None and d["runs"] == 1 and "needs two runs" in d["needs"]
    overview = client.get("/").get_data(as_text=True)
    assert "/compare?head=" not in overview and "comparing needs a second run" in overview
    runs = client.get("/runs").get_data(as_text=True)
    assert ">Compare</button>" not in runs and "Comparing needs two runs" in runs
    assert client.get("/compare?base=nope").status_code == 404  # a named run that does not exist still is


def test_crosshost_on_a_cpu_only_run_says_there_is_nothing_cross_host(client: Any) -> None:
    r = client.get("/crosshost")
    assert r.status_code == 200
    page = r.get_data(as_text=True)
    assert "has nothing cross-host" in page and 'id="nothing-cross-host"' in page
    assert "run on this run's device" not in page and 'id="matrix"' not in page
    d = client.get("/crosshost.json").get_json()
    assert d["device_platforms"] == [] and "nothing cross-host" in d["nothing"]


# --------------------------------------------------------------------------- validators and the page cache
@pytest.fixture
def fresh(one_run: Any, tmp_path: Any) -> Iterator[tuple[Any, Any, str]]:
    """(app, store, url) over a new one-run database made from the same bundle (tests here write to it)."""
    from dashboards.app import create_app
    from farm.store import open_store

    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = open_store(url)
    bundle.import_bundle(store, one_run.config["BUNDLE"], name="first")
    app = create_app(url)
    app.config["BUNDLE"] = one_run.config["BUNDLE"]
    yield app, store, url
    app.config["STORE"].dispose()
    store.dispose()


def test_finished_runs_get_validators_and_304(fresh: tuple[Any, Any, str]) -> None:
    from sqlalchemy import event

    app, _, _ = fresh
    c = app.test_client()
    first = c.get("/?platform=cpu")
    assert first.status_code == 200 and first.headers["X-Farm-Cache"] == "miss"
    etag, last = first.headers["ETag"], first.headers["Last-Modified"]
    assert etag and last and first.headers["Cache-Control"] == "no-cache"
    again = c.get("/?platform=cpu")
    assert again.headers["X-Farm-Cache"] == "hit" and again.data == first.data and again.headers["ETag"] == etag
    assert c.get("/overview.json?platform=cpu").headers["ETag"] != etag  # each page and face its own tag
    assert c.get("/?platform=cuda").headers["ETag"] != etag
    seen: list[str] = []
    listener = lambda *a: seen.append(a[2])  # noqa: E731
    engine = app.config["STORE"].engine
    event.listen(engine, "before_cursor_execute", listener)
    try:
        r = c.get("/?platform=cpu", headers={"If-None-Match": etag})
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    assert r.status_code == 304 and r.data == b"" and r.headers["ETag"] == etag
    assert len(seen) == 1  # the validator's one query; the page is not computed
    assert c.get("/?platform=cpu", headers={"If-Modified-Since": last}).status_code == 304
    assert c.get("/?platform=cpu", headers={"If-None-Match": '"other"'}).status_code == 200
    assert c.get("/?status=bogus").status_code == 400  # errors are neither cached nor validated


def test_a_new_run_or_a_running_one_invalidates(fresh: tuple[Any, Any, str]) -> None:
    from sqlalchemy import update

    from farm.store.models import Run

    app, store, _ = fresh
    c = app.test_client()
    old = c.get("/runs")
    etag = old.headers["ETag"]
    assert "first" in old.get_data(as_text=True)
    bundle.import_bundle(store, app.config["BUNDLE"], name="second")  # another process's new run
    r = c.get("/runs", headers={"If-None-Match": etag})
    assert r.status_code == 200 and r.headers["ETag"] != etag and "second" in r.get_data(as_text=True)
    assert r.headers["X-Farm-Cache"] == "miss"
    with store.session() as s:
        s.execute(update(Run).where(Run.name == "second").values(status="running", finished_at=None))
    r = c.get("/runs", headers={"If-None-Match": r.headers["ETag"]})
    assert r.status_code == 200 and "ETag" not in r.headers and "X-Farm-Cache" not in r.headers


def test_harness_page_links_a_reused_result_to_its_run(fresh: tuple[Any, Any, str]) -> None:
    """A warm re-sweep's results are reused (``OutcomeRow.cached_from``): the HTML harness page
    links each to the run it came from (it used to raise UndefinedError, a 500)."""
    from sqlalchemy import select, update

    from farm.store import deltas
    from farm.store.models import HarnessRow, Run, StoredOutcomeRow

    app, store, _ = fresh
    bundle.import_bundle(store, app.config["BUNDLE"], name="second")
    with store.session() as s:
        ids = dict(s.execute(select(Run.name, Run.id)).tuples().all())
        fp = s.scalar(select(HarnessRow.fingerprint))
        deltas.materialize(s, s.get(Run, ids["second"]))  # identical to "first": a delta run stores no outcome
        s.execute(update(StoredOutcomeRow).where(StoredOutcomeRow.run_id == ids["second"]).values(cached_from=ids["first"]))
    c = app.test_client()
    r = c.get(f"/harness/{fp}?run={ids['second']}")
    assert r.status_code == 200, r.get_data(as_text=True)[:500]
    text = html.unescape(r.get_data(as_text=True))
    assert f'href="/harness/{fp}?run={ids["first"]}" title="nothing that shapes this result changed"' in text
    assert c.get(f"/harness/{fp}.json?run={ids['second']}").get_json()["results"][0]["reused_from"] == ids["first"]


def test_bench_load_test_never_blocks_the_servers_stderr(fresh: tuple[Any, Any, str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """``farm.bench.web.load``: under load waitress logs a warning for every queued request.
    The server's stderr used to be a pipe nobody read: once 64 KiB were written its event
    loop blocked and every client waited for its 60 s timeout (23 errors in the 10-run
    benchmark). Here the server writes 256 KiB to stderr before it starts."""
    import subprocess
    import sys

    from farm.bench import web

    app, store, url = fresh
    bundle.import_bundle(store, app.config["BUNDLE"], name="second")  # the pages need two runs
    popen = subprocess.Popen

    def noisy(cmd: list[str], **kw: Any) -> Any:
        pre = "import os, sys; sys.stderr.write('x' * 2**18 + '\\n'); sys.stderr.flush(); os.execv(sys.argv[1], sys.argv[1:])"
        return popen([sys.executable, "-c", pre, *cmd], **kw)

    monkeypatch.setattr(web.subprocess, "Popen", noisy)
    r = web.load(url, clients=20, seconds=3.0, threads=2)
    # behaviour, not speed (that is farm bench's): every client is answered, nothing fails, and
    # no request waits anywhere near the 60 s client timeout a blocked server caused
    assert r.requests >= 20 and not r.errors and not r.server_errors, (r.errors[:3], r.server_errors[:3])
    assert r.seconds < 40 and max(r.latencies) < 30


def test_bench_reports_the_servers_errors() -> None:
    from farm.bench.web import _error_lines

    text = ("WARNING:waitress.queue:Task queue depth is 2\n"
            "[2026-11-24 23:35:39,795] ERROR in app: Exception on /harness/55b1 [GET]\n"
            "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n    f()\n"
            "AttributeError: partially initialized module 'numpy' has no attribute 'ndarray'\n"
            "WARNING:waitress.queue:Task queue depth is 3\n")
    assert _error_lines(text) == ["[2026-11-24 23:35:39,795] ERROR in app: Exception on /harness/55b1 [GET]",
                                  "AttributeError: partially initialized module 'numpy' has no attribute 'ndarray'"]
