"""farm bisect: the search, what bad means, a jax git history built from the installed jax
(real steps: each commit's jax imported in its own process over the installed jaxlib and
the sin harness run through the pipeline), the step cache, bad input, and stored runs."""
from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from farm.analysis.bisection import BAD, GOOD, SKIP, Badness, Probe, parse_when, search
from farm.errors import ConfigError, HarnessNotFound
from farm.run.bisect import driver
from farm.run.bisect.driver import Target
from farm.run.bisect.releases import release_line

sys.path.insert(0, str(Path(__file__).parent))
import jax_history  # noqa: E402

HARNESS = "sin_float32_3x4"
N, SIN_AT, BROKEN = 40, 28, (9, 10, 19, 35)
OPTIONS = {"platforms": ["cpu"], "run_on": ["cpu"], "crossexec": False, "keep_modules": False}


# --------------------------------------------------------------------------- the search, pure
@pytest.mark.parametrize("n,first_bad,skips", [(500, 317, set()), (500, 3, {1, 2}), (41, 40, {20, 21, 22}),
                                               (2, 1, set()), (45, 31, {29, 30})])
def test_search_finds_the_first_bad_in_log2_steps_plus_skips(n: int, first_bad: int, skips: set[int]) -> None:
    def probe(i: int) -> Probe:
        return Probe(i, SKIP if i in skips else (BAD if i >= first_bad else GOOD))

    found = search(n, probe)
    judged = [p for p in found.probes if p.verdict != SKIP]
    assert len(judged) <= math.ceil(math.log2(n)) + 1
    assert found.first_bad == first_bad or (found.last_good < first_bad <= found.first_bad
                                            and set(found.ambiguous) <= skips)
    assert set(found.ambiguous) == set(range(found.last_good + 1, found.first_bad))
    assert all(i in skips for i in found.ambiguous)


def test_conditions_read_status_metrics_facts_and_the_good_end() -> None:
    good = [{"stage": "execute", "status": "ok", "metrics": {"execute_s": 1.0}},
            {"stage": "compare", "status": "ok", "metrics": {"max_ulp_err": 1.0}},
            {"stage": "lower", "status": "ok", "facts": {"module_sha256": "aaa"}}]
    slow = [{**good[0], "metrics": {"execute_s": 2.5}}, good[1], {**good[2], "facts": {"module_sha256": "bbb"}}]
    wrong = [good[0], {"stage": "compare", "status": "fail", "error": "3 of 12 elements differ",
                       "metrics": {"max_ulp_err": 9.0}}, good[2]]

    def bad(texts: list[str], recs: list[dict[str, Any]]) -> bool:
        return Badness(conditions=parse_when(texts)).judge(recs, good) == BAD

    assert bad(["execute_s>2x"], slow) and not bad(["execute_s>2x"], good) and not bad(["execute_s>3x"], slow)
    assert bad(["ulp>4"], wrong) and not bad(["ulp>4"], slow)
    assert bad(["status=fail"], wrong) and not bad(["status=fail"], slow) and bad(["compare.status!=ok"], wrong)
    assert bad(["error~elements differ"], wrong) and bad(["error!~elements differ"], good)
    assert bad(["lower.module_sha256!=good"], slow) and not bad(["lower.module_sha256!=good"], wrong)
    assert bad(["status=fail", "ulp>4"], wrong) and not bad(["status=fail", "execute_s>2x"], wrong)


@pytest.mark.parametrize("text", ["ulp", "status=broken", "nostage.status=fail", "ulp>many", "error~(", "x="])
def test_a_bad_condition_is_one_line(text: str) -> None:
    with pytest.raises(ConfigError, match="--when"):
        parse_when([text])


def test_release_line_checks_its_ends() -> None:
    avail = ["0.8.3", "0.9.0", "0.9.0.1", "0.9.1", "0.9.2", "0.10.2"]
    assert release_line("0.8.3", "0.9.2", avail) == ["0.8.3", "0.9.0", "0.9.0.1", "0.9.1", "0.9.2"]
    for good, bad, msg in (("0.8.3", "0.9.9", "no such jax release"), ("0.9.2", "0.9.2", "same release"),
                           ("0.9.2", "0.8.3", "swap them")):
        with pytest.raises(ConfigError, match=msg):
            release_line(good, bad, avail)


# --------------------------------------------------------------------------- a real jax history
@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("bisect")
    shas = jax_history.build(root / "repo", N, SIN_AT, BROKEN)
    mp = pytest.MonkeyPatch()
    mp.setenv("FARM_CACHE_DIR", str(root / "cache"))
    yield {"root": root, "repo": root / "repo", "shas": shas}
    mp.undo()


