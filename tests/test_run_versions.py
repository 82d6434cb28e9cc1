"""JAX versions as a sweep dimension (farm.run.versions, farm.analysis.versions, farm versions):
each version in its own provisioned venv on its own catalog, every pair's artifacts run by
the other version, kept runs never hiding a change."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from farm.analysis import versions as A
from farm.errors import ConfigError
from farm.run.versions import matrix, venvs
from farm.store import open_store, queries

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OLD = "0.9.2"  # a jax from the last 12 months that the package index serves for Python 3.11


def test_versions_are_checked_and_ordered_numerically() -> None:
    assert venvs.parse("0.10.2, 0.8.3,0.9.2") == ["0.8.3", "0.9.2", "0.10.2"]
    for bad, needle in (("0.9", "not a jax version"), ("0.5.1", "older than the oldest supported"),
                        ("0.9.2,0.9.2", "given twice"), (",", "at least one")):
        with pytest.raises(ConfigError, match=needle):
            venvs.parse(bad)


RELEASES = ["0.5.3", "0.9.2", "0.10.2", "0.11.0", "0.11.2", "0.12.0", "0.12.0.1"]


def test_newest_and_previous_name_releases() -> None:
    """previous is the last release of an older minor line (0.11.2), not 0.12.0; the aliases mix
    with numbers and a repeat through an alias is still a repeat."""
    assert venvs.parse("previous,newest", releases=lambda: RELEASES) == ["0.11.2", "0.12.0.1"]
    assert venvs.parse("0.9.2,newest", releases=lambda: RELEASES) == ["0.9.2", "0.12.0.1"]
    assert venvs.pick("newest", [*RELEASES, "0.13.0"]) == "0.13.0"
    assert venvs.pick("previous", [*RELEASES, "0.13.0"]) == "0.12.0.1"
    with pytest.raises(ConfigError, match="given twice"):
        venvs.parse("0.12.0.1,newest", releases=lambda: RELEASES)
    with pytest.raises(ConfigError, match="no release older"):
        venvs.pick("previous", ["0.12.0", "0.12.0.1"])


def test_published_releases_come_from_the_index() -> None:
    """The real package index: both jax and jaxlib of each number, the pinned jax among them."""
    try:
        found = venvs.published()
    except ConfigError as e:
        pytest.skip(f"no package index here: {e}")
    assert venvs.installed() in found
    assert venvs.key(venvs.pick("newest", found)) >= venvs.key(venvs.installed())
    assert "0.4.36" in found and "0.4.37" not in found  # 0.4.37 was never a jaxlib release


def test_a_malformed_or_oversized_index_answer_is_one_clear_error(tmp_path, monkeypatch) -> None:
    """FARM_PYPI_URL is read as the index: an answer that is not JSON, JSON without a releases
    table, or one over the size bound is a ConfigError naming the index, nothing more."""
    monkeypatch.setenv("FARM_PYPI_URL", tmp_path.as_uri())
    big = b'{"releases": {}, "pad": "' + b"x" * (venvs._MAX_INDEX_BYTES + 1) + b'"}'
    for body, needle in ((b"not json", "Expecting value"), (b"[1, 2]", "no 'releases' table"),
                         (b'{"releases": [1]}', "no 'releases' table"), (big, "over 16 MiB")):
        for name in ("jax", "jaxlib"):
            (tmp_path / name).mkdir(exist_ok=True)
            (tmp_path / name / "json").write_bytes(body)
        monkeypatch.setattr(venvs, "_published", None)
        with pytest.raises(ConfigError, match=needle) as e:
            venvs.parse("newest")
        assert "cannot read jax's releases" in str(e.value) and "\n" not in str(e.value)
    monkeypatch.setattr(venvs, "_published", None)


def _xrow(harness: str, status: str, **facts: str) -> dict:
    return {"harness": harness, "stage": "xhost", "platform": "cpu", "status": status,
            "error": "vs native: 2 of 4 elements differ" if status == "fail" else None, "facts": facts}


def test_matrix_puts_each_pair_in_its_cell_and_names_failures() -> None:
    native = {"0.9.2": [{"harness": "h", "stage": "compare", "platform": "cpu", "status": "ok", "facts": {}}],
              "0.10.2": [{"harness": "h", "stage": "compare", "platform": "cpu", "status": "fail", "facts": {}}]}
    cross = {("0.9.2", "0.10.2"): [_xrow("h", "ok", vs_native="ok")],
             ("0.10.2", "0.9.2"): [_xrow("h", "fail", vs_native="fail", vs_cpu_host="ok")]}
    m = A.matrix(native, cross, {("0.10.2", "0.9.2"): {"jobs": 3, "missing": 2}})
    assert m["versions"] == ["0.9.2", "0.10.2"]
    back, fwd = m["pairs"]["0.9.2>0.10.2"], m["pairs"]["0.10.2>0.9.2"]
    assert back["direction"] == "backward" and back["xhost"] == {"ok": 1} and back["examples"] == []
    assert fwd["direction"] == "forward" and fwd["xhost"] == {"fail": 1} and fwd["no_harness_here"] == 2
    assert fwd["vs_native"] == {"fail": 1} and fwd["examples"][0]["harness"] == "h"
    text = A.render_text(m)
    assert "own: fail 1" in text and "e.g. h: fail" in text


@pytest.fixture(scope="module")
def swept(tmp_path_factory):  # noqa: ANN001, ANN201
    """One real version sweep: OLD (a provisioned venv) and the installed jax."""
    here = venvs.installed()
    assert here and here != OLD
    url = f"sqlite:///{tmp_path_factory.mktemp('versions')}/v.db"
    env = {**os.environ, "PYTHONPATH": ROOT, "RAY_USAGE_STATS_ENABLED": "0"}
    cmd = [sys.executable, "-m", "farm", "sweep", "--jax", f"{OLD},{here}", "--primitive", "sin,cumsum",
           "--family", "elementwise_unary,cumulative", "--dtype", "float32", "--platforms", "cpu,tpu", "--db", url, "--name", "vt",
           "--vjp", "--shapes", "static,symbolic"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    return url, here, cmd, env, p.stderr


@pytest.mark.slow(reason="a second jax version's venv (built once per host, then cached) and a standalone worker per version")
def test_each_version_sweeps_its_own_catalog_in_its_own_environment(swept) -> None:  # noqa: ANN001
    url, here, *_ = swept
    store = open_store(url)
    with store.session() as s:
        for v in (OLD, here):
            run = queries.resolve_run(s, f"vt@jax={v}")
            assert run.status == "finished"
            info = queries.run_dict(s, run)
            assert info["environment"]["jax_version"] == v
            assert info["dims"] == {**dict.fromkeys(info["dims"]), "series": "vt", "jax_version": v}
            rows = queries.results(s, run.id, stage="compare")
            assert len(rows) == 4 and {r["status"] for r in rows} == {"ok"}  # sin, 3 cumsum


def test_every_check_runs_in_each_versions_own_run(swept) -> None:  # noqa: ANN001
    """--vjp and --shapes reach each version's own run (a version sweep refused --vjp, and
    dropped --shapes without a word); the cross-version runs carry the static artifacts only."""
    url, here, *_ = swept
    store = open_store(url)
    with store.session() as s:
        for v in (OLD, here):
            rows = queries.results(s, queries.resolve_run(s, f"vt@jax={v}").id)
            by_stage = {st: {r["status"] for r in rows if r["stage"] == st} for st in ("vjp", "symbolic_call")}
            assert by_stage == {"vjp": {"ok"}, "symbolic_call": {"ok"}}, (v, by_stage)
            assert {"cpu", "tpu"} <= {r["platform"] for r in rows if r["stage"] == "vjp"}
            cross = queries.results(s, queries.resolve_run(s, f"vt@xver={v}>{OLD if v == here else here}").id)
            assert cross and not {r["stage"] for r in cross} & {"vjp", "symbolic_call", "symbolic_export"}


def test_every_pair_runs_the_other_versions_artifacts(swept) -> None:  # noqa: ANN001
    url, here, *_ = swept
    native, cross, stats = matrix.load(open_store(url), "vt")
    assert set(native) == {OLD, here} and set(cross) == {(OLD, here), (here, OLD)}
    for (a, b), rows in cross.items():
        assert len(rows) == 4, (a, b)
        for r in rows:
            assert r["status"] == "ok", r
            assert r["facts"]["lowered_on"] == a and r["facts"]["run_on_jax"] == b
            assert r["facts"]["vs_native"] == "ok" and r["facts"]["vs_cpu_host"] == "ok"
        assert stats[(a, b)]["missing"] == 0
    m = json.loads(subprocess.run([sys.executable, "-m", "farm", "versions", "vt", "--db", url, "--format", "json"],
                                  env=swept[3], capture_output=True, text=True, cwd=ROOT, check=True).stdout)
    assert m["pairs"][f"{OLD}>{here}"]["direction"] == "backward"
    assert m["pairs"][f"{here}>{OLD}"]["xhost"] == {"ok": 4}
    # any reference to one of its runs names the sweep: the latest run is a cross-version one
    latest = subprocess.run([sys.executable, "-m", "farm", "versions", "latest", "--db", url, "--format", "json"],
                            env=swept[3], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert json.loads(latest) == m
    p = subprocess.run([sys.executable, "-m", "farm", "versions", "nosuch", "--db", url], env=swept[3],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "no run 'nosuch'" in p.stderr


def test_the_same_sweep_again_keeps_its_runs_and_a_changed_one_is_refused(swept) -> None:  # noqa: ANN001
    url, here, cmd, env, _ = swept
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    assert f"jax {OLD}: cached" in p.stderr and "(ran)" not in p.stderr and p.stderr.count("(kept)") == 4
    # another selection under the same name is not silently the old runs
    changed = [("exp" if a == "sin,cumsum" else a) for a in cmd]
    p = subprocess.run(changed, env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 2 and "made with another selection" in p.stderr, p.stderr[-2000:]


def test_kept_run_identity_covers_selection_options_and_artifact_version() -> None:
    f, o = {"catalog": "farm", "primitive": ["sin"]}, {"platforms": ["cpu"]}
    base = matrix.identity(OLD, f, o)
    assert base == matrix.identity(OLD, dict(f), dict(o))
    assert len({base, matrix.identity(OLD, {**f, "primitive": ["exp"]}, o), matrix.identity(OLD, f, {"platforms": ["tpu"]}),
                matrix.identity("0.8.3", f, o), matrix.identity(OLD, f, o, exported_on="0.8.3")}) == 5


def test_an_uninstallable_version_is_one_clear_error(tmp_path) -> None:  # noqa: ANN001
    env = {**os.environ, "PYTHONPATH": ROOT, "FARM_CACHE_DIR": str(tmp_path)}
    p = subprocess.run([sys.executable, "-m", "farm", "sweep", "--jax", "0.9.99", "--primitive", "sin", "--dtype",
                        "float32", "--db", f"sqlite:///{tmp_path}/x.db"], env=env, capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert p.returncode == 2, p.stderr[-2000:]
    assert p.stderr.strip().splitlines()[-1].startswith("farm: error: jax 0.9.99: pip could not install it")


def test_dashboard_versions_page_shows_the_matrix_and_checks_its_parameter(swept, tmp_path) -> None:  # noqa: ANN001
    from dashboards.app import create_app  # noqa: PLC0415

    url, here, *_ = swept
    client = create_app(url).test_client()
    page = client.get("/versions")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'id="version-matrix"' in html and f"{OLD} → {here}" in html and "backward" in html
    j = client.get("/versions.json").get_json()
    assert j["name"] == "vt" and j["pairs"][f"{here}>{OLD}"]["xhost"] == {"ok": 4}
    bad = client.get("/versions?name=nope")
    assert bad.status_code == 400 and "nope" in bad.get_data(as_text=True)
    empty = create_app(f"sqlite:///{tmp_path / 'empty.db'}").test_client().get("/versions")
    assert empty.status_code == 200 and 'id="nothing-versions"' in empty.get_data(as_text=True)


def test_newer_pythons_are_offered_for_a_jax_that_requires_one() -> None:
    """jax 0.11 and later require Python 3.12: provisioning tries this Python, then each newer
    one found (a pyenv shim that does not run is skipped)."""
    found = venvs.interpreters()
    assert found[0] == sys.executable
    minors = [int(subprocess.run([p, "-c", "import sys; print(sys.version_info.minor)"], capture_output=True,
                                 text=True, check=True).stdout) for p in found]
    assert minors[0] == sys.version_info.minor and minors == sorted(set(minors))
