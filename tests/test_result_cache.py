"""The content-addressed result cache: a hit only when nothing that shapes the result
changed; jax Python changes re-lower and reuse compile/execute/compare only where the
exact module is unchanged; crashes and timeouts are never reused."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import types
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from farm import catalog

from farm.cache import key as digest
from farm.results import Options, Outcome
from farm.results import Record

ROOT = Path(__file__).resolve().parents[1]


def _sin(**kw):  # noqa: ANN003, ANN202
    from jax import lax

    return catalog.define("test_only", "sin", lax.sin, [catalog.RandArg((3,), "float32")], dtype="float32",
                          catalog="test_only", reference=np.sin, **kw)


# ------------------------------------------------------------------ the keys
def test_harness_digest_sees_reference_tolerance_limitation_and_compare() -> None:
    base = _sin()
    d = digest.harness_digest(base)
    variants = [
        replace(base, reference=np.cos),
        replace(base, tol=(1e-3, 1e-3)),
        replace(base, compare="exact"),
        replace(base, limitations=(catalog.Limitation("x", ("tpu",), stage="lower"),)),
        replace(base, invariant=lambda x, y: 0.0),
    ]
    for v in variants:
        assert digest.harness_digest(v) != d, v
        assert v.fingerprint == base.fingerprint  # the harness is the same; its definition is not
    assert digest.harness_digest(replace(base)) == d


def test_options_digest_sees_what_changes_results(monkeypatch) -> None:  # noqa: ANN001
    d = digest.options_digest(Options())
    assert digest.options_digest(Options(crossexec=False)) != d
    assert digest.options_digest(Options(repeats=5)) != d
    assert digest.options_digest(Options(platforms=("cpu",))) != d
    assert digest.options_digest(Options(), env={"XLA_FLAGS": "--xla_cpu_enable_fast_math=true"}) != d
    monkeypatch.setenv("FARM_PLANT", "wrong_lowering:sin:tpu")
    assert digest.options_digest(Options()) != d


@pytest.mark.parametrize("var, a, b", [("OPENBLAS_CORETYPE", "Haswell", "Prescott"), ("OMP_NUM_THREADS", "1", "2"),
                                       ("MKL_CBWR", "AUTO", "COMPATIBLE"), ("OPENBLAS_NUM_THREADS", "1", "4")])
def test_blas_and_openmp_variables_are_in_both_keys(var: str, a: str, b: str) -> None:
    """The BLAS kernel and thread count change the NumPy/SciPy reference (and XLA CPU's threads):
    both halves of the options digest (result and downstream key) move; an unrelated variable moves
    neither. Only the computed key's input changes, not this process's environment."""
    def halves(env: dict[str, str]) -> list[str]:
        return digest.options_digest(Options(), env=env).split(":")

    one, other = halves({var: a}), halves({var: b})
    assert one[0] != other[0] and one[1] != other[1]
    assert halves({var: a, "EDITOR": "vi"}) == halves({var: a, "EDITOR": "nano"}) == one


def _installation(shadow: Path, memo: Path) -> dict:
    script = "import json; from farm.cache import key as digest; print(json.dumps(digest.installation().to_dict()))"
    env = {**os.environ, "PYTHONPATH": f"{shadow}{os.pathsep}{ROOT}", "FARM_DIGEST_CACHE": str(memo)}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_installation_digest_follows_file_content_not_versions(tmp_path) -> None:  # noqa: ANN001
    """A package found first on sys.path (an editable checkout) is hashed by content: the
    same version with one edited byte is another installation."""
    import ml_dtypes

    shadow, memo = tmp_path / "site", tmp_path / "memo.json"
    shutil.copytree(Path(ml_dtypes.__file__).parent, shadow / "ml_dtypes")
    before = _installation(shadow, memo)
    init = shadow / "ml_dtypes" / "__init__.py"
    init.write_text(init.read_text() + "\n# edited\n")
    after = _installation(shadow, memo)
    assert after["parts"]["ml_dtypes"] != before["parts"]["ml_dtypes"]
    assert after["reference"] != before["reference"] and after["digest"] != before["digest"]
    assert after["python"] == before["python"] and after["compiler"] == before["compiler"]
    init.write_text(init.read_text().replace("\n# edited\n", ""))
    assert _installation(shadow, memo)["digest"] == before["digest"]


def test_unchanged_files_are_not_hashed_again(tmp_path) -> None:  # noqa: ANN001
    files = digest.FileDigests(tmp_path / "memo.json")
    f = tmp_path / "a.txt"
    f.write_text("one")
    first = files.sha(str(f))
    files.save()
    again = digest.FileDigests(tmp_path / "memo.json")
    assert again.sha(str(f)) == first and again.hashed_bytes == 0
    f.write_text("two")  # new size and mtime: hashed again
    assert again.sha(str(f)) != first and again.hashed_bytes == 3


def test_environment_is_every_variable_jax_xla_or_a_plugin_reads() -> None:
    from farm.cache.hermetic import environment

    env = {"JAX_RANDOM_SEED_OFFSET": "1", "XLA_PYTHON_CLIENT_ALLOCATOR": "platform", "NCCL_ALGO": "ring",
           "NVIDIA_TF32_OVERRIDE": "0", "LIBTPU_INIT_ARGS": "x", "HIP_LAUNCH_BLOCKING": "1", "FARM_PLANT": "p",
           "CUDA_VISIBLE_DEVICES": "0", "TPU_VISIBLE_CHIPS": "0", "TF_CPP_MIN_LOG_LEVEL": "2", "HOME": "/root"}
    assert set(environment(env)) == {"JAX_RANDOM_SEED_OFFSET", "XLA_PYTHON_CLIENT_ALLOCATOR", "NCCL_ALGO",
                                     "NVIDIA_TF32_OVERRIDE", "LIBTPU_INIT_ARGS", "HIP_LAUNCH_BLOCKING", "FARM_PLANT"}
    d = digest.options_digest(Options())
    assert digest.options_digest(Options(), env={"JAX_RANDOM_SEED_OFFSET": "1"}).split(":")[0] != d.split(":")[0]
    # x64 changes the result key, not the downstream one: its effect is in the modules and inputs
    x64 = digest.options_digest(Options(), env={"JAX_ENABLE_X64": "1"})
    assert x64.split(":")[0] != d.split(":")[0] and x64.split(":")[1] == d.split(":")[1]
    assert digest.options_digest(Options(), env={"XLA_FLAGS": "--x"}).split(":")[1] != d.split(":")[1]


def test_loaded_modules_installed_files_edited_in_place_and_memo(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """A distribution's file as its RECORD lists it is covered by the distribution; the
    same file edited in place, or a module no distribution installed, is hashed itself;
    the digest is recomputed only when sys.modules grows."""
    import base64
    import hashlib
    import importlib

    from farm.cache import hermetic

    site, loose = tmp_path / "site", tmp_path / "loose"
    (site / "farm_test_dist").mkdir(parents=True)
    loose.mkdir()
    code = b"X = 1\n"
    (site / "farm_test_dist" / "__init__.py").write_bytes(code)
    b64 = base64.urlsafe_b64encode(hashlib.sha256(code).digest()).decode().rstrip("=")
    (site / "farm_test_dist-1.0.dist-info").mkdir()
    (site / "farm_test_dist-1.0.dist-info" / "RECORD").write_text(f"farm_test_dist/__init__.py,sha256={b64},6\n")
    (loose / "farm_test_loose.py").write_text("Y = 2\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(loose))
    importlib.import_module("farm_test_dist")
    importlib.import_module("farm_test_loose")

    def loaded() -> hermetic.Loaded:
        return hermetic.Loaded(digest._covered, lambda p: hashlib.sha256(Path(p).read_bytes()).hexdigest(),
                               lambda root, skip: digest.FILES.tree(root, skip), ROOT,
                               sites=[str(site), *hermetic.site_dirs()])

    first = loaded()
    parts = first.parts()
    assert "farm_test_dist" not in parts and "farm_test_loose" in parts
    d = first.digest()
    assert first.digest() == d and first.computed == 1  # sys.modules unchanged: not recomputed
    (site / "farm_test_dist" / "__init__.py").write_bytes(b"X = 2\n")  # edited in place, RECORD unchanged
    again = loaded()
    assert again.parts()["farm_test_dist"] != parts.get("farm_test_dist") and again.digest() != d
    monkeypatch.setitem(sys.modules, "farm_test_extra", types.ModuleType("farm_test_extra"))
    again.digest()
    assert again.computed == 1  # one more module, but no file: the same set, nothing hashed
    for name in ("farm_test_dist", "farm_test_loose"):
        sys.modules.pop(name, None)


def _in_a_worker_process(then: str, every_family: bool = False) -> str:
    """Run ``then`` (Python) in a fresh process after it has done what a worker does (load
    the catalog, run one harness, or the first of each family); its last line of output."""
    script = ("from workers.runtime import JobRunner\n"
              "r = JobRunner('farm', [], {'platforms': ['cpu'], 'run_on': ['cpu']})\n"
              f"firsts = {{}} if {every_family} else {{'': next(iter(r.harnesses.values()))}}\n"
              "for h in r.harnesses.values(): firsts.setdefault(h.family, h)\n"
              "for h in firsts.values(): r.run_one(h.fingerprint)\n" + then)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def test_farm_code_digest_covers_everything_a_worker_imports() -> None:
    """Every farm module a worker process loads to run harnesses (one of each family) is in
    the farm-code digest, or is a harness family module (part of each harness's own digest).
    The loaded-module digest leaves every farm module out, so this is what keys them."""
    last = _in_a_worker_process(
        "import sys, json, workers.actor, workers.standalone\n"
        "print(json.dumps(sorted(m.__file__ for m in list(sys.modules.values()) if getattr(m, '__file__', None))))",
        every_family=True)
    loaded = {Path(f).resolve() for f in json.loads(last)}
    ours = {p for p in loaded if ROOT in p.parents and p.suffix == ".py" and ".venv" not in p.parts}
    covered = set(digest.farm_code_files())
    families = {p for p in ours if p.parent == ROOT / "harnesses"}
    missing = sorted(str(p.relative_to(ROOT)) for p in ours - covered - families)
    assert not missing, f"imported by workers but not in farm.cache.key.FARM_CODE: {missing}"


def test_the_loaded_digest_is_the_same_whichever_farm_modules_the_driver_imported() -> None:
    """The driver looks results up by the key the workers stored them under: importing any
    more of the farm's own modules (the CLI's, the store's, coverage, the dashboards) must
    not change the loaded-module digest. (A driver that had run ``farm coverage`` in-process
    computed another key, and every later lookup missed.)"""
    last = _in_a_worker_process(
        "from farm.cache import key as cachekey\n"
        "before = cachekey.loaded_digest()\n"
        "import importlib, pkgutil, farm, workers, dashboards\n"
        "for pkg in (farm, workers, dashboards):\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        if '__main__' not in m.name and '.migrations' not in m.name:\n"
        "            importlib.import_module(m.name)\n"
        "print(before, cachekey.loaded_digest())")
    before, after = last.split()
    assert before == after, "importing more of the farm's own modules changed the loaded-module digest"


# ------------------------------------------------------------------ the store
def _outcome(h, status: str, key: str | None = "k") -> Outcome:  # noqa: ANN001
    return Outcome(h.fingerprint, h.name, [Record("trace", "any", "ok"), Record("execute", "cpu", status)],
                   result_key=key, downstream_key=key)


@pytest.mark.parametrize("status", ["crashed", "timeout"])
def test_crashes_and_timeouts_are_never_reused(sqlite_url, status) -> None:  # noqa: ANN001
    from farm.host import describe
    from farm.store import writes
    from farm.store.db import Store

    store = Store(sqlite_url)
    h = _sin()
    with store.session() as s:
        env = describe(device_kinds=["cpu"])
        first = writes.create_run(s, env=env, name="first")
        hids = writes.harness_ids(s, [h])
        writes.Writer(s, first, hids).write([_outcome(h, status)])
        second = writes.create_run(s, env=env, name="second")
        assert writes.copy_cached(s, second, {hids[h.fingerprint]: "k"}) == {}
        assert writes.downstream_priors(s, second, [hids[h.fingerprint]]) == {}
        third = writes.create_run(s, env=env, name="third")
        writes.Writer(s, third, hids).write([_outcome(h, "ok")])
        fourth = writes.create_run(s, env=env, name="fourth")
        assert writes.copy_cached(s, fourth, {hids[h.fingerprint]: "k"}) == {hids[h.fingerprint]: third.id}
        assert writes.copy_cached(s, fourth, {hids[h.fingerprint]: "other"}) == {}


# ------------------------------------------------------------------ end to end
def _sweep(db: str, name: str, pythonpath: str, *extra: str) -> str:
    env = {**os.environ, "PYTHONPATH": pythonpath, "RAY_USAGE_STATS_ENABLED": "0"}
    p = subprocess.run([str(ROOT / ".venv/bin/farm") if (ROOT / ".venv/bin/farm").exists() else "farm",
                        "sweep", "--db", db, "--group", "sin,exp", "--dtype", "float32", "--name", name,
                        "--workers", "1", *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stderr


def _results(path: Path, run: str) -> dict[str, dict[str, tuple[str, dict]]]:
    con = sqlite3.connect(path)
    rows = con.execute("SELECT h.name, r.stage || '/' || r.platform, r.status, r.facts FROM results r "
                       "JOIN runs ON runs.id = r.run_id JOIN harnesses h ON h.id = r.harness_id "
                       "WHERE runs.name = ?", (run,)).fetchall()
    out: dict[str, dict[str, tuple[str, dict]]] = {}
    for name, key, status, facts in rows:
        out.setdefault(name, {})[key] = (status, json.loads(facts) if isinstance(facts, str) else facts)
    return out


@pytest.mark.slow(reason="six farm sweeps, each a fresh process importing an edited copy of jax")
def test_a_lowering_rule_edited_in_place_is_seen_by_the_next_sweep(tmp_path) -> None:  # noqa: ANN001
    """A JAX developer edits sin's lowering rule in an editable jax (same version string)
    and sweeps again. Keyed on versions, the farm copied the old ``ok``. Now: sin ran the
    edited rule, so it is re-run and fails against the reference; exp never ran it, so it
    is reused whole (``farm.cache.units``). An edit to a helper both run re-runs both
    (their modules are unchanged: compile/execute/compare are reused), and a module-level
    edit re-runs everything."""
    import jax

    shadow = tmp_path / "site"
    shutil.copytree(Path(jax.__file__).parent, shadow / "jax")  # with its bytecode: 10 s less per process
    path = f"{shadow}{os.pathsep}{ROOT}"
    db_file = tmp_path / "farm.db"
    db = f"sqlite:///{db_file}"
    _sweep(db, "before", path)
    before = _results(db_file, "before")
    assert {s for r in before.values() for s, _ in r.values()} == {"ok"}
    con = sqlite3.connect(db_file)
    ids = lambda: dict(con.execute("SELECT name, id FROM runs").fetchall())  # noqa: E731

    def origins(run: str) -> dict[str, tuple[str, int | None]]:
        return {n: (w, c) for n, w, c in con.execute(
            "SELECT h.name, o.worker, o.cached_from FROM harness_outcomes o JOIN runs ON runs.id = o.run_id "
            "JOIN harnesses h ON h.id = o.harness_id WHERE runs.name = ?", (run,))}

    lax_py = shadow / "jax" / "_src" / "lax" / "lax.py"
    text = lax_py.read_text()
    sin_rule = "def _sin_lowering(ctx, x, accuracy):"
    assert text.count("return _nary_lower_hlo(hlo.sine, ctx, x, accuracy=accuracy)") == 1 and sin_rule in text
    lax_py.write_text(text.replace("return _nary_lower_hlo(hlo.sine, ctx, x, accuracy=accuracy)",
                                   "return _nary_lower_hlo(hlo.cosine, ctx, x, accuracy=accuracy)"))
    log = _sweep(db, "after", path)
    after = _results(db_file, "after")
    sin = after["sin_float32_3x4"]
    assert sin["compare/cpu"][0] == "fail", log
    assert not any("reused_from" in f for _, f in sin.values())
    assert "1 of them although jax changed" in log, log
    got = origins("after")
    assert got["exp_float32_3x4"] == ("cache", ids()["before"])  # exp ran no edited code: reused whole
    assert got["sin_float32_3x4"][0] != "cache" and got["sin_float32_3x4"][1] is None
    assert after["exp_float32_3x4"] == before["exp_float32_3x4"]

    # nothing changed since: both reused whole by the whole key, from the runs that computed them
    log = _sweep(db, "again", path)
    assert "2 harnesses reused whole" in log and "although jax changed" not in log, log
    assert origins("again") == {"sin_float32_3x4": ("cache", ids()["after"]), "exp_float32_3x4": ("cache", ids()["before"])}

    # a helper both rules run: both re-run; their modules are the same, so compile/execute/compare are reused
    text = lax_py.read_text()
    line = "  out_dtype = params.pop('out_dtype', None)\n"  # the first statement of _nary_lower_hlo
    assert text.count(line) == 1 and text.index("def _nary_lower_hlo(") < text.index(line)
    lax_py.write_text(text.replace(line, "  _farm_test_edit = None\n" + line))
    log = _sweep(db, "helper", path)
    got = origins("helper")
    assert {w for w, _ in got.values()} & {"cache"} == set(), log
    exp = _results(db_file, "helper")["exp_float32_3x4"]
    assert {"compile/cpu", "execute/cpu", "compare/cpu"} <= {k for k, (_, f) in exp.items() if "reused_from" in f}

    # a module-level statement anywhere in jax: every harness re-runs
    (shadow / "jax" / "_src" / "dtypes.py").write_text((shadow / "jax" / "_src" / "dtypes.py").read_text()
                                                       + "\n_FARM_TEST_EDIT = 1\n")
    log = _sweep(db, "module-level", path)
    assert {w for w, _ in origins("module-level").values()} & {"cache"} == set(), log


def test_show_and_dashboard_say_what_was_reused_and_from_which_run(sqlite_url) -> None:  # noqa: ANN001
    from dashboards.app import create_app
    from farm.commands.show import run_json
    from farm.host import describe
    from farm.store import writes
    from farm.store.db import Store

    store = Store(sqlite_url)
    h, g = _sin(), _sin(params={"p": 1})
    with store.session() as s:
        env = describe(device_kinds=["cpu"])
        first = writes.create_run(s, env=env, name="first")
        hids = writes.harness_ids(s, [h, g])
        reused_rec = Record("compile", "cpu", "ok", facts={"reused_from": 99})
        writes.Writer(s, first, hids).write([_outcome(h, "ok"), _outcome(g, "ok", key="g")])
        second = writes.create_run(s, env=env, name="second")
        writes.copy_cached(s, second, {hids[h.fingerprint]: "k"})
        writes.Writer(s, second, hids).write(
            [Outcome(g.fingerprint, g.name, [Record("trace", "any", "ok"), reused_rec])])
        first_id, second_id = first.id, second.id
    shown = {x["harness"]: x for x in run_json(store, "second")["harnesses"]}
    assert (shown[h.name]["reused"], shown[h.name]["reused_from"]) == ("whole", first_id)
    assert (shown[g.name]["reused"], shown[g.name]["reused_from"]) == ("downstream", 99)
    assert shown[g.name]["platforms"]["any"]["trace"]["reused"] is None
    app = create_app(sqlite_url)
    page = app.test_client().get(f"/harness/{h.fingerprint}.json?run={second_id}").get_json()
    assert {(r["stage"], r["reused"], r["reused_from"]) for r in page["results"]} >= {("execute", "whole", first_id)}


def test_the_unit_memo_is_one_per_python(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """ast.dump differs between Python 3.11 and 3.13: with one memo for both, a jax file's
    skeleton parsed by 3.13 and its edited copy parsed by 3.11 never matched, and the 3.11 line
    re-ran every harness after a one-rule edit (the edited-jax test failed there). A memo
    another Python wrote is not read."""
    import sys

    from farm.cache import units

    monkeypatch.delenv("FARM_UNIT_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    memo = units.UnitDigests(lambda p: "same-sha")
    assert memo.path.name == f"unit-digests-{units.UNITS_VERSION}-{sys.implementation.cache_tag}.json"
    other = memo.path.with_name(f"unit-digests-{units.UNITS_VERSION}-cpython-00.json")
    other.parent.mkdir(parents=True, exist_ok=True)
    other.write_text(json.dumps({"same-sha": units.parse_units(b"def g():\n    return 2\n").to_json()}))
    src = tmp_path / "m.py"
    src.write_text("def f():\n    return 1\n")
    assert set(memo.of(str(src)).units) == {"f"}
