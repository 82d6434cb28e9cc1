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
from farm.catalog.known import EdgeValue, api_edge_values, singular_matrix
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
    """A transform's or a matrix function's edge variant (``farm.catalog.api._edge_rows``: one
    special value a row; ``_edge_matrices``: one edge a matrix)."""
    return dict(h.key.params).get("edge") in ("rows", "matrices")


def is_matrices(h: Harness) -> bool:
    """A matrix function's edge variant (``farm.catalog.api._edge_matrices``: one edge a matrix)."""
    return dict(h.key.params).get("edge") == "matrices"


def _both_nonfinite(a: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Elements where neither output is finite (a component inf or NaN)."""
    if a.dtype.kind not in "fc" or np.shape(r) != a.shape:
        return np.zeros(a.shape, bool)
    return ~np.isfinite(a) & ~np.isfinite(np.asarray(r))


def _members(x: np.ndarray) -> np.ndarray:
    """``x`` with one row per matrix of the batch (its leading axis)."""
    return x.reshape(x.shape[0], -1) if x.ndim else x.reshape(1, 1)


def _refused_alike(a: np.ndarray, r: np.ndarray, given: np.ndarray) -> np.ndarray:
    """Elements of the matrices whose twin answer is not finite anywhere (NumPy refused it, or its
    answer is all inf and NaN), judged per matrix: where the matrix given (``given``: the operand
    batch) holds inf or NaN, a factorization has no unique answer (NaN, or a limit the algorithm
    finds: SciPy refuses such a matrix outright), so any answer agrees; where it is finite, the
    breakdown (a singular matrix, one not positive definite) must show as some inf or NaN
    (jnp.linalg.cholesky's documented contract), and a finite answer still differs."""
    if np.shape(r) != a.shape or not a.size or not given.size or given.shape[0] != a.shape[0]:
        return np.zeros(a.shape, bool)
    ra, rr = _members(a), _members(np.asarray(r))
    with np.errstate(all="ignore"):
        twin_none = ~np.isfinite(rr.astype(np.complex128)).any(axis=1)
        shown = ~np.isfinite(ra.astype(np.complex128)).all(axis=1) if a.dtype.kind in "fc" \
            else np.zeros(len(ra), bool)
    member = twin_none & (_wild(given) | shown)
    return np.broadcast_to(member[:, None], ra.shape).reshape(a.shape)


def _wild(given: np.ndarray, bound: float = np.inf) -> np.ndarray:
    """Per matrix of the batch ``given``: whether it holds inf or NaN, or an entry past ``bound``."""
    with np.errstate(all="ignore"):
        g = np.abs(_members(given).astype(np.complex128))
        return ~(np.isfinite(g) & (g <= bound)).all(axis=1)


def _member_covered(where: Any, given: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The elements of a batched output of ``shape`` an edge entry covers, asked matrix by matrix
    (``MATRIX_EDGE_VALUES``: ``where`` takes one matrix of the operand batch ``given``)."""
    if not shape or not given.size or given.shape[0] != shape[0]:
        return np.zeros(shape, bool)
    with np.errstate(all="ignore"):
        member = np.array([bool(where(m)) for m in given])
    return np.broadcast_to(member.reshape((-1,) + (1,) * (len(shape) - 1)), shape)


def _smallest_normal(dtype: np.dtype) -> float:
    return float(np.finfo(dtype).tiny) if dtype.kind in "fc" else 0.0  # a complex dtype's: its parts'


def _normwise(a: np.ndarray, r: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Elements within a normwise band of their matrix's answer: |a - r| <= rtol * s + atol * min(s, 1),
    s the largest finite |r| of the matrix. A backward-stable factorization is accurate to eps
    times the matrix's norm, not element by element (a singular value far below the largest one
    is lost in float32 rounding), and at a unit scale the band is the harness's tolerance; below it
    the band shrinks with the matrix (a matrix scaled by 2**-66 is held relatively, not by atol)."""
    if a.dtype.kind not in "fc" or np.shape(r) != a.shape or not a.size:
        return np.zeros(a.shape, bool)
    with np.errstate(all="ignore"):
        rr = _members(np.asarray(r)).astype(np.complex128 if np.iscomplexobj(r) else np.float64)
        mag = np.where(np.isfinite(rr), np.abs(rr), 0.0)
        s = mag.max(axis=1, initial=0.0)[:, None]
        # and the output dtype's smallest normal: XLA:CPU flushes a subnormal result to zero
        band = rtol * s + atol * np.minimum(s, 1.0) + _smallest_normal(a.dtype)
        d = _distance(_members(a), rr)
    return (np.isfinite(d) & (d <= band)).reshape(a.shape)


def nonfinite_alike(h: Harness, outs: list[np.ndarray], others: list[np.ndarray], args: list[Any] = (),
                    rtol: float = 0.0, atol: float = 0.0) -> list[np.ndarray]:
    """For a transform's edge rows and a matrix function's edge matrices: ``others`` with ``outs``'
    values where neither is finite. Which of inf and NaN (and in which component) a transform of
    inf gives is its algorithm's: pocketfft, XLA:CPU's FFT and another platform's lowering of the
    same function differ there, and a finite answer where the other is not still differs. For edge
    matrices also (``args``: the operands) where the matrix given holds inf, NaN or entries past
    ``OVERFLOWING``, or is singular (no unique answer: each platform's algorithm finds its own, as
    for the lax factorizations' ``NO_UNIQUE_ANSWER``) and within the normwise band of the other
    (``_normwise``, under ``rtol`` and ``atol``)."""
    if not is_rows(h):
        return others
    given = np.asarray(upcast(args[0])) if is_matrices(h) and len(args) else None
    out = []
    for o, r in zip(outs, others):
        o = np.asarray(o)
        if np.shape(o) != np.shape(r):
            out.append(r)
            continue
        m = _both_nonfinite(o, r)
        if given is not None and given.shape[:1] == o.shape[:1] and o.ndim:
            # inf, NaN or overflowing entries: each algorithm's own (NO_UNIQUE_ANSWER); and a singular
            # matrix: its smallest singular value is rounding noise, on which side of a cutoff it falls
            # (pinv, lstsq, matrix_rank) or how small it is (cond) is each algorithm's
            wild = _wild(given, OVERFLOWING) | np.array([singular_matrix(x) for x in given])
            m = m | np.broadcast_to(wild.reshape((-1,) + (1,) * (o.ndim - 1)), o.shape) \
                | _normwise(o, np.asarray(r), rtol, atol)
        out.append(np.where(m, o, r))
    return out


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
    rows, matrices = is_rows(h), is_matrices(h)
    if matrices:  # normwise per matrix (``_normwise``), no absolute band beside it
        atol, band_atol = 0.0, atol

    def cover(e: EdgeValue, shape: tuple[int, ...]) -> np.ndarray:
        return _member_covered(e.where, operands[0], shape) if matrices else _covered(e.where, operands, shape)

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
            if matrices:
                m = m | _refused_alike(a, r, operands[0])
            for e in edges:
                m = m | cover(e, a.shape)
            n += int(np.sum(m & (_distance(a, np.asarray(r)) > 0)))
            refs.append(np.where(m, a, r) if m.any() else r)
        return refs, n

    def judged(refs: list[np.ndarray], facts: dict[str, Any]) -> Record:
        if matrices:  # within the normwise band: JAX's value in the twin's place, counted where an elementwise band would not hold it
            held = [_normwise(np.asarray(a), r, rtol, band_atol) for a, r in zip(actual, refs)]
            loose = sum(int(np.sum(m & (_distance(np.asarray(a), np.asarray(r)) > rtol * np.abs(np.asarray(r)) + band_atol)))
                        for a, r, m in zip(actual, refs, held) if m.shape == np.shape(r))
            refs = [np.where(m, np.asarray(a), r) if m.any() else r for a, r, m in zip(actual, refs, held)]
            facts = {**facts, **({"normwise": loose} if loose else {})}
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
    masks = [(e, [cover(e, np.shape(a)) for a in actual]) for e in known if e.finding]
    masks = [(e, ms) for e, ms in masks if any(m.any() for m in ms)]  # the findings that cover elements here
    findings = [e for e, _ in masks]
    if not findings or rec.status not in ("ok", "fail"):
        return rec
    union = [np.logical_or.reduce(per) for per in zip(*(ms for _, ms in masks))]  # per output
    # without the findings' elements: the same answers (conventions excused, mpmath's), JAX's in their place
    again = judged([np.where(m, np.asarray(a), r) if np.shape(r) == np.shape(a) else r
                    for a, r, m in zip(actual, base, union)], facts) if rec.status == "fail" else None
    return with_finding(rec, again, "; ".join(e.description for e in findings), int(sum(m.sum() for m in union)))