def _bisect(repo: Path, good: str, bad: str, badness: Badness | None = None) -> driver.Answer:
    target = Target(HARNESS, (HARNESS,), "farm", OPTIONS, ("sin",), badness)
    return driver.bisect(target, good, bad, jax_repo=str(repo), log=lambda m: None)


def test_synthetic_history_finds_the_lowering_change_in_log2_steps(history: dict[str, Any]) -> None:
    shas = history["shas"]
    ans = _bisect(history["repo"], shas[0], "main")
    assert ans.first_bad["commit"] == shas[SIN_AT]
    assert ans.last_good["commit"] == shas[SIN_AT - 1]
    assert "jax/_src/lax/lax.py" in ans.first_bad["files"]
    assert ans.first_bad["subject"] == "lax: lower sin through the cosine rule"
    probes = ans.steps[2:]  # after the two ends
    skips = [s for s in probes if s["verdict"] == SKIP]
    assert all("does not import" in s["status"] for s in skips)
    assert {s["commit"] for s in skips} <= {shas[i] for i in BROKEN}
    assert len(probes) - len(skips) <= math.ceil(math.log2(N + 1)) + 1
    assert ans.ran == len(ans.steps)

    again = _bisect(history["repo"], shas[0], "main")  # the same range: every step from the cache
    assert again.ran == 0 and all(s["cached"] for s in again.steps)
    assert again.first_bad == ans.first_bad and [s["verdict"] for s in again.steps] == [s["verdict"] for s in ans.steps]


def test_the_step_cache_cannot_hide_a_changed_history(history: dict[str, Any]) -> None:
    """Same trees before the change are served from the cache (same content); a history whose
    sin change moved later must be found there, not where the cached run found it."""
    later = SIN_AT + 3
    shas = jax_history.build(history["root"] / "repo2", N, later, BROKEN)
    ans = _bisect(history["root"] / "repo2", shas[0], "main")
    assert ans.first_bad["commit"] == shas[later]
    assert ans.ran >= 1  # the moved commits' trees are new content


def _cli(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str]:
    """``farm bisect HARNESS ARGS`` in this process (jax and the catalog are loaded once)."""
    from farm.cli import main

    rc = main(["bisect", HARNESS, *args])
    return rc, capsys.readouterr().err


def test_bad_input_is_one_line_and_exit_2(history: dict[str, Any], capsys: pytest.CaptureFixture) -> None:
    repo, shas = str(history["repo"]), history["shas"]
    cases = [
        (["--good", "no-such-ref", "--bad", "main"], "--good no-such-ref: no such commit"),
        (["--good", shas[5], "--bad", shas[5]], "same commit"),
        (["--good", shas[0], "--bad", shas[20]], "nothing fails there"),
        (["--good", shas[0], "--bad", shas[20], "--when", "status=fail"], "agree: both are good"),
        (["--good", shas[9], "--bad", shas[10]], "imports here"),
        (["--good", shas[SIN_AT], "--bad", "main", "--when", "status=fail"], "agree: both are bad"),
    ]
    for args, msg in cases:
        rc, err = _cli(capsys, "--jax-repo", repo, *args)
        assert rc == 2, (args, err)
        lines = [ln for ln in err.splitlines() if ln.startswith("farm: error:")]
        assert len(lines) == 1 and msg in lines[0], (args, err)
    rc, err = _cli(capsys, "--good", "main~3", "--bad", "main")  # a commit without --jax-repo
    assert rc == 2 and "--jax-repo" in err
    for args, msg in ((["--vjp", "3"], "--vjp 3"), (["--pallas-targets", "tpu:v99"], "v99")):  # read as farm sweep
        rc, err = _cli(capsys, "--jax-repo", repo, "--good", shas[0], "--bad", "main", *args)
        assert rc == 2 and msg in err, (args, err)


