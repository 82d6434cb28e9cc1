"""Three hand-written runs whose failures form known clusters (one lowering error across
harnesses, platforms and configurations; a numeric one; a crash), as the triage tests and
the Failures page tests read them (the ``triage_db`` fixture in tests/conftest.py)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from farm.results import Outcome, Record, RunDims
from farm.store import open_store, writes

EVIL = '<script>alert("pwned")</script>'
ENV = {"jax_version": "0.10.2", "jaxlib_version": "0.10.2", "python": "3.11.7", "host": "test",
       "device_kinds": ["cpu"], "xla_flags": "", "farm_commit": "abc"}
PLATFORMS = ["cpu", "tpu"]


def desc(name: str, primitive: str, dtype: str = "float32") -> dict[str, Any]:
    return {"fingerprint": f"fp-{name}".ljust(20, "0"), "name": name, "catalog": "farm", "family": "fam",
            "primitive": primitive, "group": primitive, "dtype": dtype, "shapes": [[3]], "params": {}}


HARNESSES = [desc("reshape_a", "reshape"), desc("reshape_b", "reshape"), desc("log1p_f64", "log1p", "float64"),
             desc("sin_f32", "sin")]
FP = {d["name"]: d["fingerprint"] for d in HARNESSES}


def outcome(name: str, *bad: Record) -> Outcome:
    recs = [Record("trace", "any", "ok")] + [Record("lower", p, "ok") for p in PLATFORMS]
    recs += [Record("execute", "cpu", "ok"), Record("compare", "cpu", "ok")]
    stages = {(r.stage, r.platform) for r in bad}
    return Outcome(FP[name], name, [r for r in recs if (r.stage, r.platform) not in stages] + list(bad))


def reshape_error(name: str, shape: str, addr: str) -> list[Record]:
    return [Record("lower", p, "error", error_type="ValueError",
                   error=f"Cannot reshape f32[{shape}] at {addr} in /site/jax/_src/{p}.py:12") for p in PLATFORMS]


LOG1P = Record("compare", "cpu", "fail", error_type="Mismatch",
               error="output 0: 64 of 64 elements differ from the float64 reference (max abs err 3e-14)",
               metrics={"max_ulp_err": 113.0, "mismatches": 64.0},
               facts={"against": "jaxpr", "disagreement": {"elements": 64, "bad": 64}})


def fill(url: str) -> Iterator[str]:
    """n@x64=off: reshape_a and reshape_b fail to lower on cpu and tpu (one cause, other
    numbers), log1p is off by ~113 ULP; n@x64=on: the same, and sin crashed; later: reshape
    fixed, log1p still off."""
    store = open_store(url)

    def add(name: str, outcomes: list[Outcome], dims: RunDims = RunDims()) -> None:
        with store.session() as s:
            run = writes.create_run(s, env=ENV, name=name, platforms=PLATFORMS, run_on=["cpu"], total=4, dims=dims)
            writes.Writer(s, run, writes.harness_ids(s, HARNESSES)).write(outcomes)
            writes.finish_run(s, run, "finished")

    broken = [outcome("reshape_a", *reshape_error("reshape_a", "3,4", "0x7f01")),
              outcome("reshape_b", *reshape_error("reshape_b", "8", "0x55aa")), outcome("log1p_f64", LOG1P)]
    add("n@x64=off", broken + [outcome("sin_f32")], RunDims(series="n", config="x64=off"))
    add("n@x64=on", broken + [Outcome.failed(FP["sin_f32"], "sin_f32", "crashed", "worker died (SIGABRT) pid 4242")],
        RunDims(series="n", config="x64=on"))
    add("later", [outcome("reshape_a"), outcome("reshape_b"), outcome("log1p_f64", LOG1P), outcome("sin_f32")])
    yield url
    store.dispose()
