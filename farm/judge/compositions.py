"""The verdict on a composition (``farm.stages.compositions``): what the artifact returned
inside a larger program, held against the artifact called on its own (``grad``: against
``jax.grad`` of the harness's own function) under the harness's tolerance; JAX's documented
refusals are data (``REFUSALS``), each explaining its own error only.
"""
from __future__ import annotations

from farm.catalog import Harness, Limitation
from farm.judge.outputs import compare_outputs
from farm.judge.tolerance import Computation, allowed, of_harness, rtol_atol
from farm.results import Record

#: What JAX refuses to compose with an exported call, and its known bugs there, as data: the
#: error each one explains.
REFUSALS = (
    Limitation("JAX bug (docs/findings.md): an artifact exported with the GSPMD partitioner, called inside jit "
               "with its shardings while GSPMD is still the partitioner, fails to lower ('stablehlo.custom_call' op "
               "should have a sharding attribute of type TensorShardingPerValueAttr); with Shardy selected the same "
               "call works. jax 0.10.2 and 0.12.0.1", platforms=("call",), stage="composition", status="error",
               error=r"should have a sharding attribute of type TensorShardingPerValueAttr", jax=">=0.10.2"),
    Limitation("jax.vmap of Exported.call: JAX has no batching rule for the call_exported primitive "
               "(jax/_src/export/_export.py registers none); export with a symbolic batch dimension instead",
               platforms=("vmap",), stage="composition", status="error",
               error=r"NotImplementedError: Batching rule for 'call_exported' not implemented"),
)


def composition(h: Harness, rec: Record) -> Record:
    """``fail`` where the composed call disagrees; a documented refusal ``expected_fail``."""
    if rec.status == "error":
        names = (rec.platform, rec.platform.partition(":")[0])  # "vmap:rbg": a typed key's vmap is vmap's
        lim = next((lim for lim in REFUSALS if any(lim.applies(n, h.dtype) for n in names)
                    and lim.expects(rec.status, rec.error_type, rec.error)), None)
        return rec if lim is None else rec.with_status(
            "expected_fail", handle=None, facts={**rec.facts, "limitation": lim.description})
    if rec.status != "ok" or not isinstance(rec.handle, tuple):
        return rec.with_status(rec.status, handle=None)
    got, want = rec.handle
    moved = {k: v for k, v in rec.facts.get("shardings", {}).items() if v["inner"] != v["outer"]}
    if moved:  # a sharded artifact inside another export: the outer one must keep its shardings
        return rec.with_status("fail", handle=None, error_type="ShardingMismatch",
                               error="; ".join(f"{k} shardings: inner {v['inner']}, outer {v['outer']}"
                                               for k, v in moved.items())[:1000])
    if rec.platform == "grad":
        rtol = allowed(Computation(None, "gradient", dtypes=tuple(str(w.dtype) for w in want))).rtol
        rtol, atol = rtol, rtol
        against = "jax.grad of the harness's function"
    else:
        rtol, atol = rtol_atol(of_harness(h, "cpu"))
        against = "the artifact called on its own"
    status, error, metrics = compare_outputs(got, want, rtol, atol, h.compare == "exact")
    facts = {**rec.facts, "against": against}
    if status == "ok":
        return rec.with_status("ok", handle=None, facts=facts, metrics={**rec.metrics, **metrics})
    return rec.with_status("fail", handle=None, error_type="Mismatch", error=f"{rec.platform}: {error}"[:1000],
                           facts=facts, metrics={**rec.metrics, **metrics})
