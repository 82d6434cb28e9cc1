"""The verdicts at edge values.

- A harness run at its operands' edge values (``farm.stages.edges``, ``--edges``): the outputs
  against the harness's jaxpr evaluated in float64 (``farm.judge.jaxpr``, the same reference and
  policy as every other compare: NaN matches NaN, an infinite reference is matched exactly,
  zeros' signs where the primitive defines them), under the harness's declared tolerance.
- An api harness whose operands are edge values, judged against its NumPy/SciPy twin
  (``compare="edges"``: ``twin_at_edges``): the jaxpr's evaluation computes JAX's own algorithm
  and agrees where that is wrong by design; the twin does not.

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
from farm.catalog.known import EdgeValue, api_edge_values
from farm.judge.outputs import compared
from farm.judge.tolerance import declared
from farm.reference.evaluator import flushed as flushed_inputs
from farm.reference.handwritten import reference_outputs, upcast
from farm.results import Record
from farm.stages.record import failure


#: Primitives whose result at non-finite or overflowing operands has no unique answer: a sum
#: over ±inf and values near the largest finite one is inf, -inf or NaN by the order XLA adds in
#: (a convolution's algorithm, a dot's blocking), a factorization of such a matrix is NaN or
#: another algorithm's, a sampler's transform of an infinite parameter is its own. A variant of
#: theirs that fails with such operands is ``skipped`` with this reason; one that passes is ok.
NO_UNIQUE_ANSWER = {
    "conv_general_dilated": "a convolution's sums over inf and overflowing products depend on its algorithm",
    "dot_general": "a dot's sums over inf and overflowing products depend on the order it adds in",
    "qr": "the factors of a matrix with inf, NaN or overflowing entries are NaN or the algorithm's own",
    "custom_linear_solve": "a solve with inf, NaN or overflowing entries is NaN or the algorithm's own",
    "triangular_solve": "a solve with inf, NaN or overflowing entries is NaN or the algorithm's own",
    "random_gamma": "a gamma sampler at an infinite or overflowing shape parameter gives its transform's own value",
}
#: Beyond this magnitude, products and sums may overflow (the square root of float32's largest value).
OVERFLOWING = 1.8e19


def _unanswerable(jaxpr: Any, args: list[Any]) -> str | None:
    """Why a failed variant has no unique answer (a ``NO_UNIQUE_ANSWER`` primitive fed
    non-finite or overflowing operands), or None."""
    from farm.judge.jaxpr import _eqns  # noqa: PLC0415  (the walk of a jaxpr and its sub-jaxprs)

    prims = {p for p in NO_UNIQUE_ANSWER if _eqns(jaxpr.jaxpr, frozenset({p}))}
    if not prims:
        return None

    def wild(a: Any) -> bool:
        x = np.asarray(a)
        if not x.size or not (x.dtype.kind in "fc" or x.dtype.name == "bfloat16"):
            return False
        with np.errstate(all="ignore"):
            m = np.abs(x.astype(np.complex128 if x.dtype.kind == "c" else np.float64))
            return bool(np.any(~np.isfinite(m) | (m > OVERFLOWING)))

    if not any(wild(a) for a in args):
        return None
    return "; ".join(NO_UNIQUE_ANSWER[p] for p in sorted(prims))


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
    why = _unanswerable(jaxpr, args) if v.status == "fail" else None
    if why is not None:
        return rec.with_status("skipped", handle=None, error=f"no unique answer: {why} ({v.error or ''})"[:1000],
                               metrics={**rec.metrics, **v.metrics}, facts={**facts, "reason": why})
    return rec.with_status(v.status, handle=None, error=v.error, error_type="Mismatch" if v.status == "fail" else None,
                           metrics={**rec.metrics, **v.metrics}, facts=facts)


def with_finding(rec: Record, again: Record | None, finding: str, covered: int) -> Record:
    """A variant whose ``covered`` elements a known finding names (``farm.catalog.known``):
    failing with them and passing without them (``again``) is the finding, ``expected_fail``;
    still failing without them is news, ``fail`` with both errors; passing with them is ``ok``
    and says the finding was not seen there (its predicate is wider than where the bug shows on
    every dtype; the finding's standalone repro says when it is fixed)."""
    if rec.status == "ok" or again is None:
        return rec.with_status(rec.status, facts={**rec.facts, "finding_not_seen": finding, "covered": covered})
    if again.status == "ok":
        return rec.with_status("expected_fail", facts={**rec.facts, "limitation": finding, "covered": covered})
    return rec.with_status("fail", error=f"{rec.error}; without the {covered} elements of a known finding "
                           f"({finding[:80]}...) still: {again.error}"[:1000])


# ---- an api function's edge values against its twin ---------------------------------------

def at_edges(h: Harness, args: list[Any], actual: list[np.ndarray], ref: list[np.ndarray]
             ) -> tuple[list[np.ndarray], int]:
    """The twin's answers at edge values made comparable with what a device can give: rounded
    to each output's dtype first (a float64 answer past float32's range is ±inf there), and
    where the device flushes subnormal inputs (XLA:CPU does), the twin's answer on the flushed
    inputs agrees too: per element, whichever of the two is nearer the device's. (The answers,
    and how many elements the flushed inputs' answer gave.)"""
    alt = reference_outputs(h, args, flush=True) or []
    out, n = [], 0
    for i, (a, r) in enumerate(zip(actual, ref)):
        a = np.asarray(a)
        r1 = _rounded(np.asarray(r), a.dtype)
        if i >= len(alt) or np.shape(alt[i]) != np.shape(r):
            out.append(r1)
            continue
        r2 = _rounded(np.asarray(alt[i]), a.dtype)
        pick = _distance(a, r2) < _distance(a, r1)
        n += int(np.sum(pick))
        out.append(np.where(pick, r2, r1) if pick.any() else r1)
    return out + [np.asarray(r) for r in ref[len(out):]], n


def _rounded(r: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``r`` rounded to a floating ``dtype`` (others as they are)."""
    if not (dtype.kind in "fc" or dtype.name == "bfloat16") or r.dtype.kind not in "fc":
        return r
    with np.errstate(all="ignore"):
        return r.astype(dtype)


def _distance(a: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Per element, how far ``a`` is from ``r`` in float64: 0 where both are NaN or equal
    (infinities included), inf where one side is NaN or an infinity the other lacks."""
    with np.errstate(all="ignore"):
        wide = np.complex128 if a.dtype.kind == "c" or r.dtype.kind == "c" else np.float64
        x, y = a.astype(wide), np.broadcast_to(r, a.shape).astype(wide)
        d = np.abs(x - y)
        d = np.where((x == y) | (np.isnan(x) & np.isnan(y)), 0.0, d)
        return np.where(np.isnan(d), np.inf, d)


def _covered(where: Any, operands: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """The elements of an output of ``shape`` an edge predicate covers (none where the
    operands do not broadcast to it: a predicate speaks of one element's operands)."""
    try:
        ops = [np.broadcast_to(o, shape) for o in operands]
    except ValueError:
        return np.zeros(shape, bool)
    with np.errstate(all="ignore"):
        return np.broadcast_to(np.asarray(where(*ops), dtype=bool), shape)


def _nan_in(operands: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """Elements with a NaN operand: IEEE 754 propagates NaN, so NaN is an answer there
    (SciPy sometimes returns a limit instead: beta(nan, 0) is inf)."""
    floats = [o for o in operands if o.dtype.kind in "fc"]
    return _covered(lambda *xs: np.logical_or.reduce([np.isnan(x) for x in xs]), floats, shape) if floats \
        else np.zeros(shape, bool)


def is_rows(h: Harness) -> bool:
    """A transform's edge variant (``farm.catalog.api._edge_rows``: one special value a row)."""
    return dict(h.key.params).get("edge") == "rows"


def _both_nonfinite(a: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Elements where neither output is finite (a component inf or NaN)."""
    if a.dtype.kind not in "fc" or np.shape(r) != a.shape:
        return np.zeros(a.shape, bool)
    return ~np.isfinite(a) & ~np.isfinite(np.asarray(r))


def nonfinite_alike(h: Harness, outs: list[np.ndarray], others: list[np.ndarray]) -> list[np.ndarray]:
    """For a transform's edge rows: ``others`` with ``outs``' values where neither is finite.
    Which of inf and NaN (and in which component) a transform of inf gives is its algorithm's:
    pocketfft, XLA:CPU's FFT and another platform's lowering of the same function differ there,
    and a finite answer where the other is not still differs."""
    if not is_rows(h):
        return others
    return [np.where(_both_nonfinite(np.asarray(o), r), o, r) if np.shape(o) == np.shape(r) else r
            for o, r in zip(outs, others)]


def by_mpmath(key: str, args: list[Any], operands: list[np.ndarray], actual: list[np.ndarray],
              refs: list[np.ndarray], rtol: float, atol: float) -> tuple[list[np.ndarray], int]:
    """The twin's answers, corrected by mpmath where JAX and the twin disagree and the twin is
    the one off (``farm.reference.exact``: float64 is not enough at some edges). (The answers,
    and how many elements mpmath replaced.)"""
    from farm.reference import exact  # noqa: PLC0415  (mpmath: 0.1 s to import, only for edge variants)

    if key not in exact.EXACT or len(actual) != 1:
        return refs, 0
    raw = [a for a in args if isinstance(a, np.ndarray) or np.isscalar(a)]
    flushed = [np.asarray(upcast(flushed_inputs(np.asarray(a), np.asarray(a).dtype))) for a in raw]
    ref, n = exact.corrected(key, operands, np.asarray(actual[0]), refs[0], rtol, atol, flushed)
    return [ref, *refs[1:]], n


def twin_at_edges(h: Harness, args: list[Any], platform: str, actual: list[np.ndarray], ref: list[np.ndarray],
                  rtol: float, atol: float, exact: bool, promised: list[dict[str, Any]] | None) -> Record:
    """An elementwise api function at edge values against its twin (``at_edges``), under the
    harness's tolerance. Taken out of the comparison (the device's value put in the twin's
    place, and counted: ``excused``): NaN where an operand is NaN, and what a convention of
    ``farm.catalog.known.api_edge_values`` covers (JAX and SciPy choose differently, both
    defensible), and for a transform's edge rows (``is_rows``) whatever is non-finite on both
    sides. Where JAX and the twin still disagree, mpmath's value decides for the functions it
    covers (``by_mpmath``: counted as ``mpmath``). A known finding's elements: failing with them and passing without them is
    that finding (``expected_fail``); failing without them too is ``fail``; passing with them
    says the finding was not seen (``with_finding``, as the ``--edges`` check)."""
    ref, flushed = at_edges(h, args, actual, ref)
    operands = [np.asarray(upcast(a)) for a in args if isinstance(a, np.ndarray) or np.isscalar(a)]
    known = api_edge_values(h.family, h.primitive, h.dtype)
    rows = is_rows(h)

    def excusing(edges: list[EdgeValue], nan: bool) -> tuple[list[np.ndarray], int]:
        refs, n = [], 0
        for a, r in zip(actual, ref):
            a = np.asarray(a)
            if np.shape(r) != a.shape:
                refs.append(r)
                continue
            m = _nan_in(operands, a.shape) & np.isnan(a) if nan and a.dtype.kind in "fc" else np.zeros(a.shape, bool)
            if rows:
                m = m | _both_nonfinite(a, r)
            for e in edges:
                m = m | _covered(e.where, operands, a.shape)
            n += int(np.sum(m & (_distance(a, np.asarray(r)) > 0)))
            refs.append(np.where(m, a, r) if m.any() else r)
        return refs, n

    def judged(refs: list[np.ndarray], facts: dict[str, Any]) -> Record:
        rec = compared(actual, refs, platform=platform, against="reference", rtol=rtol, atol=atol, exact=exact,
                       promised=promised)
        return rec.with_status(rec.status, facts={**rec.facts, "edges": "twin", **facts})

    conventions = [e for e in known if not e.finding]
    base, excused = excusing(conventions, nan=True)
    base, recomputed = by_mpmath(f"{h.family}.{h.primitive}", args, operands, actual, base, rtol, atol)
    facts: dict[str, Any] = {**({"subnormals_flushed": flushed} if flushed else {}),
                             **({"excused": excused, "conventions": [e.description for e in conventions]}
                                if excused else {}),
                             **({"mpmath": recomputed} if recomputed else {})}
    rec = judged(base, facts)
    masks = [(e, [_covered(e.where, operands, np.shape(a)) for a in actual]) for e in known if e.finding]
    masks = [(e, ms) for e, ms in masks if any(m.any() for m in ms)]  # the findings that cover elements here
    findings = [e for e, _ in masks]
    if not findings or rec.status not in ("ok", "fail"):
        return rec
    union = [np.logical_or.reduce(per) for per in zip(*(ms for _, ms in masks))]  # per output
    # without the findings' elements: the same answers (conventions excused, mpmath's), JAX's in their place
    again = judged([np.where(m, np.asarray(a), r) if np.shape(r) == np.shape(a) else r
                    for a, r, m in zip(actual, base, union)], facts) if rec.status == "fail" else None
    return with_finding(rec, again, "; ".join(e.description for e in findings), int(sum(m.sum() for m in union)))
