"""The verdict on what an export-feature harness's artifacts did (``farm.stages.features``)
against what its ``ExportFeature`` kind must do (``farm.catalog.features``).

A refusal JAX must make is data on the harness (``refusals``: step -> JAX's error): a
step that is no longer refused, or refused with another error, is a finding; so is a
donation dropped by export or by the round trip, a key whose implementation is lost, a
disabled check that does not survive deserialization, or values that differ from the
native call (bitwise: the same program on the same backend).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from farm.catalog import ExportFeature, Harness
from farm.results import Record


def feature(h: Harness, rec: Record) -> Record:
    """``rec`` as ``fail`` where its observations break what ``h.feature`` must do; a
    record that did not run (error, not runnable here) stands as it is."""
    if rec.status != "ok" or h.feature is None:
        return rec
    wrong = mismatches(h.feature, rec.facts.get("observed") or {})
    if not wrong:
        return rec
    return rec.with_status("fail", error_type="ExportFeatureMismatch", error="; ".join(wrong)[:1000],
                           facts={**rec.facts, "mismatches": wrong})


def _refusal(f: ExportFeature, step: str, got: str | None) -> list[str]:
    """What is wrong with step ``step``'s error ``got`` (None: it did not raise)."""
    want = f.refusals.get(step)
    if want is None:
        return [] if got is None else [f"{step} raised {got!r}"]
    if got is None:
        return [f"{step} was allowed where JAX refuses it ({want!r})"]
    return [] if re.search(want, got) else [f"{step} was refused with {got!r}, not {want!r}"]


def mismatches(f: ExportFeature, seen: Mapping[str, Any]) -> list[str]:
    """Everything an artifact did that ``f`` does not allow (empty: all as it must be)."""
    out: list[str] = []
    if seen.get("same_as_native") is False:
        out.append("the deserialized artifact's values differ from the native call's")
    if f.kind == "donation":
        if not seen.get("aliased"):
            out.append("export dropped the donation (no tf.aliasing_output)")
        elif not seen.get("aliased_after_roundtrip"):
            out.append("the serialize round trip dropped the donation")
        if seen.get("donated_consumed") is False:
            out.append("the donated argument's buffer is still alive after the call")
    elif f.kind == "prng_key":
        avals = seen.get("key_avals") or []
        short = {"threefry2x32": "fry", "rbg": "rbg", "unsafe_rbg": "urbg"}.get(f.impl, f.impl)
        if not avals or f"key<{short}>" not in avals[0]:
            out.append(f"the key argument's aval after the round trip is {avals}, not a key<{short}>")
        if "other_impl" in seen:
            out += _refusal(f, "other_impl", seen.get("other_impl"))
    elif f.kind == "safety_check":
        out += _refusal(f, "export", seen.get("refused"))
        if not seen.get("target_in_module"):
            out.append(f"the custom call {f.target!r} is not in the exported module")
        if not any(f.target in c for c in seen.get("disabled_after_roundtrip") or []):
            out.append("the disabled safety check did not survive the round trip")
        if "call" in seen:
            out += _refusal(f, "call", seen.get("call"))
    elif f.kind == "device_count":
        if seen.get("nr_devices") != f.exported_for:
            out.append(f"the artifact says nr_devices={seen.get('nr_devices')}, exported for {f.exported_for}")
        if "call" in seen:
            out += _refusal(f, "call", seen.get("call"))
    return out
