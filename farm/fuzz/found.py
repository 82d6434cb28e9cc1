"""Findings written as ``found`` harness definitions a user can keep.

One JSON file per failure signature: the shrunk case (plain data, ``farm.catalog.cases``),
the signature it shows, how to draw it again (campaign seed, round, family, dtypes) and the
case it was shrunk from. Copied into ``harnesses/found/``, it is a harness of the farm's
catalog (family ``found``, ``harnesses/found.py``), with a ``Limitation`` that expects the
failure it was found with: a sweep shows it ``expected_fail`` while the bug is open, and
``unexpected_pass`` (a stale limitation: a finding) once it is fixed.
"""
from __future__ import annotations

import json
import os
from typing import Any

from farm.analysis.signatures import Signature
from farm.catalog.cases import Case
from farm.results import LIMITATION_STAGES


def expectation(sig: Signature, platforms: list[str], note: str) -> dict[str, Any]:
    """The limitation a kept finding carries: the stage and platforms it failed on."""
    return {"description": note, "stage": sig.stage if sig.stage in LIMITATION_STAGES else "run",
            "platforms": sorted(platforms), "status": sig.status if sig.status in ("fail", "error") else None}


def entry(case: Case, sig: Signature, *, platforms: list[str], original: Case, campaign: dict[str, Any],
          jax_version: str, runs: int) -> dict[str, Any]:
    return {"format": 1, "case": case.to_dict(), "signature": sig.to_dict(), "describe": sig.describe(),
            "expect": expectation(sig, platforms, f"found by farm fuzz (run {campaign.get('run')}, jax "
                                                  f"{jax_version}): {sig.describe()[:160]}"),
            "found_with": {**campaign, "jax": jax_version, "shrink_runs": runs}, "original": original.to_dict()}


def write(directory: str, e: dict[str, Any]) -> str:
    """``DIR/<signature key>.json`` (one file per cause; a later campaign's smaller case replaces it)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{e['signature']['key']}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(e, f, indent=1, sort_keys=True)
        f.write("\n")
    return path
