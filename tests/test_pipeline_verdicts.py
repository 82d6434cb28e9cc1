"""Sound verdicts: each test plants a change that an earlier farm reported as ``ok``
and checks the verdict is now right (issue: sound verdicts)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from farm import catalog
from farm.pipeline import run_harness
from farm.results import Options

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _by(out, stage: str, platform: str):  # noqa: ANN001, ANN202
    return next(r for r in out.records if r.stage == stage and r.platform == platform)


# ------------------------------------------------------------ exact module identity
PLANTED = """
import json, sys
import numpy as np
from jax import lax
from farm import catalog
from farm import faults
from farm.pipeline import run_harness
from farm.results import Options
faults.plant_from_env()
n = int(sys.argv[1])
h = catalog.define("test_only", "sin", lax.sin, [catalog.RandArg((n,), "float32")], dtype="float32",
                   catalog="test_only", reference=np.sin)
o = run_harness(h, Options(platforms=("cpu", "tpu"), repeats=1))
print(json.dumps({f"{r.stage}/{r.platform}": [r.status, dict(r.facts)] for r in o.records}, default=str))
"""


def run_planted(plant: str, *argv: str) -> dict:
    env = {**os.environ, "FARM_PLANT": plant, "PYTHONPATH": ROOT}
    p = subprocess.run([sys.executable, "-c", PLANTED, *argv], env=env, capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_modules_that_differ_only_in_a_large_constant_are_not_identical() -> None:
    """The tpu lowering adds a 100-element constant that differs from cpu's in one value.
    Printed with elided constants both modules hashed alike, so crossexec declared tpu
    "identical to cpu" without running it and the bug read ok."""
    res = run_planted("wrong_constant:sin:tpu", "100")
    assert res["lower/cpu"][1]["module_sha256"] != res["lower/tpu"][1]["module_sha256"]
    assert res["compare/cpu"][0] == "ok"
    assert res["crossexec/tpu"][0] == "fail" and "identical_to" not in res["crossexec/tpu"][1]


def test_identical_modules_still_share_their_identity() -> None:
    res = run_planted("wrong_constant:sin:none", "100")
    assert res["lower/cpu"][1]["module_sha256"] == res["lower/tpu"][1]["module_sha256"]
    assert res["crossexec/tpu"] == ["ok", {"identical_to": "cpu"}]


def test_compile_reuse_never_runs_another_modules_executable() -> None:
    """Two harnesses whose modules differ only in a large constant: the second must not
    reuse the first's executable (it would compute the first one's constant)."""
    import jax.numpy as jnp

    from farm import pipeline

    pipeline.clear_caches()
    outs = []
    for k in (1.0, 2.0):
        c = np.arange(200, dtype=np.float32) + k  # no splat: printed elided before
        h = catalog.define("test_only", "add", lambda x, c=c: x + jnp.asarray(c), [catalog.RandArg((200,), "float32")],
                           dtype="float32", catalog="test_only", reference=lambda x, c=c: x + c, params={"k": k})
        outs.append(run_harness(h, Options(platforms=("cpu",), repeats=1)))
    assert _by(outs[1], "compare", "cpu").status == "ok"
    assert not _by(outs[1], "compile", "cpu").facts.get("reused")


def test_a_reused_compile_is_recorded_as_reused_not_with_another_harness_time() -> None:
    """Identical modules share one executable; the second harness must not report the
    first one's compile time as its own."""
    from jax import lax

    from farm import pipeline

    pipeline.clear_caches()
    outs = [run_harness(catalog.define("test_only", "sin", lax.sin, [catalog.RandArg((7,), "float32")],
                                       dtype="float32", catalog="test_only", params={"s": seed}),
                        Options(platforms=("cpu",), repeats=1)) for seed in (1, 2)]
    first, second = (_by(o, "compile", "cpu") for o in outs)
    assert first.metrics["compile_s"] > 0 and not first.facts.get("reused")
    assert second.facts.get("reused") is True
    assert "compile_s" not in second.metrics and second.seconds == 0.0
    assert second.metrics == {k: v for k, v in first.metrics.items() if k != "compile_s"}  # the analysis holds


# ------------------------------------------------------------ limitations that say which failure
def test_a_different_failure_behind_a_limitation_is_a_fail() -> None:
    """A limitation expects "no lowering for float32"; the planted failure is another
    error. Before, any failure at the stage read ``expected_fail``."""
    from jax import lax

    def broken(x):  # noqa: ANN001, ANN202
        raise TypeError("a new, different bug")

    lim = catalog.Limitation("sin has no float32 rule", stage="trace", error=r"NotImplementedError: .*float32",
                             status="error")
    out = run_harness(catalog.define("test_only", "sin", broken, [catalog.RandArg((3,), "float32")],
                                     dtype="float32", catalog="test_only", limitations=[lim]),
                      Options(platforms=("cpu",), repeats=1))
    tr = _by(out, "trace", "any")
    assert tr.status == "fail" and tr.error_type == "UnexpectedFailure"
    assert tr.facts["expected_error"] == lim.error and tr.facts["actual_error_type"] == "TypeError"
    assert "a new, different bug" in tr.error

    def expected(x):  # noqa: ANN001, ANN202
        raise NotImplementedError("no rule for float32")

    out = run_harness(catalog.define("test_only", "sin", expected, [catalog.RandArg((3,), "float32")],
                                     dtype="float32", catalog="test_only", limitations=[lim]),
                      Options(platforms=("cpu",), repeats=1))
    assert _by(out, "trace", "any").status == "expected_fail"
    assert lax.sin  # the harness module imports stay used


def test_a_limitation_without_a_pattern_still_expects_any_failure() -> None:
    lim = catalog.Limitation("broken everywhere", stage="trace")
    h = catalog.define("test_only", "sin", lambda x: 1 / 0, [catalog.RandArg((3,), "float32")], dtype="float32",
                       catalog="test_only", limitations=[lim])
    assert _by(run_harness(h, Options(platforms=("cpu",))), "trace", "any").status == "expected_fail"


def test_a_bad_limitation_pattern_fails_where_it_is_defined() -> None:
    import re

    with pytest.raises(re.error):
        catalog.Limitation("x", error="(unclosed")
    with pytest.raises(ValueError):
        catalog.Limitation("x", status="ok")
