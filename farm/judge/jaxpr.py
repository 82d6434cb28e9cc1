"""The independent numeric verdict on a device's outputs for any harness.

``judge_jaxpr(closed_jaxpr, dyn, outputs)`` evaluates the jaxpr with the float64 reference
(``farm.reference.evaluate``), compares each output the plan marks ``reference`` under
the tolerance policy (``farm.judge.tolerance``), checks each ``invariant`` output by
its equation's invariant (``farm.reference.invariants``) and returns one frozen
``Verdict``, with the policy, the per-output kinds and the reference's own time.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from farm.judge import accumulation
from farm.reference.evaluator import (
    PARTLY_UNSPECIFIED, AmbiguousResult, call_jaxpr, filling, flushing_subnormals, primitives, tapping,
)
from farm.reference.invariants import Checked, check
from farm.reference.plan import Plan, plan
from farm.stages.compare import disagreement
from farm.judge.tolerance import (
    CONDITIONED, MEANINGLESS_RTOL, Computation, allowed, bad_elements, errors, kind_of, policy,
)


@dataclass(frozen=True)
class Verdict:
    """``status``: ok | fail | skipped (no independent verdict: ``error`` says why).
    ``against``: reference | invariant | none (the weakest kind used on any output)."""

    status: str
    against: str
    error: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)


def judge_jaxpr(closed_jaxpr: Any, dyn: list[Any], outputs: list[Any], the_plan: Plan | None = None,
          floor: tuple[float, float] | None = None) -> Verdict:
    """The verdict on ``outputs`` (the device's, flat) of ``closed_jaxpr`` on ``dyn``.
    ``floor``: the harness's own (rtol, atol) for this platform where it declares one."""
    p = the_plan or plan(closed_jaxpr)
    kinds = [o.kind for o in p.outputs]
    if p.verdict == "none" and all(k == "none" for k in kinds):
        return Verdict("skipped", "none", f"no independent reference: {p.reason}",
                       facts={"reason": p.reason, "outputs": kinds})
    if len(outputs) != len(p.outputs):
        return Verdict("fail", p.verdict, f"{len(outputs)} outputs, the jaxpr has {len(p.outputs)}")
    try:
        ev = _evaluate(closed_jaxpr, dyn, p, outputs)
    except AmbiguousResult as e:
        return Verdict("skipped", "none", f"no independent reference: {e}", facts={"reason": str(e)})
    dtypes = [np.dtype(a.dtype) for a in closed_jaxpr.out_avals]
    how = _How(kind_of(ev.prims), lambda: _flushed(closed_jaxpr, dyn, ev.masks, outputs), prims=frozenset(ev.prims),
               band=ev.band)
    problems, metrics = _compare(p, ev.ref, outputs, dtypes, how, floor)
    if problems and ev.cond is not None and dtypes and np.dtype(dtypes[0]).kind in "fc":
        # a solve whose matrix is ill-conditioned errs by cond * eps: judge by that, if it means anything
        solve = allowed(Computation(dtypes[0], "conditioned", cond=ev.cond))
        c_rtol, c_atol = solve.rtol, float(solve.atol)
        if c_rtol > MEANINGLESS_RTOL:
            why = f"ill-conditioned in {np.dtype(dtypes[0]).name}: condition number {ev.cond:.3g}"
            return Verdict("skipped", "none", f"no independent reference: {why}",
                           metrics={**metrics, "reference_s": ev.seconds, "condition_number": ev.cond},
                           facts={"reason": why, "failed_policy": "; ".join(problems)[:500]})
        floor = (max(c_rtol, floor[0]), max(c_atol, floor[1])) if floor else (c_rtol, c_atol)
        problems, metrics = _compare(p, ev.ref, outputs, dtypes, how, floor)
    checks = _invariants(p, ev.taps, outputs)
    problems += [f"invariant {c.what} = {c.error:.3g} > {c.bound:.3g}" for c in checks if not c.ok]
    if checks:
        metrics["invariant_err"] = float(max((c.error / c.bound if c.bound else c.error) for c in checks))
    metrics["reference_s"] = ev.seconds
    if ev.cond is not None:
        metrics["condition_number"] = ev.cond
    facts = _facts(p, ev, dtypes, how, floor, checks)
    if problems:
        return Verdict("fail", p.verdict if p.verdict != "none" else "invariant", "; ".join(problems)[:1000],
                       metrics, facts)
    return Verdict("ok", "invariant" if "invariant" in kinds else "reference", None, metrics, facts)


@dataclass(frozen=True)
class _Evaluated:
    """The reference's evaluation of one jaxpr, with what the judging needs besides."""

    ref: list[np.ndarray]  # per output; elements depending on an unspecified part hold the device's
    taps: dict[int, Any]  # the non-unique and solve equations' inputs and outputs
    masks: list[np.ndarray] | None  # per output, the elements depending on an unspecified part
    prims: set[str]
    cond: float | None  # the largest condition number a solve saw
    seconds: float  # the reference's own time
    sums: dict[int, Any] = field(default_factory=dict)  # output index -> the summing equation computing it

    def band(self, i: int) -> accumulation.Band | None:
        """Output ``i``'s summation error band (``farm.judge.accumulation``), if a sum computes it."""
        eqn = self.sums.get(i)
        tap = None if eqn is None else self.taps.get(id(eqn))
        return None if tap is None else accumulation.band(eqn, tap)


def _evaluate(closed_jaxpr: Any, dyn: list[Any], p: Plan, outputs: list[Any]) -> _Evaluated:
    t0 = time.perf_counter()
    prims = primitives(closed_jaxpr.jaxpr)
    solves = _eqns(closed_jaxpr.jaxpr, CONDITIONED) if prims & CONDITIONED else frozenset()
    sums = accumulation.producers(closed_jaxpr.jaxpr) if prims & accumulation.ACCUMULATING else {}
    with tapping(p.taps | solves | {id(e) for e in sums.values()}) as taps:
        ref = call_jaxpr(closed_jaxpr, list(dyn))
    masks = _unspecified_masks(closed_jaxpr, dyn, ref) if prims & PARTLY_UNSPECIFIED else None
    if masks is not None:  # elements that depend on an unspecified part: nothing to compare there
        ref = [np.where(m, np.asarray(o).astype(r.dtype), r) if m.any() and np.shape(o) == r.shape else r
               for m, o, r in zip(masks, outputs, ref)]
    return _Evaluated(ref, taps, masks, prims, _condition(taps, solves), time.perf_counter() - t0, sums)


def _facts(p: Plan, ev: _Evaluated, dtypes: list[np.dtype], how: "_How", floor: tuple[float, float] | None,
           checks: list[Checked]) -> dict[str, Any]:
    """What the verdict records besides its metrics: the policy, per-output kinds, invariants."""
    facts: dict[str, Any] = {
        "policy": policy(Computation(dtypes[0], how.kind, how.prims)) if dtypes else None,
        "floor": list(floor) if floor else None,
        "outputs": [o.kind for o in p.outputs],
        "invariants": [{"what": c.what, "error": _num(c.error), "bound": float(c.bound)} for c in checks]}
    if how.used_flushed:
        facts["subnormals_flushed"] = True
    if how.banded:
        facts["accumulation"] = {str(i): b for i, b in how.banded.items()}
    if how.counts.get("bad"):
        facts["disagreement"] = dict(how.counts)
    if ev.masks is not None and any(m.any() for m in ev.masks):
        facts["unspecified_elements"] = int(sum(m.sum() for m in ev.masks))
    unchecked = {str(i): o.reason for i, o in enumerate(p.outputs) if o.kind == "none"}
    if unchecked:
        facts["unchecked"] = unchecked
    return facts


def _eqns(jaxpr: Any, names: frozenset[str]) -> frozenset[int]:
    """The ids of every equation of these primitives in ``jaxpr`` and its sub-jaxprs."""
    out: set[int] = set()
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in names:
            out.add(id(eqn))
        for p in eqn.params.values():
            for sub in (p if isinstance(p, (tuple, list)) else (p,)):
                inner = sub if hasattr(sub, "eqns") else getattr(sub, "jaxpr", None)
                if inner is not None and hasattr(inner, "eqns"):
                    out |= _eqns(inner, names)
    return frozenset(out)


def _condition(taps: dict[int, Any], solves: frozenset[int]) -> float | None:
    """The largest 2-norm condition number among the matrices the solves saw (float64)."""
    conds = []
    for key in solves:
        tap = taps.get(key)
        if tap is None:
            continue
        m = _matrix(tap)
        if m is not None and m.size and m.shape[-1] == m.shape[-2]:
            with np.errstate(all="ignore"):
                c = np.linalg.cond(m.reshape((-1,) + m.shape[-2:]))
            conds.append(float(np.max(np.where(np.isnan(c), np.inf, c))))
    return max(conds) if conds else None


def _matrix(tap: Any) -> np.ndarray | None:
    """The (batch of) square matrices a solve or factorization works on."""
    if tap.primitive in ("cholesky", "lu"):
        return np.asarray(tap.ins[0])
    if tap.primitive == "triangular_solve":
        a = np.asarray(tap.ins[0])
        t = np.tril(a) if tap.params.get("lower") else np.triu(a)
        if tap.params.get("unit_diagonal"):
            t = t - np.eye(a.shape[-1]) * np.diagonal(t, axis1=-2, axis2=-1)[..., None, :] + np.eye(a.shape[-1])
        return t
    if tap.primitive == "tridiagonal_solve":
        dl, d, du = (np.asarray(x) for x in tap.ins[:3])
        n = d.shape[-1]
        m = np.zeros(d.shape + (n,), dtype=np.result_type(dl, d, du))
        i = np.arange(n)
        m[..., i, i] = d
        m[..., i[1:], i[:-1]] = dl[..., 1:]
        m[..., i[:-1], i[1:]] = du[..., :-1]
        return m
    return None


def _num(x: float) -> float | str:
    """A float for the record's JSON (NaN and infinities as text: not every database takes them)."""
    return float(x) if np.isfinite(x) else repr(float(x))


def _unspecified_masks(closed_jaxpr: Any, dyn: list[Any], ref: list[np.ndarray]) -> list[np.ndarray]:
    """Per output, the elements that change when the unspecified parts of results are
    filled differently (evaluated once more with another filling)."""
    with filling(7.0):
        other = call_jaxpr(closed_jaxpr, list(dyn))
    return [~((a == b) | (np.isnan(a) & np.isnan(b))) if a.shape == b.shape else np.ones(a.shape, bool)
            for a, b in zip(ref, other)]


@dataclass
class _How:
    """How outputs are compared: the kind of computation and its primitives (``Computation``:
    which zeros' signs count, the elementwise bounds), and the reference evaluated with
    subnormals flushed (computed on first need)."""

    kind: str
    make_flushed: Any
    _flushed: list[np.ndarray] | None = None
    used_flushed: bool = False
    prims: frozenset[str] = frozenset()  # the computation's primitives (the elementwise bounds)
    band: Any = None  # output index -> its summation error band, or None (``_Evaluated.band``)
    banded: dict[int, dict[str, Any]] = field(default_factory=dict)  # outputs a band accepted elements of
    counts: dict[str, int] = field(default_factory=dict)  # how the outputs disagree (``disagreement``)

    def count(self, more: dict[str, int]) -> None:
        for k, v in more.items():
            self.counts[k] = self.counts.get(k, 0) + int(v)

    def flushed(self) -> list[np.ndarray]:
        if self._flushed is None:
            self._flushed = self.make_flushed()
        return self._flushed


def _flushed(closed_jaxpr: Any, dyn: list[Any], masks: list[np.ndarray] | None, outputs: list[Any]) -> list[np.ndarray]:
    with flushing_subnormals():
        ref = call_jaxpr(closed_jaxpr, list(dyn))
    if masks is not None:
        ref = [np.where(m, np.asarray(o).astype(r.dtype), r) if m.any() and np.shape(o) == r.shape else r
               for m, o, r in zip(masks, outputs, ref)]
    return ref


def _compare(p: Plan, ref: list[np.ndarray], outputs: list[Any], dtypes: list[np.dtype],
             how: _How, floor: tuple[float, float] | None) -> tuple[list[str], dict[str, float]]:
    """Compare the ``reference`` outputs; (problem lines, summed metrics). An element
    that disagrees with the IEEE reference but matches the subnormal-flushing one agrees."""
    kind = how.kind
    total = {"max_abs_err": 0.0, "max_rel_err": 0.0, "max_ulp_err": 0.0, "mismatches": 0.0}
    problems = []
    how.counts = {}
    for i, (o, r, got, dt) in enumerate(zip(p.outputs, ref, outputs, dtypes)):
        if o.kind != "reference":
            continue
        got = np.asarray(got)
        if got.shape != r.shape:
            problems.append(f"output {i} has shape {got.shape}, the reference {r.shape}")
            continue
        c = Computation(dt, kind, how.prims, floor=floor)
        m = errors(r, got, c)
        if m["mismatches"]:
            alt = how.flushed()[i]
            bad = bad_elements(r, got, c) & bad_elements(alt, got, c)
            how.used_flushed = how.used_flushed or int(bad.sum()) < m["mismatches"]
            b = how.band(i) if how.band is not None and bad.any() else None
            if b is not None:  # a sum's rounding in any tree order (farm.judge.accumulation)
                accepted = bad & accumulation.within(got, r, b)
                if accepted.any():
                    bad &= ~accepted
                    how.banded[i] = {**b.facts(), "accepted": int(accepted.sum())}
            m["mismatches"] = float(bad.sum())
            how.count(disagreement(got, r, bad, dt))
        else:
            how.count({"elements": got.size})
        for k, v in m.items():
            total[k] = total[k] + v if k == "mismatches" else max(total[k], v)
        if m["mismatches"]:
            problems.append(f"output {i}: {int(m['mismatches'])} of {got.size} elements differ from the float64 "
                            f"reference (max abs err {m['max_abs_err']:.3g}, max rel err {m['max_rel_err']:.3g}, "
                            f"{kind} tolerance for {dt.name})")
    return problems, total


def _invariants(p: Plan, taps: dict[int, Any], outputs: list[Any]) -> list[Checked]:
    """Check each non-unique equation once, with the device's values of its outputs."""
    by_eqn: dict[int, dict[int, np.ndarray]] = {}
    for o, got in zip(p.outputs, outputs):
        if o.kind == "invariant":
            by_eqn.setdefault(id(o.eqn), {})[o.index] = np.asarray(got)
    out: list[Checked] = []
    for key, got in by_eqn.items():
        tap = taps.get(key)
        if tap is None or tap.calls != 1:
            out.append(Checked("the non-unique equation ran exactly once", float("nan"), 0.0))
            continue
        eqn = next(o.eqn for o in p.outputs if id(o.eqn) == key)
        out += check(tap, got, [np.dtype(v.aval.dtype) for v in eqn.outvars])
    return out
