"""Property-based bad input (hypothesis): arbitrary arguments to every ``farm`` subcommand
and arbitrary query parameters on every dashboard page never give a traceback or a 500.
A bad argument is argparse's usage error or one ``farm: error:`` line; a bad parameter is
a 4xx.

The examples are drawn from one seed per process: ``FARM_TEST_SEED`` if set, else a fresh one.
Every test prints it (pytest shows it with a failure) and a failure's message says how to
replay it: ``FARM_TEST_SEED=N pytest 'tests/faults/test_bad_input.py::TEST[PARAM]'`` draws the
same examples (with the same ``FARM_HYPOTHESIS_EXAMPLES``)."""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import secrets
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, seed, settings
from hypothesis import strategies as st

from farm.cli import main, parser
from farm.store import open_store, writes
from tests.helpers.rows import ENV, harness_desc, outcome

#: commands whose successful parse would start real work (a benchmark, a Ray node, a server,
#: minutes of ULP measurement with ``--no-store``): for them only argument lists that fail to
#: parse are tried (``farm accuracy`` with a bad ``--db`` is tested in tests/test_accuracy.py)
STARTS_WORK = {"bench", "worker", "serve", "schedule", "accuracy"}
#: options that would start other processes or reach other machines with any value
SPAWNS = {"--config", "--jax", "--address", "--submit", "--modules", "--help", "-h"}
EXAMPLES = int(os.environ.get("FARM_HYPOTHESIS_EXAMPLES", "6"))
#: hypothesis's seed for every test here: new on every run unless given (docs/reliability.md)
SEED = int(os.environ.get("FARM_TEST_SEED") or secrets.randbits(32))


def replayable(check: Any, nodeid: str) -> None:
    """Run a hypothesis test under ``SEED``; print the seed, and say in a failure how to replay it."""
    print(f"hypothesis seed {SEED} (FARM_TEST_SEED), {EXAMPLES} examples (FARM_HYPOTHESIS_EXAMPLES)")
    try:
        seed(SEED)(check)()
    except Exception as e:
        e.add_note(f"replay: FARM_TEST_SEED={SEED} FARM_HYPOTHESIS_EXAMPLES={EXAMPLES} "
                   f".venv/bin/python -m pytest '{nodeid}'")
        raise


def subcommands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


COMMANDS = subcommands()
VALUES = st.one_of(st.text(max_size=30), st.sampled_from(["0", "-1", "1e309", "nan", "latest", "previous", "9999",
                                                          "x,y", ",", "", "../../etc/passwd", "a" * 300, "\x00",
                                                          "float32", "cpu", "json", "csv", "sin"]))


def argv_for(name: str) -> st.SearchStrategy[list[str]]:
    p = COMMANDS[name]
    opts = sorted({o for a in p._actions for o in a.option_strings if o not in SPAWNS and o != "--db"}
                  | {c for a in p._actions if isinstance(a, argparse._SubParsersAction) for c in a.choices})
    token = st.one_of(st.sampled_from(opts), VALUES) if opts else VALUES
    return st.lists(token, max_size=6).map(lambda xs: [name, *xs])


def parses(argv: list[str]) -> bool:
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            parser().parse_args(argv)
        return True
    except SystemExit:
        return False
    except Exception:  # noqa: BLE001 (a FarmError from an option's type: main prints it as one line)
        return False


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("argv")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_any_arguments_to_any_subcommand(name: str, workdir: Path, monkeypatch: pytest.MonkeyPatch,
                                         request: pytest.FixtureRequest) -> None:
    monkeypatch.chdir(workdir)  # files a command writes (jobs --out, export -o) land here
    monkeypatch.setenv("FARM_DB", "sqlite:////nonexistent-dir/farm.db")  # no command gets to real work

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(argv=argv_for(name))
    def check(argv: list[str]) -> None:
        if name in STARTS_WORK:
            assume(not parses(argv))
        err, out = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                rc = main(argv)
        except SystemExit as e:  # argparse: usage and one error line, exit 2 (or 0 for --help)
            rc = e.code
        assert isinstance(rc, int) and "Traceback" not in err.getvalue(), (argv, err.getvalue()[-1500:])
        if rc not in (0, None):
            lines = [l for l in err.getvalue().splitlines() if l.startswith(("farm: error:", "farm ", "usage:"))
                     or ": error:" in l]
            assert lines, (argv, rc, err.getvalue()[-1500:])

    replayable(check, request.node.nodeid)


