"""Delta debugging of a failing harness: the smallest program and input that still fail
the same way.

Every candidate is judged in an isolated worker (``farm.repro.candidate.Worker``) and
kept only if its record has the target's signature (``same``). The phases, each run to
a fixed point in this order:

1. outputs: return only an output that fails alone;
2. move the output up: the value with the smallest cone of equations that still fails
   (the wrong equation itself, with everything after it gone);
3. drop equations from the top (ddmin): a dropped equation's output becomes an input,
   holding the value this backend computed for it;
4. shrink inputs: for an elementwise program, keep only failing elements (ddmin over
   element indices), down to one scalar; otherwise halve dimensions (jointly where
   several inputs share a size, as a convolution's feature dimension does);
5. simplify dtypes: an input (and so the program) in a narrower dtype, where the
   failure survives (float64 → float32, complex128 → complex64).
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from farm.repro.candidate import Candidate, Worker
from farm.results import REPRODUCIBLE

#: statuses that are a failure to reproduce (``expected_fail``: a declared bug is still a bug)
FAILING = REPRODUCIBLE


@dataclass(frozen=True)
class Step:
    """One candidate tried: the phase, what it changed, its record's status and whether it was kept."""

    phase: str
    what: str
    status: str
    kept: bool
    eqns: int
    elements: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "what": self.what, "status": self.status, "kept": self.kept,
                "eqns": self.eqns, "elements": self.elements, "seconds": round(self.seconds, 3)}


@dataclass
class Minimized:
    """The smallest failing candidate found, its record, and how it was found."""

    start: Candidate
    target: dict[str, Any]
    best: Candidate
    record: dict[str, Any]
    steps: list[Step] = field(default_factory=list)
    seconds: float = 0.0
    restarts: int = 0

    def to_dict(self) -> dict[str, Any]:
        kept = sum(s.kept for s in self.steps)
        return {"seconds": round(self.seconds, 2), "candidates": len(self.steps), "kept": kept,
                "worker_restarts": self.restarts,
                "start": _size(self.start), "end": _size(self.best),
                "target": {k: self.target.get(k) for k in ("stage", "platform", "status", "error_type", "error")},
                "final": {k: self.record.get(k) for k in ("stage", "platform", "status", "error_type", "error")},
                "steps": [s.to_dict() for s in self.steps]}


def _size(c: Candidate) -> dict[str, Any]:
    return {"eqns": len(c.keep), "elements": int(sum(np.size(v) for v in c.inputs.values())),
            "inputs": {k: [str(v.dtype), list(np.shape(v))] for k, v in c.inputs.items()}}


def failing(record: dict[str, Any]) -> bool:
    return record.get("status") in FAILING


class NotReproduced(Exception):
    """The full program, run as a candidate, does not fail."""


