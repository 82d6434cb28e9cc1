"""One failure of one harness, found by running it the way a sweep does (in an isolated
worker), and what a standalone script needs of it: the computation, its inputs, the
expected side and the tolerance.
"""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from farm.errors import FarmError
from farm.repro.candidate import Source, load_harness
from farm.repro.needs import Needs, capture
from farm.repro.script import Check
from farm.results import REPRODUCIBLE, SYMBOLIC_STAGES, Options, Outcome, Record

#: What a repro can be written for, by status
#: Environment variables that shape what jax computes (the configuration it failed in)
SETTINGS = ("JAX_ENABLE_X64", "XLA_FLAGS", "JAX_USE_SHARDY_PARTITIONER", "JAX_DEFAULT_MATMUL_PRECISION")


class NothingToReproduce(FarmError):
    """The harness does not fail (here, or on the platform asked for)."""


@dataclass(frozen=True)
class Case:
    """A failing harness: its definition, outcome, the failing record and the setting."""

    harness: Any
    source: Source
    outcome: Outcome
    failure: Record
    settings: dict[str, str]
    stored: dict[str, Any] = field(default_factory=dict)  # the stored run's record and environment, with --run
    needs: Needs | None = None  # the environment the failure lives in (farm.repro.needs)


def find(catalog: str, modules: tuple[str, ...], name: str) -> Any:
    """The harness named exactly ``name``; an unknown name is one line with the nearest ones."""
    h = load_harness(catalog, modules, name)
    if h is not None:
        return h
    from farm.catalog import Filters, select

    names = [x.name for x in select(Filters.parse(catalog=catalog, modules=",".join(modules) or None))]
    near = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    hint = f" (nearest: {', '.join(near)})" if near else ""
    raise FarmError(f"no harness {name!r} in the {catalog} catalog{hint}")


def settings() -> dict[str, str]:
    """This process's jax settings, with the farm's own forced device count left out."""
    out = {k: os.environ[k] for k in SETTINGS if os.environ.get(k)}
    flags = " ".join(f for f in out.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f)
    if flags:
        out["XLA_FLAGS"] = flags
    else:
        out.pop("XLA_FLAGS", None)
    return out


def run(h: Any, src: Source, opts: Options, timeout_s: float) -> Outcome:
    """The harness run as a sweep runs it: ``run_harness`` in an isolated child process."""
    from farm.pipeline.isolation import Isolation
    from workers.standalone import IsolatedRunner, run_isolated

    runner = IsolatedRunner(src.catalog, list(src.modules), opts.to_dict())
    try:  # the failure as it is, not retried: a crash that needs a retry to show is still one
        return run_isolated(runner, h, Isolation(timeout_s, startup_s=0.0, retries_alone=0), opts.run_on)
    finally:
        runner.stop()


#: Structural checks of a module's text (chlo ops, shardings): nothing to run, so nothing a script reproduces
STRUCTURAL = ("census", "sharding")
#: Which failure is picked first: a real one before a declared (``expected_fail``) one
_ORDER = {"crashed": 0, "timeout": 0, "error": 1, "fail": 1, "expected_fail": 2}


def pick(outcome: Outcome, platform: str | None, stage: str | None = None) -> Record | None:
    """The failure to reproduce on ``platform``: undeclared failures before declared ones,
    then in stage order; structural checks (census, sharding) are not run, so not picked."""
    found = [r for r in outcome.records
             if r.status in REPRODUCIBLE and (platform is None or r.platform in (platform, "any"))
             and (stage is None or r.stage == stage) and (stage is not None or r.stage not in STRUCTURAL)]
    return min(found, key=lambda r: _ORDER[r.status], default=None)


