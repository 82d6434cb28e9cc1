"""farm db prune: old runs go; a kept run's stored comparison and a kept delta run's base stay
(or the delta run is materialized), and what the kept runs read is unchanged."""
from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest
from sqlalchemy import select

from farm.cli import main
from farm.reports import comparison
from farm.store import open_store, prune
from farm.store.models import Run
from tests.helpers.deltas import N, _outcomes_with, effective, outcome, write_run


def _runs(store: Any) -> dict[str, int]:
    with store.session() as s:
        return dict(s.execute(select(Run.name, Run.id)).tuples().all())


def _build(url: str) -> dict[str, int]:
    """full0 (full), d1..d3 (deltas of full0), c4 (changed: full), d5 (delta of c4)."""
    store = open_store(url)
    same = [outcome(i) for i in range(N)]
    write_run(store, "full0", same)
    for n in (1, 2, 3):
        write_run(store, f"d{n}", same)
    changed = _outcomes_with("status")
    write_run(store, "c4", [o if i != 9 else o.replace(seconds=99.0) for i, o in enumerate(changed)],
              max_fraction=0.01)
    write_run(store, "d5", [o if i != 9 else o.replace(seconds=99.0) for i, o in enumerate(changed)])
    return _runs(store)


def test_prune_keeps_the_base_of_a_kept_delta_run(db_url: str) -> None:
    ids = _build(db_url)
    store = open_store(db_url)
    with store.session() as s:
        assert s.get(Run, ids["d3"]).base_run_id == ids["full0"] and s.get(Run, ids["d5"]).base_run_id == ids["c4"]
    before = {k: effective(store, ids[k]) for k in ("d3", "d5")}
    with store.session() as s:
        p = prune.plan(s, keep=3)  # d3, c4, d5: d3 needs full0
        assert sorted(p.delete) == sorted([ids["d1"], ids["d2"]])
        assert p.kept == {ids["full0"]: f"the base of delta run {ids['d3']}"}
        assert prune.prune(s, p) == 2
    assert set(_runs(store)) == {"full0", "d3", "c4", "d5"}
    assert {k: effective(store, ids[k]) for k in ("d3", "d5")} == before


def test_prune_materializes_on_request_and_the_base_goes(db_url: str) -> None:
    ids = _build(db_url)
    store = open_store(db_url)
    before = effective(store, ids["d3"])
    with store.session() as s:
        p = prune.plan(s, keep=3, materialize=True)
        assert p.materialize == [ids["d3"]] and ids["full0"] in p.delete
        prune.prune(s, p)
    assert set(_runs(store)) == {"d3", "c4", "d5"}
    with store.session() as s:
        assert s.get(Run, ids["d3"]).base_run_id is None
    assert effective(store, ids["d3"]) == before


def test_prune_keeps_the_other_run_of_a_stored_comparison(sqlite_url: str) -> None:
    ids = _build(sqlite_url)
    store = open_store(sqlite_url)
    c = comparison.comparison(store, ids["d1"], ids["d5"])
    assert c.stored
    with store.session() as s:
        p = prune.plan(s, keep=1)  # d5, its base c4, and d1 (its stored comparison), whose base full0
        assert set(_runs(store)) - {n for n, i in ids.items() if i in p.delete} == {"d5", "c4", "d1", "full0"}
        assert p.kept[ids["d1"]] == f"a stored comparison with run {ids['d5']}"
        prune.prune(s, p)
    again = comparison.comparison(store, ids["d1"], ids["d5"])
    assert again.from_store and again.report == c.report


def test_the_database_refuses_to_delete_a_base_a_run_names(sqlite_url: str) -> None:
    ids = _build(sqlite_url)
    store = open_store(sqlite_url)
    with pytest.raises(Exception), store.session() as s:
        prune.prune(s, prune.Plan([ids["full0"]]))
    assert "full0" in _runs(store)


@pytest.mark.parametrize("argv, message", [(["db", "prune"], "needs --keep"),
                                            (["db", "prune", "--keep", "-1"], "--keep must be"),
                                            (["db", "prune", "--keep-days", "x"], "--keep-days must be")])
def test_prune_refuses_bad_input_in_one_line(sqlite_url: str, argv: list[str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    _build(sqlite_url)
    assert main([*argv, "--db", sqlite_url]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert len(_runs(open_store(sqlite_url))) == 6


def test_prune_command_dry_run_then_prune(sqlite_url: str) -> None:
    _build(sqlite_url)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["db", "prune", "--keep", "2", "--dry-run", "--db", sqlite_url]) == 0
    assert "4 of 6 runs to delete" in buf.getvalue() and len(_runs(open_store(sqlite_url))) == 6
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["db", "prune", "--keep", "2", "--db", sqlite_url]) == 0
    assert "deleted 4 runs; 2 left (1 stored as deltas)" in buf.getvalue()