def ddmin(items: Sequence[Any], test: Callable[[list[Any]], bool]) -> list[Any]:
    """Zeller's ddmin: a 1-minimal sublist of ``items`` for which ``test`` holds (``test``
    is assumed to hold for ``items``); the empty list is tried first."""
    items = list(items)
    if items and test([]):
        return []
    n = 2
    while len(items) >= 2:
        chunks = [items[i * len(items) // n:(i + 1) * len(items) // n] for i in range(n)]
        for i, chunk in enumerate(chunks):
            if test(chunk):
                items, n = chunk, 2
                break
            rest = [x for j, c in enumerate(chunks) if j != i for x in c]
            if n > 2 and test(rest):
                items, n = rest, max(n - 1, 2)
                break
        else:
            if n >= len(items):
                break
            n = min(len(items), 2 * n)
    return items


class _Search:
    """The state of one minimization: the worker, the target, the best candidate so far."""

    def __init__(self, program: Any, worker: Worker, target: dict[str, Any], start: Candidate,
                 same: Callable[[dict[str, Any], dict[str, Any]], bool]) -> None:
        self.program = program
        self.worker = worker
        self.target = target
        self.best = start
        self.record = target
        self.same = same
        self.steps: list[Step] = []
        self._values: dict[str, np.ndarray] | None = None

    def test(self, c: Candidate, phase: str, what: str) -> bool:
        t0 = time.perf_counter()
        r = self.worker.judge(c)
        ok = self.same(self.target, r)
        self.steps.append(Step(phase, what, r.get("status", "?"), ok, len(c.keep),
                               int(sum(np.size(v) for v in c.inputs.values())), time.perf_counter() - t0))
        if ok:
            self.best, self.record = c, r
        return ok

    def values(self) -> dict[str, np.ndarray] | None:
        """Every intermediate value of the harness on its inputs (None: computing them failed)."""
        if self._values is None:
            kind, got = self.worker.ask("values")
            self._values = got if kind == "values" else reference_values(self.program, self.best.inputs)
        return self._values or None

    def candidate(self, keep: Sequence[int], outs: Sequence[str], values: dict[str, np.ndarray]) -> Candidate:
        free = self.program.free(keep, outs)
        return Candidate(tuple(sorted(keep)), tuple(outs), {n: values[n] for n in free})

    # ------------------------------------------------------------------ phases
    def outputs(self) -> None:
        outs = self.best.outs
        if len(outs) < 2:
            return
        for o in outs:
            keep = self.program.cone([o])
            if self.test(Candidate(tuple(keep), (o,), {n: self.best.inputs[n] for n in self.program.free(keep, [o])}),
                         "outputs", f"return only {o}"):
                return

    def move_output(self) -> None:
        """Try every value computed by the program, smallest cone first, as the only output."""
        if any(not n.startswith("a") for n in self.best.inputs):
            return
        names = self.program.names()
        now = len(self.best.keep)
        tried = []
        for n in self.best.keep:
            for v in self.program.jaxpr.eqns[n].outvars:
                if v in names and (names[v],) != self.best.outs:
                    cone = self.program.cone([names[v]])
                    if len(cone) < now:
                        tried.append((len(cone), n, names[v], cone))
        for _, n, out, cone in sorted(tried):
            eqn = self.program.jaxpr.eqns[n]
            c = Candidate(tuple(cone), (out,), {k: self.best.inputs[k] for k in self.program.free(cone, [out])})
            if self.test(c, "move output", f"return {out} ({eqn.primitive.name}, {len(cone)} equations)"):
                return

    def drop_equations(self) -> None:
        outs = self.best.outs
        producers = set(self.program.cone(outs)) & {n for n in self.best.keep if any(
            name in outs for name in (self.program.names().get(v) for v in self.program.jaxpr.eqns[n].outvars))}
        removable = [n for n in self.best.keep if n not in producers]
        if not removable:
            return
        values = self.values()
        if values is None:
            return
        values = {**values, **self.best.inputs}

        def test(subset: list[int]) -> bool:
            keep = sorted({*subset, *producers})
            dropped = [self.program.jaxpr.eqns[n].primitive.name for n in removable if n not in subset]
            return self.test(self.candidate(keep, outs, values), "drop equations",
                             f"keep {len(keep)} equations (dropped {', '.join(dropped)})")

        ddmin(removable, test)

    def shrink_inputs(self) -> None:
        shapes = {np.shape(v) for v in self.best.inputs.values()} - {()}
        if len(shapes) == 1 and self._elementwise(shapes.pop()):
            self._elements()
        else:
            self._halve()

    def _elementwise(self, shape: tuple[int, ...]) -> bool:
        return all(np.shape(v) in (shape, ()) for v in self.record.get("outputs") or [])

    def _elements(self) -> None:
        base = dict(self.best.inputs)
        size = math.prod(next(np.shape(v) for v in base.values() if np.shape(v)))

        def pick(idx: list[int], scalar: bool = False) -> Candidate:
            ins = {}
            for k, v in base.items():
                if np.shape(v):
                    flat = np.asarray(v).reshape(-1)[idx]
                    ins[k] = flat.reshape(()) if scalar else flat
                else:
                    ins[k] = v
            return Candidate(self.best.keep, self.best.outs, ins)

        chosen = ddmin(list(range(size)), lambda idx: bool(idx) and self.test(pick(idx), "shrink inputs",
                                                                                 f"keep {len(idx)} of {size} elements"))
        if len(chosen) == 1:
            self.test(pick(chosen, scalar=True), "shrink inputs", "one scalar")

    def _halve(self) -> None:
        progress = True
        while progress:
            progress = False
            sizes: dict[int, list[tuple[str, int]]] = {}
            for k, v in self.best.inputs.items():
                for ax, s in enumerate(np.shape(v)):
                    if s > 1:
                        sizes.setdefault(s, []).append((k, ax))
            moves = [(f"halve every dimension of size {s}", dims) for s, dims in sorted(sizes.items(), reverse=True)]
            moves += [(f"halve {k} axis {ax}", [(k, ax)]) for s, dims in sorted(sizes.items(), reverse=True)
                      for k, ax in dims if len(dims) > 1]
            for what, dims in moves:
                ins = dict(self.best.inputs)
                for k, ax in dims:
                    v = np.asarray(ins[k])
                    ins[k] = np.take(v, range(v.shape[ax] // 2), axis=ax)
                if self.test(Candidate(self.best.keep, self.best.outs, ins), "shrink inputs", what):
                    progress = True
                    break

    def narrow_dtypes(self) -> None:
        narrower = {"float64": np.float32, "complex128": np.complex64}
        wide = {k: v for k, v in self.best.inputs.items() if np.asarray(v).dtype.name in narrower}
        with np.errstate(all="ignore"):  # only where every value survives the narrowing exactly
            exact = all(np.array_equal(np.asarray(v).astype(narrower[np.asarray(v).dtype.name]).astype(np.asarray(v).dtype),
                                       v, equal_nan=True) for v in wide.values())
        if not wide or not exact:
            return
        ins = {k: (np.asarray(v).astype(narrower[np.asarray(v).dtype.name]) if k in wide else v)
               for k, v in self.best.inputs.items()}
        self.test(Candidate(self.best.keep, self.best.outs, ins), "simplify dtypes",
                  "inputs " + ", ".join(sorted({np.asarray(v).dtype.name for v in wide.values()})) + " narrowed")


def reference_values(program: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every intermediate value by the float64 reference, rounded to its own dtype: the
    inputs of dropped equations where running the program here crashes ({} where the
    reference has no rule for it)."""
    import jax

    from farm.reference import evaluate

    names = program.names()
    every = [names[v] for eqn in program.jaxpr.eqns for v in eqn.outvars if type(v).__name__ != "DropVar"]
    dtypes = [v.aval.dtype for eqn in program.jaxpr.eqns for v in eqn.outvars if type(v).__name__ != "DropVar"]
    f, free = program.function(range(len(program.jaxpr.eqns)), every)
    try:
        args = [inputs[n] for n in free]
        with np.errstate(all="ignore"):
            got = evaluate(jax.make_jaxpr(f)(*args), *args)
    except Exception:  # no rule, or the inputs were already cut: no dropping from the top
        return {}
    return {**inputs, **{n: np.asarray(g).astype(d) for n, g, d in zip(every, got, dtypes)}}


def minimize(program: Any, dyn: Sequence[np.ndarray], worker: Worker,
             same: Callable[[dict[str, Any], dict[str, Any]], bool]) -> Minimized:
    """Shrink the harness's program while its failure keeps its signature.

    Raises:
        NotReproduced: the full program, judged as a candidate, does not fail."""
    t0 = time.perf_counter()
    start = Candidate(tuple(range(len(program.jaxpr.eqns))), tuple(program.outputs()),
                      {f"a{i}": np.asarray(d) for i, d in enumerate(dyn)})
    target = worker.judge(start)
    if not failing(target):
        raise NotReproduced(f"the program alone, judged by the float64 jaxpr reference, is {target.get('status')}"
                            + (f" ({target.get('error')})" if target.get("error") else ""))
    s = _Search(program, worker, target, start, same)
    for phase in (s.outputs, s.move_output, s.drop_equations, s.shrink_inputs, s.narrow_dtypes):
        phase()
    return Minimized(start, target, s.best, s.record, s.steps, time.perf_counter() - t0, worker.restarts)