def load(catalog: str, modules: tuple[str, ...], name: str, platform: str | None,
         stored: dict[str, Any] | None = None, timeout_s: float = 300.0,
         shapes: tuple[str, ...] = ("static",), vjp: int = 0, stage: str | None = None) -> Case:
    """Run the harness here and pick its failure (the stored run's stage and platform, with --run).
    ``shapes``: the kinds of shape to run it at (``farm sweep --shapes``); a stored failure of
    a symbolic stage adds ``symbolic``; ``vjp``: the vjp order to run it with (``farm sweep
    --vjp``), at least the stored failure's (``vjp``: 1, ``vjp2``: 2); ``stage``: the failure of
    this stage (``farm repro --stage``; a stored failure's own stage comes first), which
    also sets the shapes and the vjp order it needs.

    Raises:
        FarmError: unknown harness; NothingToReproduce: it does not fail."""
    h = find(catalog, modules, name)
    cfg = settings()
    if h.needs_x64:  # the farm turns x64 on for this harness; a script must too
        cfg["JAX_ENABLE_X64"] = "1"
    src = Source(catalog, modules, h.name, {**cfg, **({"FARM_PLANT": os.environ["FARM_PLANT"]}
                                                     if os.environ.get("FARM_PLANT") else {})})
    stage = (stored or {}).get("stage") or stage
    if stage in SYMBOLIC_STAGES and "symbolic" not in shapes:
        shapes = (*shapes, "symbolic")
    vjp = max(vjp, {"vjp": 1, "vjp2": 2}.get(stage or "", 0))
    opts = Options(vjp=vjp, roundtrip=bool(stored and stored.get("stage") == "compare" and stored.get("platform") == "export"),
                   shapes=shapes, compositions="all" if stage == "composition" else "off")
    outcome = run(h, src, opts, timeout_s)
    want_platform = (stored or {}).get("platform") or platform
    rec = pick(outcome, want_platform, stage)
    if rec is None:
        seen = sorted({f"{r.stage}/{r.platform}: {r.status}" for r in outcome.records if r.status != "ok"})
        where = (f" on {want_platform}" if want_platform else "") + (f" at stage {stage}" if stage else "")
        ran = f"; {stored['run']} recorded {stored['stage']}/{stored['platform']}: {stored['status']}" if stored else ""
        raise NothingToReproduce(f"{h.name} does not fail here{where} (worst: {outcome.worst}"
                                 f"{'; ' + ', '.join(seen) if seen else ''}){ran}: nothing to reproduce")
    if rec.stage == "xhost":
        raise FarmError(f"{h.name}: xhost failures (another host's artifact) are not reproduced yet; "
                        "its export and outputs are in the store (farm export)")
    return Case(h, src, outcome, rec, cfg, stored or {}, capture(cfg, SETTINGS))


def artifact(outcome: Outcome, kind: str) -> bytes | None:
    return next((a.data for a in outcome.artifacts if a.kind == kind), None)


def export_platforms(outcome: Outcome) -> tuple[str, ...]:
    return tuple(next((a.meta.get("platforms", ()) for a in outcome.artifacts if a.kind == "export"), ()))


def check(case: Case, closed: Any, dyn: list[np.ndarray]) -> tuple[Check, list[list[np.ndarray]]]:
    """(how the script judges, per output the expected values and their alternatives)."""
    rec = case.failure
    if rec.status == "crashed":
        return Check("crash", timeout_s=float(case.harness.timeout_s or 300)), []
    if rec.status == "timeout":
        return Check("timeout", timeout_s=float(case.harness.timeout_s or 60)), []
    if rec.status == "error" or rec.stage not in ("compare", "crossexec"):
        return Check("error", error_type=rec.error_type), []
    facts = dict(rec.facts)
    against = facts.get("against")
    if against == "jaxpr":
        return policy_check(facts), reference(closed, dyn)
    if against == "reference":
        from farm.reference.handwritten import reference_outputs

        ref = reference_outputs(case.harness, case.harness.make_args()) or []
        return Check("values", "the harness's float64 reference", float(facts.get("rtol", 0.0)),
                     float(facts.get("atol", 0.0)), exact=bool(facts.get("exact"))), [[r] for r in ref]
    if against in ("native", "cpu", "cuda", "rocm", "tpu"):
        from farm.formats import iofile

        io = artifact(case.outcome, "io")
        outs = iofile.unpack(io)[1] if io else []
        exact = bool(facts.get("exact")) or against == "native"
        return Check("values", f"the {'native' if against == 'native' else against} outputs",
                     float(facts.get("rtol", 0.0)), float(facts.get("atol", 0.0)), exact=exact), [[o] for o in outs]
    if against == "invariant":  # non-unique outputs: the invariant side (farm.repro.invariant); any other against the reference
        return Check("values", "the float64 reference", float(facts.get("rtol", 0.0)), float(facts.get("atol", 0.0))), \
            reference(closed, dyn)
    raise FarmError(f"{case.harness.name}: a {rec.stage} failure judged against {against!r} has no standalone check")


def policy_check(facts: dict[str, Any]) -> Check:
    pol = facts.get("policy") or {}
    rtol, atol = float(pol.get("rtol", 0.0)), float(pol.get("atol", 0.0))
    if facts.get("floor"):
        rtol, atol = max(rtol, float(facts["floor"][0])), max(atol, float(facts["floor"][1]))
    return Check("values", "the float64 reference", rtol, atol, pointwise=pol.get("norm", "pointwise") == "pointwise",
                 exact=bool(pol.get("exact")), signed_zeros=pol.get("kind", "elementwise") == "elementwise")


def reference(closed: Any, dyn: list[Any]) -> list[list[np.ndarray]]:
    """Per output, the float64 jaxpr reference and (where it differs) the subnormal-flushing one."""
    from farm.reference import evaluate
    from farm.reference.evaluator import flushing_subnormals

    with np.errstate(all="ignore"):
        ref = evaluate(closed, *dyn)
        try:
            with flushing_subnormals():
                flushed = evaluate(closed, *dyn)
        except Exception:  # no flushing variant: the IEEE reference alone
            flushed = ref
    out = []
    for r, f in zip(ref, flushed):
        same = np.array_equal(np.asarray(r), np.asarray(f), equal_nan=True)
        out.append([np.asarray(r)] if same else [np.asarray(r), np.asarray(f)])
    return out
