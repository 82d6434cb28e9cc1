"""The ``pallas_export`` stage of a Pallas harness, once per target its kernel is written for
among the sweep's platforms and ``Options.pallas_targets`` (``farm.catalog.pallas.targets``),
each judged (``farm.judge.pallas``), and the interpret-mode kernel against its own jnp
reference where it ships one; its limitations are applied with the others by ``run_harness``.

Each target's serialized artifact is kept (an ``export`` artifact, meta ``stage:
pallas_export``) so that a version sweep's cross run can hand it to another jax
(``run_pallas_prior``: the ``pallas_xver`` stage, deserialize only).
"""
from __future__ import annotations

import base64
import functools
from collections.abc import Mapping
from typing import Any

from farm.catalog import Harness
from farm.catalog.pallas import targets
from farm.judge import verdict
from farm.pipeline.check import Base, Produced, Run
from farm.results import Artifact, Options, Record, check_spec
from farm.stages import pallas
from farm.stages.record import failure


#: What the farm's Pallas stages use of jax (interpret mode, TPU generations, abstract devices),
#: each (module, attribute); jax 0.5.3 has none of the first two.
PALLAS_NEEDS = (("jax.experimental.pallas.tpu", "force_tpu_interpret_mode"), ("jax._src.pallas.mosaic.tpu_info", ""),
                ("jax.sharding", "use_abstract_mesh"))


@functools.cache
def missing_api(source: str) -> str | None:
    """Why a Pallas harness cannot run on this jax (as ``farm.pipeline.meshes.missing_api`` for
    a mesh): what the farm's Pallas stages need of jax (``PALLAS_NEEDS``), or its kernel's own
    module of the jax wheel (``Kernel.source``). Asked once per source in a process."""
    import importlib
    import importlib.util

    for module, attr in PALLAS_NEEDS:
        try:
            found = importlib.import_module(module)
        except ImportError:
            return f"this jax has no {module} (the farm's Pallas stages need it)"
        if attr and not hasattr(found, attr):
            return f"this jax has no {module}.{attr} (the farm's Pallas stages need it)"
    if source == "farm":
        return None
    try:
        has = importlib.util.find_spec(source) is not None
    except ImportError:  # a parent package is missing too
        has = False
    return None if has else f"this jax's wheel has no {source}"


def run_pallas(h: Harness, dyn: list[Any], opts: Options) -> list[Record]:
    """``run_pallas_kept``'s records alone."""
    return run_pallas_kept(h, dyn, opts)[0]


def run_pallas_kept(h: Harness, dyn: list[Any], opts: Options) -> tuple[list[Record], list[Artifact]]:
    """One judged record per target (none for a harness without a kernel), and each target's
    serialized artifact. Never raises: the harness's other records must survive."""
    if h.pallas is None:
        return [], []
    out: list[Record] = []
    arts: list[Artifact] = []
    for t in targets(h.pallas, opts.platforms, opts.pallas_targets):
        try:
            rec: Record = pallas.run(h, dyn, t)
        except Exception as e:  # the farm's own bug: an error record, never a pass
            rec = failure(Record, "pallas_export", t.label, e, 0.0)
        if rec.ok and isinstance(rec.handle, tuple) and rec.artifact and rec.artifact not in {a.sha256 for a in arts}:
            blob, meta = rec.handle  # one artifact for the generations that got the same bytes
            arts.append(Artifact(rec.artifact, "export", blob, meta))
        judged = verdict(rec, h=h)
        out.append(judged.with_status(judged.status, handle=None))
    if h.pallas.reference is not None:
        try:
            out.append(verdict(pallas.run_reference(h, dyn), h=h))
        except Exception as e:  # the farm's own bug: an error record, never a pass
            out.append(failure(Record, "pallas_reference", "cpu", e, 0.0))
    return out, arts


def run_pallas_prior(h: Harness, kept: Mapping[str, Mapping[str, Any]]) -> list[Record]:
    """Another jax's ``pallas_export`` artifacts of ``h``'s kernel ({target label: {"export":
    base64, "meta": ...}}, ``farm.run.bundles.priors``), each deserialized here and judged
    (``pallas_xver``). Never raises."""
    out: list[Record] = []
    for label, kept_one in sorted(kept.items()):
        try:
            rec: Record = pallas.cross_version(base64.b64decode(kept_one["export"]), dict(kept_one.get("meta") or {}),
                                               label)
        except Exception as e:  # the farm's own bug: an error record, never a pass
            rec = failure(Record, "pallas_xver", label, e, 0.0)
        out.append(verdict(rec))
    return out


class PallasCheck(Base):
    """A Pallas kernel exported per target, on its static path; harnesses whose kernel this
    jax lacks are skipped before anything is traced."""

    spec = check_spec("pallas")

    def lacking(self, h: Harness) -> str | None:
        return missing_api(h.pallas.source) if h.pallas is not None else None

    def applies(self, run: Run) -> bool:
        return run.h.pallas is not None and run.static

    def run(self, run: Run) -> Produced:
        return run_pallas_kept(run.h, run.dyn, run.opts)


class CrossVersionCheck(Base):
    """Another jax's kernel artifacts (a version sweep's cross run), deserialized here: they
    need no trace, so they run where the harness does not trace here either (unless its
    declared symbolic variant is all that was asked for)."""

    spec = check_spec("pallas_xver")

    def applies(self, run: Run) -> bool:
        if run.prior is None or not run.prior.pallas:
            return False
        if run.traced.ok:
            return "static" in run.opts.shapes
        return not (run.h.poly is not None and "static" not in run.opts.shapes)

    def run(self, run: Run) -> Produced:
        assert run.prior is not None
        return run_pallas_prior(run.h, run.prior.pallas), []


CHECK = PallasCheck()
XVER = CrossVersionCheck()
