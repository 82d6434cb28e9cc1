"""One candidate program, judged the way the farm judges a harness, in an isolated process.

A candidate is plain data: which equations of the harness's flat program it keeps,
which values it returns and the arrays it takes as inputs. ``Worker`` runs candidates
in a child process that traced the harness itself (tracing is deterministic, so both
sides name the same values); a candidate that kills the child or runs past its time is
a ``crashed`` or ``timeout`` data point, and the next candidate gets a fresh child.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from farm.judge import lost_record
from farm.pipeline.child import TIMED_OUT, Child, Ended
from farm.pipeline.isolation import Isolation


@dataclass(frozen=True)
class Candidate:
    keep: tuple[int, ...]
    outs: tuple[str, ...]
    inputs: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class Source:
    """Where a worker finds the harness: catalog, extra modules, exact name, and the
    environment it runs in (``JAX_ENABLE_X64``, ``XLA_FLAGS``, ``FARM_PLANT``...)."""

    catalog: str
    modules: tuple[str, ...]
    name: str
    env: dict[str, str] = field(default_factory=dict)


def load_harness(catalog: str, modules: tuple[str, ...], name: str) -> Any:
    """The harness named exactly ``name``, or None."""
    from farm.catalog import Filters, select

    found = select(Filters.parse(catalog=catalog, name=name, modules=",".join(modules) or None))
    return next((h for h in found if h.name == name), None)


def traced_program(h: Any) -> tuple[Any, list[Any]]:
    """(the harness's flat ``Program``, its dynamic arguments), traced as the pipeline does."""
    from farm.repro.flat import Program, flatten
    from farm.stages import trace

    args = h.make_args()
    jf, dyn = trace.jitted(h, args)
    closed = jf.trace(*dyn).jaxpr
    return Program(flatten(closed, dyn)), [np.asarray(d) for d in dyn]


def _record(stage: str, status: str, error: Exception | str | None = None, **extra: Any) -> dict[str, Any]:
    if isinstance(error, Exception):
        return {"stage": stage, "platform": "cpu", "status": status, "error_type": type(error).__name__,
                "error": str(error)[:1000], **extra}
    return {"stage": stage, "platform": "cpu", "status": status, "error_type": "Mismatch" if status == "fail" else None,
            "error": error, **extra}


def evaluate(program: Any, c: Candidate) -> dict[str, Any]:
    """The candidate's record: trace, lower, compile or execute error, else the float64
    jaxpr reference's verdict on its outputs (``farm.reference.judge``)."""
    import jax

    from farm.judge import judge_jaxpr as judge

    f, names = program.function(c.keep, c.outs)
    args = [c.inputs[n] for n in names]
    try:
        closed = jax.make_jaxpr(f)(*args)
    except Exception as e:
        return _record("trace", "error", e)
    try:
        lowered = jax.jit(f).trace(*args).lower()
    except Exception as e:
        return _record("lower", "error", e)
    try:
        compiled = lowered.compile()
    except Exception as e:
        return _record("compile", "error", e)
    try:
        outs = [np.asarray(o) for o in compiled(*args)]
    except Exception as e:
        return _record("execute", "error", e)
    try:
        v = judge(closed, args, outs)
    except Exception as e:
        return _record("compare", "error", e)
    return _record("compare", v.status, v.error, facts=dict(v.facts), metrics=dict(v.metrics), outputs=outs)


def values(program: Any, dyn: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Every value of the program on its own inputs, as this backend computes them (what a
    dropped equation's output is replaced by when it becomes an input)."""
    import jax

    names = program.names()
    every = [names[v] for eqn in program.jaxpr.eqns for v in eqn.outvars if type(v).__name__ != "DropVar"]
    f, inputs = program.function(range(len(program.jaxpr.eqns)), every)
    got = jax.jit(f)(*[dict(zip([f"a{i}" for i in range(len(dyn))], dyn))[n] for n in inputs])
    out = {f"a{i}": d for i, d in enumerate(dyn)}
    out.update({n: np.asarray(g) for n, g in zip(every, got)})
    return out


def export(program: Any, c: Candidate) -> bytes:
    """The candidate as a serialized ``jax.export`` artifact for this backend (made here,
    where a planted fault is in force)."""
    import jax

    f, names = program.function(c.keep, c.outs)
    args = [c.inputs[n] for n in names]
    return bytes(jax.export.export(jax.jit(f), platforms=(jax.default_backend(),))(*args).serialize())


def symbolic_export(h: Any, platforms: tuple[str, ...]) -> bytes:
    """The harness's symbolic variant (``farm.stages.symbolic``) exported for ``platforms``
    and serialized: made here, where a planted fault is in force, for a reproducer to call."""
    from farm.stages import symbolic

    v = symbolic.variant(h)
    if isinstance(v, str):
        raise ValueError(f"no symbolic variant: {v}")
    v, _ = symbolic.widened(v)  # as the sweep exports it (widened over the four platforms)
    rec = symbolic.export_one(v, platforms, "export")
    if rec.status != "ok":
        raise RuntimeError(rec.error)
    return bytes(rec.handle.serialize())


def vjp_export(h: Any, platforms: tuple[str, ...], order: int) -> bytes:
    """The harness's function exported for ``platforms`` and serialized with ``order`` orders
    of vjp (``farm.stages.gradients.serialize``): made here, where a planted fault (a wrong
    JVP rule) is in force, so its vjp modules carry it, for a reproducer to differentiate."""
    import jax

    from farm.stages import trace

    jf, dyn = trace.jitted(h, h.make_args())
    return bytes(jax.export.export(jf, platforms=platforms)(*dyn).serialize(vjp_order=order))


def _serve(conn: Any, src: Source) -> None:
    os.environ.update(src.env)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import jax

    from farm.faults import plant_from_env
    from farm.stages import compat

    plant_from_env()
    h = load_harness(src.catalog, src.modules, src.name)
    with compat.enable_x64(h.needs_x64 or bool(jax.config.jax_enable_x64)):
        program, dyn = traced_program(h)
        conn.send(("ready", None))
        while True:
            req = conn.recv()
            if req is None:
                return
            kind, body = req
            if kind in ("symbolic_export", "vjp_export"):
                try:
                    conn.send(("export", symbolic_export(h, tuple(body)) if kind == "symbolic_export"
                               else vjp_export(h, tuple(body[0]), int(body[1]))))
                except Exception as e:  # a record, not a dead worker
                    conn.send(("record", _record(kind, "error", e)))
            elif kind in ("values", "export"):
                try:
                    conn.send((kind, values(program, dyn) if kind == "values" else export(program, body)))
                except Exception as e:  # a record, not a dead worker
                    conn.send(("record", _record(kind, "error", e)))
            else:
                conn.send(("record", evaluate(program, body)))


def _lost_record(ended: Ended) -> dict[str, Any]:
    """The record of a candidate whose child did not answer: ``timeout`` or ``crashed``."""
    hung = ended.how == TIMED_OUT
    why = f"no result after {ended.limit_s:.0f}s; worker killed" if hung else \
        f"worker process died (exit code {ended.exitcode})"
    return {**lost_record("execute", "cpu", hung=hung, why=why), "error_type": None if hung else "Crashed"}


class Worker:
    """A child process that judges candidates one at a time; replaced when it dies or hangs."""

    def __init__(self, src: Source, timeout_s: float = 60.0, startup_s: float = 180.0) -> None:
        self.src = src
        self.timeout_s = timeout_s
        self.startup_s = startup_s
        self.child = Child(_serve, (src,), Isolation(timeout_s, startup_s), hello=True, what="repro worker")
        self.restarts = 0

    def start(self) -> None:
        self.child.start()

    def stop(self) -> None:
        self.child.stop(grace_s=1.0)

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def ask(self, kind: str, body: Any = None) -> tuple[str, Any]:
        """("values" | "record", result); a dead or hung child answers with a crashed or
        timeout record (and is replaced on the next call)."""
        ended = self.child.ask((kind, body))
        if ended.finished:
            return ended.output
        self.restarts += 1
        return "record", _lost_record(ended)

    def judge(self, c: Candidate) -> dict[str, Any]:
        return self.ask("run", c)[1]
