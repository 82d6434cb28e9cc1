"""Planted faults: ``FARM_PLANT`` (a comma list, see ``farm.faults.planted``) makes a
worker process run with known-wrong lowering rules, dropped dtypes, slow, aborting or
hanging primitives, to prove the farm's checks can fail.

Every process that runs harnesses calls ``plant_from_env()`` before its first harness.
Where ``FARM_PLANT`` is unset it does nothing and imports nothing: the planting code
(``planted``, which imports jax and patches its rules) is loaded only when asked for.
"""
from __future__ import annotations

import os


def plant_from_env() -> list[str]:
    """Plant the faults ``FARM_PLANT`` names in this process; the items planted ([] when unset)."""
    spec = os.environ.get("FARM_PLANT", "")
    if not spec.strip():
        return []
    from farm.faults.planted import plant  # only here: it imports jax and patches its lowering rules

    return plant(spec)
