"""Standalone checks of a non-unique result (eig, eigh, svd, qr): what a ``repro.py`` runs
instead of comparing such outputs element by element.

The farm judges these outputs by their defining property (``farm.reference.invariants``),
computed in float64 from the reference's own value of the equation's operand. A script
carries that operand (float64, from the farm's reference evaluation), which program outputs
are the equation's, and the bound the farm uses (``farm.reference.invariants.invariant_bound``,
written into the script as a number); ``CODE`` recomputes the residuals with NumPy alone.
The eigenvalues-as-a-multiset check of eig needs SciPy's assignment solver and is left to
the values side (eig's vectors are checked here).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from farm.repro.verdict import Check

#: The non-unique primitives a script can check standalone
CHECKED = ("eigh", "eig", "svd", "qr")

CODE = '''
def _norm(x):
    return np.max(np.abs(x), axis=(-2, -1), initial=0.0) if x.size else np.zeros(x.shape[:-2])


def _rel(residual, scale):
    """The worst batch element's max-norm of ``residual`` over that of ``scale``."""
    r, s = _norm(residual), _norm(scale)
    with np.errstate(all="ignore"):
        out = np.where(r == 0, 0.0, r / np.where(s == 0, 1.0, s))
    return float(np.max(out, initial=0.0)) if not np.any(np.isnan(r)) else float("nan")


def _h(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _eye_err(q):
    g = _h(q) @ q
    return _rel(g - np.eye(g.shape[-1]), np.ones(g.shape[:-2] + (1, 1)))


def residuals(prim, params, a, got):
    """(what, error) per invariant of the equation ``prim`` on operand ``a`` (float64)."""
    if prim == "eigh":
        tri = np.tril(a) if params.get("lower", True) else np.triu(a)
        a = tri + _h(tri) - np.eye(a.shape[-1]) * np.diagonal(tri, axis1=-2, axis2=-1)[..., None, :].real
        v, w = got[0], got[1]
        return [("||A V - V diag(w)|| / ||A||", _rel(a @ v - v * w[..., None, :], a)), ("||V^H V - I||", _eye_err(v))]
    if prim == "eig":
        w, out, i = got[0], [], 1
        if params.get("compute_left_eigenvectors", True):
            vl = got[i]
            out.append(("||VL^H A - diag(w) VL^H|| / (||A|| ||VL||)",
                        _rel(_h(vl) @ a - w[..., :, None] * _h(vl), a * _norm(vl)[..., None, None])))
            i += 1
        if params.get("compute_right_eigenvectors", True):
            vr = got[i]
            out.append(("||A VR - VR diag(w)|| / (||A|| ||VR||)",
                        _rel(a @ vr - vr * w[..., None, :], a * _norm(vr)[..., None, None])))
        return out
    if prim == "svd":
        s, u, vt = got[0], got[1], got[2]
        k = s.shape[-1]
        return [("||A V - U diag(s)|| / ||A||", _rel(a @ _h(vt[..., :k, :]) - u[..., :, :k] * s[..., None, :], a)),
                ("||U^H U - I||", _eye_err(u)), ("||V^H V - I||", _eye_err(_h(vt)))]
    if prim == "qr":
        q, r = got[0], got[1]
        return [("||A - Q R|| / ||A||", _rel(a - q @ r, a)), ("||Q^H Q - I||", _eye_err(q)),
                ("||strictly lower part of R|| / ||A||", _rel(np.tril(r, -1), a))]
    raise ValueError(f"no standalone invariant for {prim}")


def invariant_failed(outs, data, CHECK):
    """The equation's invariants on the computed outputs (in float64); True if one exceeds the bound."""
    inv = CHECK["invariant"]
    a = np.asarray(data[0])
    got = {}
    for eqn_index, out_index in inv["outputs"].items():
        x = np.asarray(outs[out_index])
        got[int(eqn_index)] = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    for i, x in enumerate(data[1:]):  # the equation's outputs that are not program outputs: the reference's
        if x is not None:
            got.setdefault(i, np.asarray(x))
    failed = False
    for what, err in residuals(inv["primitive"], inv["params"], a, got):
        bad = not err <= inv["bound"]  # NaN is a failure
        failed |= bad
        print(f"{inv['primitive']} invariant {what} = {err:.3g} ({'over' if bad else 'within'} the bound "
              f"{inv['bound']:.3g}: 16 * n * eps({inv['dtype']}))")
    return failed
'''


@dataclass(frozen=True)
class Side:
    """The invariant side of a script: its check, and the data its ``EXPECTED`` returns (the
    operand, then the reference's value of each equation output, None where the program
    returns it)."""

    check: Check
    data: list[np.ndarray | None]
    outputs: frozenset[int]  # the program outputs judged here (not by the values side)


class NoStandaloneCheck(Exception):
    """The program's non-unique result has no standalone check (the message says why)."""


def side(closed: Any, dyn: list[Any]) -> Side | None:
    """The invariant side for the program ``closed`` on ``dyn``, or None where no output is
    judged by an invariant.

    Raises:
        NoStandaloneCheck: an invariant output of another primitive, or of more than one equation."""
    from farm.reference.evaluator import call_jaxpr, tapping
    from farm.reference.plan import plan
    from farm.reference.invariants import invariant_bound

    p = plan(closed)
    inv = [(k, o) for k, o in enumerate(p.outputs) if o.kind == "invariant"]
    if not inv:
        return None
    eqns = {id(o.eqn): o.eqn for _, o in inv}
    prims = sorted({e.primitive.name for e in eqns.values()})
    if len(eqns) != 1 or prims[0] not in CHECKED:
        raise NoStandaloneCheck(f"outputs judged by the invariants of {', '.join(prims)} "
                                f"({len(eqns)} equation(s)); a standalone check exists for one {'/'.join(CHECKED)}")
    eqn = next(iter(eqns.values()))
    with np.errstate(all="ignore"), tapping(frozenset(eqns)) as taps:
        call_jaxpr(closed, list(dyn))
    tap = taps.get(id(eqn))
    if tap is None or tap.calls != 1:
        raise NoStandaloneCheck(f"the {prims[0]} equation did not run exactly once")
    a = np.asarray(tap.ins[0])
    a = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    dtype = np.dtype(eqn.outvars[0].aval.dtype)
    real = np.dtype(np.float32 if dtype == np.complex64 else np.float64) if dtype.kind == "c" else dtype
    n = a.shape[-1] if prims[0] in ("eigh", "eig") else max(a.shape[-2:])
    bound = float(invariant_bound(real, n))
    program_outs = {o.index: k for k, o in inv}
    params = {k: v for k, v in eqn.params.items() if isinstance(v, (bool, int, float, str))}
    check = Check("invariant", f"the {prims[0]} invariants", invariant={
        "primitive": prims[0], "params": params, "outputs": {str(i): k for i, k in sorted(program_outs.items())},
        "dtype": real.name, "n": int(n), "bound": bound})
    data: list[np.ndarray | None] = [a] + [None if i in program_outs else np.asarray(o) for i, o in enumerate(tap.outs)]
    return Side(check, data, frozenset(program_outs.values()))