def test_the_seed_replays_the_same_examples_and_a_failure_says_how(request: pytest.FixtureRequest) -> None:
    def draw() -> list[list[str]]:
        examples: list[list[str]] = []

        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(argv=argv_for("show"))
        def record(argv: list[str]) -> None:
            examples.append(argv)

        replayable(record, request.node.nodeid)
        return examples

    first = draw()
    assert len(first) > 1 and draw() == first

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(argv=argv_for("show"))
    def failing(argv: list[str]) -> None:
        raise AssertionError(argv)

    with pytest.raises(AssertionError) as e:
        replayable(failing, request.node.nodeid)
    assert f"replay: FARM_TEST_SEED={SEED} " in "\n".join(e.value.__notes__)


# --------------------------------------------------------------------------- dashboard
PAGES = {"/": ("run", "by", "page", "primitive", "dtype", "platform", "status", "catalog"),
         "/overview.json": ("run", "by", "page", "status"), "/runs": ("page",), "/runs.json": ("page",),
         "/trends": ("runs",), "/compare": ("base", "head"), "/compare.json": ("base", "head"),
         "/harness/fp0000": ("run",), "/harness/fp0000.json": ("run",), "/harness/fp0000/module/cpu": ("run",),
         "/harness/fp0000/diff": ("platform", "base", "head"), "/search": ("q", "run", "status", "platform", "sort", "page"),
         "/search.json": ("q", "run", "status", "platform", "sort", "page"), "/coverage": ("catalog",),
         "/boundary": ("run", "status", "platform"), "/crosshost": ("run", "platform"), "/versions": ("name",),
         "/versions.json": ("name",), "/artifacts/" + "0" * 64: ("x",), "/openapi.json": ("x",)}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from dashboards.app import create_app

    url = f"sqlite:///{tmp_path_factory.mktemp('q') / 'q.db'}"
    store = open_store(url)
    for name in ("one", "two"):
        with store.session() as s:
            run = writes.create_run(s, env=ENV, name=name, platforms=["cpu"], run_on=["cpu"], total=2)
            writes.Writer(s, run, writes.harness_ids(s, [harness_desc(i) for i in range(2)])).write(
                [outcome(0), outcome(1, "fail")])
            writes.finish_run(s, run, "finished")
    store.dispose()
    app = create_app(url)
    yield app.test_client()
    app.config["STORE"].dispose()


@pytest.mark.parametrize("page", sorted(PAGES))
def test_any_query_parameters_on_any_page(page: str, client: Any, request: pytest.FixtureRequest) -> None:
    names = st.one_of(st.sampled_from(PAGES[page]), st.text(max_size=12))
    query = st.lists(st.tuples(names, VALUES), max_size=4)

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(query=query)
    def check(query: list[tuple[str, str]]) -> None:
        r = client.get(page, query_string=query)
        assert r.status_code < 500, (page, query, r.status_code, r.get_data(as_text=True)[:500])

    replayable(check, request.node.nodeid)


@pytest.mark.parametrize("query", [{"run": "³"}, {"runs": "³"}, {"run": "٣"}, {"runs": "²"}])
def test_a_digit_that_is_not_ascii_is_a_clear_error_not_a_500(query: dict[str, str], client: Any) -> None:
    """"³".isdigit() is True and int("³") raises: hypothesis found /trends?runs=³ and a run
    named "³" as 500s (a fresh clone's run of the suite)."""
    for page in ("/", "/trends", "/harness/fp0000", "/harness/fp0000.json"):
        r = client.get(page, query_string=query)
        assert r.status_code in (200, 400, 404), (page, query, r.status_code)
