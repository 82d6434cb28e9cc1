"""One candidate program, judged the way the farm judges a harness, in an isolated process.

A candidate is plain data: which equations of the harness's flat program it keeps,
which values it returns and the arrays it takes as inputs. ``Worker`` runs candidates
in a child process that traced the harness itself (tracing is deterministic, so both
sides name the same values); a candidate that kills the child or runs past its time is
a ``crashed`` or ``timeout`` data point, and the next candidate gets a fresh child.
"""
from __future__ import annotations

import multiprocessing as mp
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np


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

    from farm.reference.verdict import judge

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
            if kind in ("values", "export"):
                try:
                    conn.send((kind, values(program, dyn) if kind == "values" else export(program, body)))
                except Exception as e:  # a record, not a dead worker
                    conn.send(("record", _record(kind, "error", e)))
            else:
                conn.send(("record", evaluate(program, body)))


class Worker:
    """A child process that judges candidates one at a time; replaced when it dies or hangs."""

    def __init__(self, src: Source, timeout_s: float = 60.0, startup_s: float = 180.0) -> None:
        self.src = src
        self.timeout_s = timeout_s
        self.startup_s = startup_s
        self.proc: Any = None
        self.conn: Any = None
        self.restarts = 0

    def start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, self.src), daemon=True)
        self.proc.start()
        self.conn = parent
        if not parent.poll(self.startup_s):
            self.stop()
            raise RuntimeError("repro worker did not start")
        parent.recv()

    def stop(self) -> None:
        if self.proc is not None:
            if self.conn is not None:
                try:
                    self.conn.send(None)
                except (OSError, BrokenPipeError):
                    pass
            self.proc.join(1)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(5)
            self.proc = None

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def ask(self, kind: str, body: Any = None) -> tuple[str, Any]:
        """("values" | "record", result); a dead or hung child answers with a crashed or
        timeout record (and is replaced on the next call)."""
        if self.proc is None:
            self.start()
        try:
            self.conn.send((kind, body))
            if self.conn.poll(self.timeout_s):
                return self.conn.recv()
            self._kill()
            return "record", _record("execute", "timeout", f"no result after {self.timeout_s:.0f}s; worker killed")
        except (EOFError, OSError):
            if self.proc is not None:
                self.proc.join(5)  # the exit code (the signal) is part of the failure's signature
            code = self.proc.exitcode if self.proc else None
            self._kill()
            return "record", {**_record("execute", "crashed", f"worker process died (exit code {code})"),
                              "error_type": "Crashed"}

    def _kill(self) -> None:
        self.restarts += 1
        if self.proc is not None:
            self.proc.kill()
            self.proc.join(5)
        self.proc = None

    def judge(self, c: Candidate) -> dict[str, Any]:
        return self.ask("run", c)[1]