# --------------------------------------------------------------------------- the farm's own history
def test_history_finds_the_first_stored_run_that_went_bad(sqlite_url: str) -> None:
    from farm.results import Outcome, Record
    from farm.run.bisect.history import bisect_history
    from farm.store import open_store, writes

    store = open_store(sqlite_url)
    env = {"jax_version": "0.10.2", "jaxlib_version": "0.10.2", "python": "3.11", "host": "t", "device_kinds": ["cpu"],
           "xla_flags": "", "farm_commit": "abc"}
    h = {"fingerprint": "fp1", "name": "sin_x", "catalog": "farm", "family": "f", "primitive": "sin", "group": "sin",
         "dtype": "float32", "shapes": [[3]], "params": {}}
    ulps = [1.0, 1.0, 2.0, 9.0, 9.0, 1.0, 9.0]
    for i, ulp in enumerate(ulps):
        with store.session() as s:
            run = writes.create_run(s, env=env, name=f"r{i}", catalog="farm", platforms=["cpu"], run_on=["cpu"],
                                    total=1)
            hids = writes.harness_ids(s, [h])
            status = "fail" if ulp > 4 else "ok"
            writes.Writer(s, run, hids).write([Outcome("fp1", "sin_x", [Record(
                "compare", "cpu", status, 0.0, error="3 of 3 elements differ" if status == "fail" else None,
                error_type="Mismatch" if status == "fail" else None, metrics={"max_ulp_err": ulp})], [])])
            writes.finish_run(s, run, "finished")
    ans = bisect_history(store, "sin_x", ("sin_x",), "r0", "r6", Badness(conditions=parse_when(["ulp>4"])))
    assert ans["first_bad"]["name"] == "r3" and ans["last_good"]["name"] == "r2"
    assert [s["verdict"] for s in ans["steps"]] == [GOOD, GOOD, GOOD, BAD, BAD, GOOD, BAD]
    assert "r5" in ans["note"]
    by_sig = bisect_history(store, "sin_x", ("sin_x",), "r0", "r4", None)  # default: the bad run's signature
    assert by_sig["first_bad"]["name"] == "r3"
    with pytest.raises(ConfigError, match="agree"):
        bisect_history(store, "sin_x", ("sin_x",), "r0", "r2", Badness(conditions=parse_when(["ulp>4"])))
    with pytest.raises(ConfigError, match="same run"):
        bisect_history(store, "sin_x", ("sin_x",), "r1", "r1", None)

    # a CLUSTER (a failure signature key) names its harness: the newest stored run failing with it
    import argparse

    from farm.analysis.bisection import signatures_of
    from farm.commands.bisect import _cluster_harnesses

    key = next(iter(signatures_of([{"stage": "compare", "platform": "cpu", "status": "fail", "error_type": "Mismatch",
                                    "error": "3 of 3 elements differ", "metrics": {"max_ulp_err": 9.0}}], ["sin"])))
    assert _cluster_harnesses(argparse.Namespace(db=sqlite_url), key) == (("sin_x",), ("sin",))
    with pytest.raises(HarnessNotFound):
        _cluster_harnesses(argparse.Namespace(db=sqlite_url), "0" * 12)


def test_a_reused_tree_never_serves_stale_bytecode(tmp_path: Path) -> None:
    """A commit's tree is a hard-linked copy of the previous one plus its diff: a changed file of
    the same size, written in the same second, must still import its new content."""
    from farm.run.bisect import jaxgit

    repo = tmp_path / "repo"
    (repo / "jax").mkdir(parents=True)
    shas = []
    for value in ("1", "2"):
        (repo / "jax" / "__init__.py").write_text(f"X = {value}\n")
        (repo / "jax" / "same.py").write_text("Y = 0\n")
        jax_history._git(repo, *(("init", "-q") if value == "1" else ("status",)))
        jax_history._git(repo, "add", "-A")
        jax_history._git(repo, "commit", "-q", "-m", value)
        shas.append(jax_history._git(repo, "rev-parse", "HEAD").strip())
    seen = []
    for sha in shas:
        home = jaxgit.materialize(repo, sha, tmp_path / "trees")
        code = "import jax, jax.same; print(jax.X)"
        seen.append(subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(home)}, cwd=tmp_path,
                                   capture_output=True, text=True, check=True).stdout.strip())
    assert seen == ["1", "2"]
    first, second = (jaxgit.materialize(repo, s, tmp_path / "trees") for s in shas)
    assert (first / "jax" / "same.py").stat().st_ino == (second / "jax" / "same.py").stat().st_ino  # shared
    assert (first / "jax" / "__init__.py").read_text() == "X = 1\n"  # the older tree is untouched


def test_the_step_key_follows_what_the_step_process_gets(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process having configured its worker flags (loading the catalog does) changes
    nothing a step gets; another XLA flag or other options do change the key."""
    from farm.run.bisect.steps import Stepper

    def key(**options: Any) -> str:
        return Stepper([HARNESS], "farm", {**OPTIONS, **options}).key("tree")

    monkeypatch.delenv("XLA_FLAGS", raising=False)
    plain = key()
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    assert key() == plain
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true")
    assert key() != plain
    monkeypatch.delenv("XLA_FLAGS")
    assert key(platforms=["cpu", "tpu"]) != plain
    assert len({plain, key(vjp=1), key(vjp=2), key(shapes=["static", "symbolic"]), key(pallas_targets=["tpu:v5e"])}) == 5
    assert Stepper([HARNESS], "farm", OPTIONS).key("other tree") != plain
