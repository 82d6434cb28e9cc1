"""The determinism check (``--check-determinism [sample|all]``): a harness's exports must not
depend on the process that made them. Its modules and four-platform export are made again in
the worker, after every other check of the harness ran (a second export in one process, after
many other harnesses), and in a fresh child process that has made nothing else; each is held
against what the sweep kept (``farm.stages.determinism``, ``farm.judge.determinism``).

The cost is bounded by what is asked: ``sample`` checks one harness in
``farm.results.DETERMINISM_SAMPLE``, drawn by fingerprint (the same ones on every run, so a
difference is seen again), ``all`` every one; a fresh child costs a process start and a jax
import (about 2 s), so ``all`` is for a targeted sweep.
"""
from __future__ import annotations

from typing import Any

from farm.catalog import Harness
from farm.judge import verdict
from farm.pipeline.check import Base, Produced, Run
from farm.pipeline.child import Child
from farm.pipeline.isolation import Isolation
from farm.results import DETERMINISM_SAMPLE, check_spec
from farm.stages import compat, determinism, trace
from farm.stages.record import Timer

#: Catalogs a child process can load by name (a test's own harnesses it cannot).
LOADABLE = ("farm", "upstream", "pallas")


def sampled(h: Harness, how: str) -> bool:
    """Whether ``--check-determinism how`` checks ``h``: every harness, or one in
    ``DETERMINISM_SAMPLE`` drawn by its fingerprint (stable across runs and hosts)."""
    return how == "all" or (how == "sample" and int(h.fingerprint[:8], 16) % DETERMINISM_SAMPLE == 0)


class DeterminismCheck(Base):
    """On the static path of a harness whose export succeeded, where asked."""

    spec = check_spec("determinism")

    def applies(self, run: Run) -> bool:
        return (run.opts.determinism != "off" and run.static and run.exported is not None
                and sampled(run.h, run.opts.determinism))

    def run(self, run: Run) -> Produced:
        timer = Timer()
        try:
            with timer():
                kept = determinism.made({p: run.lowered[p] for p in run.opts.platforms},
                                        determinism.identity(run.exported))
                again = determinism.make(run.traced, run.opts.platforms)
                fresh, why = fresh_made(run.h, run.opts.platforms)
                rec = determinism.run(kept, again, fresh, why)
        except Exception as e:  # the farm's own bug: an error record, never a pass
            return [determinism.failed(e, timer.seconds)], []
        return [verdict(rec.with_status(rec.status, seconds=timer.seconds))], []


CHECK = DeterminismCheck()


def fresh_made(h: Harness, platforms: tuple[str, ...]) -> tuple[determinism.Made | None, str | None]:
    """What a fresh child process makes of ``h`` (None and why where none can: a harness a child
    cannot load by name, a mesh, a child that died or hung)."""
    if h.catalog not in LOADABLE:
        return None, f"a fresh process cannot load the {h.catalog!r} catalog by name"
    if h.mesh:
        return None, "a sharded harness is traced under its mesh: not made in a fresh process"
    child = Child(_serve, (h.catalog,), Isolation(timeout_s=max(60.0, 2 * (h.timeout_s or 60.0)), startup_s=120.0),
                  what="determinism child")
    try:
        ended = child.ask((h.fingerprint, platforms))
    finally:
        child.stop()
    if not ended.finished:
        return None, f"the fresh process {ended.how}"
    out = ended.output
    if isinstance(out, str):
        return None, out
    return determinism.Made.from_dict(out), None


def _serve(conn: Any, catalog_name: str) -> None:  # the child: one harness, then it is stopped
    import jax

    from farm.catalog import registry
    from farm.faults import plant_from_env

    plant_from_env()
    by_fp = {h.fingerprint: h for h in registry.load(catalog_name)}
    while (msg := conn.recv()) is not None:
        fp, platforms = msg
        h = by_fp.get(fp)
        if h is None:
            conn.send(f"the fresh process's {catalog_name} catalog has no harness {fp}")
            continue
        try:
            with compat.enable_x64(h.needs_x64 or bool(jax.config.jax_enable_x64)), compat.jax_config(h.jax_config):
                tr = trace.run(h, h.make_args())
                if not tr.ok:
                    conn.send(f"the harness does not trace in a fresh process: {tr.error_type}: {tr.error}")
                    continue
                conn.send(determinism.make(tr, tuple(platforms)).to_dict())
        except Exception as e:  # noqa: BLE001  said, never a dead child
            conn.send(f"the fresh process raised {type(e).__name__}: {e}"[:500])
