"""The registry of checks: ``run_harness`` runs the upstream ones in this order, then the
reusable ones (``CheckSpec.reusable``). Adding a check is one module (its ``Check`` and its
spec) and one line here; a test adds one with ``registered``.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from farm.pipeline import compositions, determinism, edges, effects, features, gradients, lowering, native, pallas, symbolic
from farm.pipeline.check import Check
from farm.results import register_spec, unregister_spec

#: The built-in checks, in the order they run (their specs are ``farm.results.CHECKS``).
CHECKS: list[Check] = [lowering.CHECK, symbolic.CHECK, effects.CHECK, pallas.CHECK, pallas.XVER, features.CHECK,
                       gradients.CHECK, determinism.CHECK, compositions.CHECK, edges.CHECK, native.CHECK]


def upstream() -> list[Check]:
    """The checks that run before anything is compiled: run again on every cache miss."""
    return [c for c in CHECKS if not c.spec.reusable]


def reusable() -> list[Check]:
    """The checks whose records an earlier run may supply (``farm.pipeline.harness``)."""
    return [c for c in CHECKS if c.spec.reusable]


def register(check: Check) -> None:
    """Add a check at run time: its spec joins ``farm.results``'s (stages, limitations,
    options, fingerprint), the check runs after the built-in upstream ones."""
    register_spec(check.spec)
    CHECKS.append(check)


def unregister(check: Check) -> None:
    if check in CHECKS:
        CHECKS.remove(check)
    unregister_spec(check.spec.name)


@contextmanager
def registered(check: Check) -> Iterator[Check]:
    """``check`` in the registry for a block (what a test uses)."""
    register(check)
    try:
        yield check
    finally:
        unregister(check)
