"""Run dimensions as columns (farm.results.RunDims, farm.store.series): the migration fills
them from the names an older farm wrote; afterwards nothing parses a name."""
from __future__ import annotations

import pytest
from sqlalchemy import select, text

from farm.errors import ConfigError, RunNotFound
from farm.results import RunDims
from farm.store import open_store, series, writes
from farm.store.db import Store
from farm.store.models import Run

ENV = {"jax_version": "0.10.2", "jaxlib_version": "0.10.2", "python": "3.11.7", "host": "test",
       "device_kinds": ["cpu"], "xla_flags": "", "farm_commit": "abc"}
#: run names as the farm wrote them before revision 0004, and what they meant
OLD_NAMES = {
    "plain": {},
    "cfg@x64=on,shardy=off": {"series": "cfg", "config": "x64=on,shardy=off"},
    "vt@jax=0.9.2": {"series": "vt", "jax_version": "0.9.2"},
    "vt@xver=0.9.2>0.10.2": {"series": "vt", "exported_on": "0.9.2", "jax_version": "0.10.2"},
    "nightly-20260105T0200Z": {"schedule": "nightly", "slot": "20260105T0200Z"},
    "matrix-20260104T0200Z@x64=off": {"series": "matrix-20260104T0200Z", "config": "x64=off",
                                      "schedule": "matrix", "slot": "20260104T0200Z"},
}


def test_migration_fills_dimensions_of_a_database_made_before_them(db_url: str) -> None:
    old = Store(db_url, upgrade=False)
    old.upgrade("0003")  # the schema of the farm before run dimensions
    with old.engine.begin() as conn:
        conn.execute(text("INSERT INTO environments (fingerprint, jax_version, jaxlib_version, python, host, "
                          "device_kinds, xla_flags, farm_commit, created_at) VALUES ('e', '0.10.2', '0.10.2', "
                          "'3.11', 'h', '[]', '', 'c', CURRENT_TIMESTAMP)"))
        env_id = conn.execute(text("SELECT id FROM environments")).scalar_one()
        for name in OLD_NAMES:
            conn.execute(text("INSERT INTO runs (name, kind, status, started_at, catalog, filters, platforms, run_on, "
                              "total, environment_id, stats) VALUES (:n, 'sweep', 'finished', CURRENT_TIMESTAMP, "
                              "'farm', '{}', '[]', '[]', 0, :e, '{}')"), {"n": name, "e": env_id})
    old.dispose()
    store = open_store(db_url)  # upgrades to head
    with store.session() as s:
        got = {r.name: {k: v for k, v in series.run_dims(r).to_dict().items() if v} for r in s.scalars(select(Run))}
    assert got == OLD_NAMES


def test_dimensions_are_read_from_columns_not_names(sqlite_url: str) -> None:
    """A run whose name looks like another configuration's is not taken for it."""
    store = open_store(sqlite_url)
    with store.session() as s:
        for name, dims in (("a-label", RunDims(series="s", config="x64=off,shardy=on")),
                           ("another", RunDims(series="s", config="x64=on,shardy=on")),
                           ("s@x64=on", RunDims()),
                           ("third", RunDims(series="s", config="x64=on,shardy=off"))):
            writes.create_run(s, env=ENV, name=name, dims=dims)
    with store.session() as s:
        a, b = series.config_pair(s, "s", "x64", "off", "on")
        assert (a.name, b.name) == ("a-label", "another")
        with pytest.raises(ConfigError, match="no two runs"):
            series.config_pair(s, "s", "x64", "off", "maybe")
        with pytest.raises(RunNotFound):
            series.config_pair(s, "nosuch", "x64", "off", "on")
        assert [r.name for r in series.series_runs(s, "s")] == ["a-label", "another", "third"]
