"""xhost's verdict: another host's artifact, run here (``farm.stages.xhost``), held three
ways against the lowering host's outputs, this host's own lowering and the reference.

Which of the three disagree says where a difference comes from: version skew in the
artifact, the device's numerics, or this host's lowering rules. With an ``invariant``
(results that are not unique: eigenvectors, SVD signs) the raw comparisons are kept as
facts and the verdict is the invariant's. Without a reference array, ``by_jaxpr`` gives
the reference verdict (status, error) by other means: the harness's jaxpr evaluated in
float64 (JAX's own catalog); "skipped" is no verdict.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from farm.judge.outputs import compare_outputs
from farm.results import SEVERITY
from farm.stages.record import failure
from farm.stages.xhost import CrossHost, Prior


def judge_xhost(ran: CrossHost, prior: Prior, *, native: list[np.ndarray] | None,
                reference: list[np.ndarray] | None, rtol: float, atol: float, exact: bool,
                promised: list[dict[str, Any]] | None = None,
                invariant: Callable[[list[np.ndarray]], tuple[float, float]] | None = None,
                by_jaxpr: Callable[[list[np.ndarray]], tuple[str, str | None]] | None = None) -> CrossHost:
    """The record of an artifact that ran here (``ran``, outputs in its handle), judged; a
    record that did not run stands as it is. Where the inputs differ from this host's only
    the lowering host's outputs are compared."""
    if ran.status != "ok" or ran.handle is None:
        return ran
    actual, facts = ran.handle, dict(ran.facts)
    identical = ran.inputs_identical
    metrics: dict[str, float] = dict(ran.metrics)
    tol = (rtol, atol, exact, promised)
    try:
        verdicts = three_ways(actual, prior, native if identical else None, reference if identical else None,
                              by_jaxpr if identical else None, invariant if identical else None, tol, facts, metrics)
    except Exception as e:  # a comparison that cannot even be made is an error, not a crash
        return failure(CrossHost, "xhost", ran.platform, e, ran.seconds, facts=facts)
    worst, first_err = "ok", None
    for label, (st, err) in verdicts.items():
        if SEVERITY[st] > SEVERITY[worst]:
            worst, first_err = st, f"vs {label.replace('_', ' ')}: {err}"
    return CrossHost("xhost", ran.platform, worst, ran.seconds, error=first_err,
                     error_type="Mismatch" if first_err else None, metrics=metrics,
                     facts={**facts, "rtol": rtol, "atol": atol, "exact": exact})


def three_ways(actual: list[np.ndarray], prior: Prior, native: list[np.ndarray] | None,
              reference: list[np.ndarray] | None, by_jaxpr: Callable[[list[np.ndarray]], tuple[str, str | None]] | None,
              invariant: Callable[[list[np.ndarray]], tuple[float, float]] | None, tol: tuple[float, float, bool, Any],
              facts: dict[str, Any], metrics: dict[str, float]) -> dict[str, tuple[str, str | None]]:
    """{comparison: (status, error)} of the artifact's outputs against the lowering host's
    outputs, this host's own lowering and the reference (the invariant's alone where the
    result is not unique); facts and metrics are filled in as they are made. ``native``,
    ``reference``, ``by_jaxpr`` and ``invariant`` are None where the inputs differ."""
    rtol, atol, exact, promised = tol
    verdicts: dict[str, tuple[str, str | None]] = {}
    for label, expected in (("cpu_host", prior.outputs), ("native", native), ("reference", reference)):
        if label == "reference" and expected is None and by_jaxpr is not None:
            st, err = by_jaxpr(actual)
            facts["vs_reference"], facts["reference_by"] = st, "jaxpr"
            if st != "skipped":
                verdicts[label] = (st, err)
            continue
        if expected is None:
            facts[f"vs_{label}"] = "skipped"
            continue
        counts: dict[str, int] = {}
        st, err, m = compare_outputs(actual, list(expected), rtol, atol, exact, promised, counts)
        facts[f"vs_{label}"] = st
        if counts.get("bad"):
            facts[f"{label}_disagreement"] = counts
        metrics.update({f"{label}_{k}": v for k, v in m.items()})
        verdicts[label] = (st, err)
    if native is not None:  # this host's own lowering against the lowering host's outputs (same inputs)
        st, _, m = compare_outputs(list(native), list(prior.outputs), rtol, atol, exact, promised)
        facts["native_vs_cpu_host"] = st
        metrics.update({f"native_cpu_host_{k}": v for k, v in m.items()})
    if invariant is not None:
        err_inv, bound = invariant(actual)
        metrics.update(invariant_err=err_inv, invariant_bound=bound)
        ok = err_inv <= bound
        facts["vs_invariant"] = "ok" if ok else "fail"
        verdicts = {"invariant": ("ok", None) if ok else ("fail", f"invariant error {err_inv:.3g} > {bound:.3g}")}
    return verdicts
