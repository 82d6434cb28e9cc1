"""The one judge: every status that is a verdict (``fail``, ``expected_fail``,
``unexpected_pass``, ``crashed``, ``timeout``) is decided here, under one tolerance lookup.

Stages run things and say what happened (``ok``: it ran; ``error``: it raised;
``skipped``: nothing to do; ``not_runnable_here``: this backend cannot) with outputs,
metrics and facts; whether that is a pass is decided by one of these modules:

- ``tolerance``: the one tolerance function (``allowed`` of a ``Computation``: a harness's, a
  stored artifact's, the invariant bound, a derivative's, a sum's band, the float64
  reference's policy);
- ``kernel``: the one comparison kernel (which elements disagree under a band), which every
  numeric comparison below asks;
- ``outputs``: two output lists under a tolerance (compare, crossexec, round trip, replay);
- ``jaxpr``: a device's outputs against the harness's jaxpr evaluated in float64
  (``farm.reference``), invariants for non-unique results;
- ``harness``: which of those judges a catalog harness's native run, another platform's
  module run here, its round trip and another host's artifact (``xhost``: three ways);
- ``stored``: a replayed artifact against the outputs stored with it;
- ``stages``: what census, sharding and serialize found about a module;
- ``limitations``: the harness's known gaps as data (expected failures, stale limitations,
  a known crash);
- ``failures``: a job whose process died or hung.

``tests/test_judge_only.py`` checks that no other module sets a verdict status.

The modules are the package's own: callers outside it use this module alone (``tests/
test_judge.py`` checks it). ``verdict(rec, **context)`` judges a stage's record by the judge
its stage names in ``BY_STAGE``; the judges that make a record from outputs (``native``,
``crossexec``, ``roundtrip``, ``another_host``, ``replayed``, ``compared``), the tolerance lookups,
the limitations and a lost job's record are the names in ``PUBLIC``. Each module is loaded
on first use: a driver that only needs ``lost_record`` loads no jax, no SciPy.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

#: A record's stage -> (module, function) of the judge that decides its status. Each is
#: called with the record as ``rec`` and the context its check gives, by keyword.
BY_STAGE: dict[str, tuple[str, str]] = {
    "census": ("stages", "census"),  # exported=True for the export's module
    "sharding": ("stages", "sharding"),
    "serialize": ("stages", "serialize"),
    "symbolic_serialize": ("symbolic", "serialize"),
    "symbolic_call": ("symbolic", "calls"),  # v, statics
    "effects_export": ("effects", "effects"),  # h
    "export_feature": ("features", "feature"),  # h
    "pallas_export": ("pallas", "pallas"),
    "pallas_reference": ("pallas", "own_reference"),  # h
    "pallas_xver": ("pallas", "cross_version"),
    "vjp": ("gradients", "pullback"),  # expected, point, jaxpr, order, seed, against
    "vjp2": ("gradients", "pullback"),
    "determinism": ("determinism", "determinism"),
    "composition": ("compositions", "composition"),  # h
    "edge_values": ("edges", "edge_values"),  # h, jaxpr
}

#: The other names callers outside the package use, by the module that holds them.
PUBLIC: dict[str, str] = {
    **dict.fromkeys(("Job", "Tolerance", "tolerance_of", "native", "crossexec", "identical", "roundtrip",
                     "invariant_check", "another_host"), "harness"),
    **dict.fromkeys(("judge_record", "judge_run", "judge_crash"), "limitations"),
    **dict.fromkeys(("lost_record", "timed_out", "died", "crashed"), "failures"),
    **dict.fromkeys(("Computation", "allowed", "declared", "of_harness", "of_stored", "rtol_atol"), "tolerance"),
    **dict.fromkeys(("STORED", "JUDGED", "replayed"), "stored"),
    **dict.fromkeys(("known_gap", "differenced", "directions", "expected", "movable", "disagrees_with_jax",
                     "same_module"), "gradients"),
    "compared": "outputs",
    "judge_jaxpr": "jaxpr",
    "judge_xhost": "xhost",
    "with_finding": "edges",
}


def verdict(rec: Any, /, **context: Any) -> Any:
    """``rec`` judged by the judge of its stage (``BY_STAGE``), with ``context`` (the harness
    ``h``, a jaxpr...) as that judge takes it; a stage the table does not name is a bug of the
    check that made it (``KeyError``)."""
    module, name = BY_STAGE[rec.stage]
    return getattr(import_module(f"{__name__}.{module}"), name)(rec=rec, **context)


def __getattr__(name: str) -> Any:
    """A ``PUBLIC`` name, from its module, loaded on first use."""
    module = PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)

