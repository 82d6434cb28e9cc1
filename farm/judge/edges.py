"""The verdict on a harness run at its operands' edge values (``farm.stages.edges``): the outputs
against the harness's jaxpr evaluated in float64 (``farm.judge.jaxpr``, the same reference and
policy as every other compare: NaN matches NaN, an infinite reference is matched exactly, zeros'
signs where the primitive defines them), under the harness's declared tolerance.

What has no independent answer at these values is ``skipped`` with the reason (a
non-unique result, a primitive without a reference rule); what JAX and XLA are known and
documented to do there is data (``farm.catalog.known``'s edge behaviours, the harness's own
``Limitation``s of stage ``edge_values``).
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from farm.catalog import Harness
from farm.judge.tolerance import declared
from farm.results import Record
from farm.stages.record import failure


def edge_values(h: Harness, jaxpr: Any, rec: Record) -> Record:
    """``rec`` (one variant's run) judged: ok, fail (what differs, where), skipped (no answer)."""
    from farm.judge.jaxpr import judge_jaxpr  # noqa: PLC0415  (the reference's rules, only where needed)

    if rec.status != "ok" or not isinstance(rec.handle, tuple):
        return rec.with_status(rec.status, handle=None)
    args, outs = rec.handle
    t0 = time.perf_counter()
    try:
        v = judge_jaxpr(jaxpr, args, outs, floor=declared(h, "cpu"))
    except (np.linalg.LinAlgError, ValueError) as e:
        if not isinstance(e, np.linalg.LinAlgError) and "illegal value" not in str(e):
            raise
        # LAPACK refuses a matrix of NaN or inf (SciPy's "illegal value in argument 4 of internal eig
        # algorithm (geev)", NumPy's LinAlgError): no answer to hold JAX's (NaN) to
        return rec.with_status("skipped", handle=None, error=f"no independent reference: {type(e).__name__}: {e}",
                               facts={**rec.facts, "reason": "the float64 reference's LAPACK refuses these values"})
    except Exception as e:  # a broken rule is the farm's bug: say so, never a pass
        return failure(Record, "edge_values", rec.platform, e, time.perf_counter() - t0,
                       facts={**rec.facts, "against": "jaxpr"})
    facts = {**rec.facts, **v.facts, "against": {"reference": "jaxpr"}.get(v.against, v.against)}
    return rec.with_status(v.status, handle=None, error=v.error, error_type="Mismatch" if v.status == "fail" else None,
                           metrics={**rec.metrics, **v.metrics}, facts=facts)
