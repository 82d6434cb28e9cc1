"""Configurations as a sweep dimension (farm sweep --config): one run per configuration,
each in its own process with that JAX environment, nothing reused across them, and
farm compare --across-config between two of them."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from farm.errors import ConfigError
from farm.run import configs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_configurations_are_the_product_of_the_specs() -> None:
    out = configs.parse(["x64=on,off", "shardy=off"])
    assert [c.label for c in out] == ["x64=on,shardy=off", "x64=off,shardy=off"]
    assert out[0].env == {"JAX_ENABLE_X64": "1", "JAX_USE_SHARDY_PARTITIONER": "0"}
    assert out[0].run_name("nightly") == "nightly@x64=on,shardy=off"
    flags = configs.parse(["xla_flags=fast,none"], {"fast": "--xla_cpu_enable_fast_math=true"})
    assert [c.env["XLA_FLAGS"] for c in flags] == ["--xla_cpu_enable_fast_math=true", ""]


@pytest.mark.parametrize("spec, message", [
    (["x65=on"], "unknown key 'x65'"), (["x64=maybe"], "unknown value 'maybe'"), (["x64"], "expected KEY=VALUE"),
    (["x64=on", "x64=off"], "given twice"), (["xla_flags=nope"], "no flag set named 'nope'")])
def test_bad_configurations_are_one_line_errors(spec, message) -> None:
    with pytest.raises(ConfigError, match=message):
        configs.parse(spec)


def test_named_flag_sets_come_from_farm_toml(tmp_path) -> None:
    f = tmp_path / "farm.toml"
    f.write_text('[xla_flags]\nfast = "--xla_cpu_enable_fast_math=true"\n')
    assert configs.flag_sets(f) == {"fast": "--xla_cpu_enable_fast_math=true"}
    assert configs.flag_sets(tmp_path / "missing.toml") == {}


def farm(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT, "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.run([sys.executable, "-m", "farm", *args], env=env, capture_output=True, text=True,
                          timeout=600, cwd=ROOT)


@pytest.mark.slow(reason="two upstream-catalog sweeps, one per x64 mode, and their comparison")
def test_x64_on_and_off_sweep_the_upstream_catalog_each_way_and_compare(tmp_path) -> None:
    db = f"sqlite:///{tmp_path / 'c.db'}"
    p = farm("sweep", "--config", "x64=off,on", "--catalog", "upstream", "--group", "sign", "--db", db,
             "--name", "cfg", "--platforms", "cpu,tpu", "--repeats", "1")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "run cfg@x64=off" in p.stderr and "run cfg@x64=on" in p.stderr
    assert "0 reused whole" in p.stderr.split("configuration x64=on")[1]  # nothing crosses configurations
    from farm.store import open_store  # noqa: PLC0415
    from farm.store.models import HarnessRow, ResultRow, Run  # noqa: PLC0415
    from sqlalchemy import select  # noqa: PLC0415

    store = open_store(db)
    with store.session() as s:
        runs = {r.name: r.id for r in s.scalars(select(Run))}
        dims = {r.name: (r.series, r.config) for r in s.scalars(select(Run))}
        names = {rid: set(s.scalars(select(HarnessRow.name).join(ResultRow, ResultRow.harness_id == HarnessRow.id)
                                    .where(ResultRow.run_id == rid))) for rid in runs.values()}
        bad = s.scalar(select(ResultRow.id).where(ResultRow.status.in_(("error", "fail", "crashed"))).limit(1))
    store.dispose()
    assert dims == {"cfg@x64=off": ("cfg", "x64=off"), "cfg@x64=on": ("cfg", "x64=on")}  # columns, not names
    off, on = names[runs["cfg@x64=off"]], names[runs["cfg@x64=on"]]
    x64 = ("float64", "int64", "complex128")
    assert off < on and any("float64" in n for n in on - off) and not any(t in n for n in off for t in x64)
    assert bad is None
    c = farm("compare", "--across-config", "x64=off,on", "cfg", "--db", db, "--format", "json", "--fail-on", "status")
    assert c.returncode == 0, c.stderr[-2000:]
    assert "cfg@x64=on" in c.stdout and sorted(on - off)[0] in c.stdout
    assert farm("compare", "--across-config", "x64=off", "cfg", "--db", db).returncode == 2


@pytest.mark.slow(reason="a configuration sweep run, interrupted and run again, each a fresh process")
def test_a_configuration_sweep_again_keeps_finished_runs_resumes_others_and_refuses_another_selection(tmp_path) -> None:
    db = f"sqlite:///{tmp_path / 'k.db'}"
    args = ["sweep", "--config", "x64=off,on", "--primitive", "sin", "--dtype", "float32", "--db", db,
            "--name", "k", "--platforms", "cpu", "--repeats", "1", "--no-crossexec"]
    assert farm(*args).returncode == 0
    from farm.store import open_store  # noqa: PLC0415
    from farm.store.models import Run  # noqa: PLC0415
    from sqlalchemy import select  # noqa: PLC0415

    store = open_store(db)
    with store.session() as s:  # as if the second configuration had been interrupted
        s.scalar(select(Run).where(Run.name == "k@x64=on")).status = "interrupted"
    store.dispose()
    again = farm(*args)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "run k@x64=off finished earlier: kept" in again.stderr and "run k@x64=on (resumed)" in again.stderr
    changed = farm(*[("exp" if a == "sin" else a) for a in args])
    assert changed.returncode == 2 and "run k@x64=off exists with another selection (primitive)" in changed.stderr


def test_calling_convention_versions_are_what_the_installed_jax_supports() -> None:
    from jax._src.export import _export

    lo, hi = _export.minimum_supported_calling_convention_version, _export.maximum_supported_calling_convention_version
    out = configs.parse([f"cc={lo},{hi}"])
    assert [c.env for c in out] == [{"JAX_EXPORT_CALLING_CONVENTION_VERSION": str(v)} for v in (lo, hi)]
    with pytest.raises(ConfigError, match=rf"cc: unknown value '{hi + 1}' \(valid: {lo}.*{hi}\)"):
        configs.parse([f"cc={hi + 1}"])


@pytest.mark.slow(reason="the effects family exported, serialized and run under each calling-convention version")
def test_effects_artifacts_export_serialize_and_run_under_each_calling_convention(tmp_path) -> None:
    """``--config cc=9,10``: the effects family's artifacts are exported, serialized,
    deserialized and run under each version, the record says which version made them, and
    the verdicts agree (on jax 0.10.2 every host callback is refused at export under both,
    as ``Limitation`` data; ``platform_dependent`` exports and runs)."""
    from jax._src.export import _export

    versions = sorted({_export.minimum_supported_calling_convention_version,
                       _export.maximum_supported_calling_convention_version})
    db = f"sqlite:///{tmp_path / 'cc.db'}"
    p = farm("sweep", "--config", "cc=" + ",".join(map(str, versions)), "--family", "effects", "--primitive", "io_callback,platform_dependent",
             "--db", db, "--name", "cc", "--platforms", "cpu", "--workers", "1")
    assert p.returncode == 0, p.stderr[-3000:]
    from farm.store import open_store, queries  # noqa: PLC0415

    store = open_store(db)
    seen: dict[int, dict[tuple[str, str], str]] = {}
    with store.session() as s:
        for v in versions:
            rows = queries.results(s, queries.resolve_run(s, f"cc@cc={v}").id)
            exports = [x for x in rows if x["stage"] == "effects_export" and x["platform"] != "native"]
            assert exports and {x["facts"].get("calling_convention_version") for x in exports if x["status"] == "ok"} == {v}
            seen[v] = {(x["harness"], x["platform"]): x["status"] for x in rows}
    store.dispose()
    assert all(st in ("ok", "expected_fail", "skipped", "not_runnable_here") for st in seen[versions[0]].values())
    assert seen[versions[0]] == seen[versions[-1]]
