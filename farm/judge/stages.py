"""Verdicts on what a stage found about a module rather than on outputs: what crosses the
plugin boundary (census), whether a sharded module is partitioned as its mesh says
(sharding), whether the serialize round trip kept the artifact (serialize). The stage
records its findings as facts; a record that did not run stands as it is.
"""
from __future__ import annotations

from farm.stages.census import Census
from farm.stages.export import Serialized
from farm.stages.sharding import Sharded


def census(rec: Census, *, exported: bool = False) -> Census:
    """A non-StableHLO op is ``fail``; for the exported artifact an unguaranteed custom call
    is too (in a per-platform lowering one is legal for jit)."""
    if rec.status != "ok":
        return rec
    bad = rec.non_stablehlo + (rec.unguaranteed if exported else [])
    if not bad:
        return rec
    return rec.with_status("fail", error_type="CensusViolation", error=f"crosses the plugin boundary: {', '.join(bad)}")


def sharding(rec: Sharded) -> Sharded:
    """Any difference between the module's partitioning and its mesh's is ``fail``."""
    problems = rec.problems if rec.status == "ok" else None
    if not problems:
        return rec
    return rec.with_status("fail", error="; ".join(problems)[:1000], error_type="ShardingMismatch")


def serialize(rec: Serialized) -> Serialized:
    """A deserialized artifact that differs from the exported one is ``fail``."""
    changed = rec.changed if rec.status == "ok" else None
    if not changed:
        return rec
    return rec.with_status("fail", error=f"deserialized artifact differs from the exported one: {', '.join(changed)}")
