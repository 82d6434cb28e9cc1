"""The verdict on a symbolic artifact's calls: at each concrete size, the outputs against
the float64 reference of the same computation (``farm.judge.jaxpr``) and against the
static lowering of it at that size, under the harness's tolerance; and a round trip that
changed the artifact's signature.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from farm.judge.jaxpr import judge_jaxpr
from farm.judge.outputs import compare_outputs
from farm.judge.tolerance import declared, harness_tolerance
from farm.results import SEVERITY, Record
from farm.stages.record import failure
from farm.stages.symbolic import SymbolicCall, Variant


def serialize(rec: Record) -> Record:
    """A deserialized symbolic artifact whose signature changed is ``fail``."""
    if rec.status != "ok" or not rec.facts.get("changed"):
        return rec
    return rec.with_status("fail", error="the deserialized symbolic artifact's avals differ from the exported one's")


def calls(rec: SymbolicCall, v: Variant) -> SymbolicCall:
    """Each size's outputs against the reference and the static lowering at that size."""
    import jax

    if rec.status != "ok":
        return rec
    try:
        return _calls(rec, v)
    except Exception as e:  # the static lowering or the reference at a size raised: say so, never lose the outcome
        return failure(SymbolicCall, "symbolic_call", rec.platform, e, rec.seconds,
                       facts={**rec.facts, "raised_while": "judging against the static lowering and the reference"})


def _calls(rec: SymbolicCall, v: Variant) -> SymbolicCall:
    import jax

    h, platform = v.harness, rec.platform
    worst, first, per_size = "ok", None, {}
    for n, outs in sorted(rec.handle.items()):
        rows = v.rows(n)
        static = [np.asarray(o) for o in jax.tree.leaves(jax.jit(v.fun)(*rows))]
        verdicts = {}
        ref = judge_jaxpr(jax.make_jaxpr(v.fun)(*rows), rows, outs, floor=declared(h, platform))
        if ref.status != "skipped":
            verdicts["reference"] = (ref.status, ref.error)
        if ref.status == "skipped" or ref.against == "reference":  # not unique (eigenvectors): the invariant's alone
            rtol, atol = harness_tolerance(h, platform, str(static[0].dtype) if static else None)
            st, err, _ = compare_outputs(outs, static, rtol, atol, h.compare == "exact",
                                         [{"dtype": str(s.dtype), "shape": list(s.shape)} for s in static])
            verdicts["static"] = (st, err)
        per_size[str(n)] = {k: s for k, (s, _) in verdicts.items()}
        for label, (s, e) in verdicts.items():
            if SEVERITY[s] > SEVERITY[worst]:
                worst, first = s, f"b={n}, vs the {label}: {e}"
    facts = {**rec.facts, "verdicts": per_size}
    if worst == "ok":
        return rec.with_status("ok", facts=facts, handle=None)
    return rec.with_status(worst, error=(first or "")[:1000], error_type="Mismatch", facts=facts, handle=None)

