"""Stored export bytes back to a ``jax.export.Exported`` on this jax, and what replay says
about an artifact without running it: its age, JAX's compatibility window, its
calling-convention version and its custom calls.

Two formats are read: a ``jax.export.serialize`` artifact (what a sweep stores) and raw
StableHLO bytecode with a calling-convention version in its meta (JAX's back-compat data).
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from farm.stages import compat
from farm.errors import ArtifactCorrupt, ArtifactNotFound, FarmError, UnknownFormatVersion
from farm.stages.census import guaranteed_targets

#: JAX promises that a serialized artifact keeps running for about six months.
WINDOW_DAYS = 183
#: Artifact meta ``format`` values replay can read.
FORMAT_JAX_EXPORT = "jax.export.serialize"
FORMAT_STABLEHLO = "stablehlo-bytecode"
FORMATS = (FORMAT_JAX_EXPORT, FORMAT_STABLEHLO)


class ReplayError(FarmError):
    """A stored export that cannot be replayed as stored (unknown format, missing inputs)."""


def load_exported(blob: bytes, meta: Mapping[str, Any], inputs: Sequence[np.ndarray],
                  expected: Sequence[np.ndarray]) -> Any:
    """An ``Exported`` from stored bytes: a ``jax.export`` serialization, or raw StableHLO
    bytecode with its calling-convention version (how JAX's back-compat tests build one).

    Raises:
        UnknownFormatVersion: a format this farm does not read, bytes that do not
            deserialize, or a calling-convention version newer than this jax reads.
    """
    from jax._src.export import _export

    fmt = meta.get("format", FORMAT_JAX_EXPORT)
    cc = meta.get("calling_convention_version")
    if fmt not in FORMATS:
        raise UnknownFormatVersion(f"export artifact format {fmt!r} is unknown (this farm reads {', '.join(FORMATS)})")
    # jax checks the version only when exporting; deserialize and call accept any number.
    # A version newer than this jax knows is refused here; an older one is run and flagged
    # (cc_supported false: outside the compatibility promise).
    if isinstance(cc, int) and cc > _export.maximum_supported_calling_convention_version:
        raise UnknownFormatVersion(_cc_message(cc))
    if fmt == FORMAT_STABLEHLO:
        return _exported_from_bytecode(blob, meta, inputs, expected)
    try:
        exp = compat.jax_export().deserialize(bytearray(blob))
    except Exception as e:
        raise UnknownFormatVersion(f"cannot deserialize export artifact: "
                                   f"{(str(e).strip().splitlines() or [type(e).__name__])[0]}") from None
    if exp.calling_convention_version > _export.maximum_supported_calling_convention_version:
        raise UnknownFormatVersion(_cc_message(exp.calling_convention_version))
    return exp


def _cc_message(cc: int) -> str:
    import jax
    from jax._src.export import _export

    return (f"calling-convention version {cc} is newer than jax {jax.__version__} reads "
            f"({_export.minimum_supported_calling_convention_version}.."
            f"{_export.maximum_supported_calling_convention_version})")


def _exported_from_bytecode(blob: bytes, meta: Mapping[str, Any], inputs: Sequence[np.ndarray],
                            expected: Sequence[np.ndarray]) -> Any:
    from jax._src import core, tree_util
    from jax._src.export import _export

    cc = meta.get("calling_convention_version")
    if not isinstance(cc, int):
        raise UnknownFormatVersion("raw StableHLO artifact has no calling-convention version in its meta")
    specs = meta.get("in_specs")
    scope = compat.jax_export().SymbolicScope()
    in_avals = []
    for i, a in enumerate(inputs):
        shape = (compat.jax_export().symbolic_shape(specs[i], scope=scope) if specs and specs[i] else a.shape)
        in_avals.append(core.ShapedArray(shape, a.dtype))
    out_avals = [core.ShapedArray(np.shape(a), np.asarray(a).dtype) for a in expected]
    _, in_tree = tree_util.tree_flatten((tuple(in_avals), {}))
    _, out_tree = tree_util.tree_flatten(tuple(out_avals))
    n_in, n_out = len(in_avals), len(out_avals)
    fields = dict(
        fun_name="replay", in_tree=in_tree, in_avals=tuple(in_avals), out_tree=out_tree,
        out_avals=tuple(out_avals), _has_named_shardings=True, _in_named_shardings=(None,) * n_in,
        _out_named_shardings=(None,) * n_out, in_shardings_hlo=(None,) * n_in, out_shardings_hlo=(None,) * n_out,
        platforms=tuple(meta.get("platforms") or ("cpu",)), ordered_effects=(), unordered_effects=(),
        disabled_safety_checks=(), mlir_module_serialized=bytes(blob), calling_convention_version=cc,
        nr_devices=int(meta.get("nr_devices") or 1), module_kept_var_idx=tuple(range(n_in)),
        uses_global_constants=any(not core.is_constant_shape(a.shape) for a in in_avals), _get_vjp=None)
    # Exported's fields differ by version (0.12 dropped _has_named_shardings: every export has them).
    known = {f.name for f in dataclasses.fields(_export.Exported)}
    return _export.Exported(**{k: v for k, v in fields.items() if k in known})


def cc_supported(version: int) -> bool:
    """Is this calling-convention version inside what this jax promises to read?"""
    from jax._src.export import _export

    return (_export.minimum_supported_calling_convention_version <= version
            <= _export.maximum_supported_calling_convention_version)


def artifact_facts(meta: Mapping[str, Any], jax_version: str | None, created: dt.datetime | None,
                   today: dt.date) -> dict[str, Any]:
    """What replay reports about an artifact without running it (age, window, custom calls)."""
    date = meta.get("serialized_date") or (created.date().isoformat() if created else None)
    made = dt.date.fromisoformat(date) if date else None
    age = (today - made).days if made else None
    cc = meta.get("calling_convention_version")
    return {"format": meta.get("format", FORMAT_JAX_EXPORT), "platforms": list(meta.get("platforms") or []),
            "jax_version": meta.get("jax_version", jax_version), "calling_convention_version": cc,
            "cc_supported": cc_supported(int(cc)) if isinstance(cc, int) else None,
            "serialized_date": date, "age_days": age,
            "outside_window": bool(age is not None and age > WINDOW_DAYS),
            "custom_calls": custom_call_facts(meta.get("custom_call_targets") or [])}


def exported_facts(exported: Any, meta: Mapping[str, Any]) -> dict[str, Any]:
    """What the deserialized artifact itself says: its calling convention, and its custom
    calls when the stored meta does not list them."""
    facts: dict[str, Any] = {"calling_convention_version": exported.calling_convention_version,
                             "cc_supported": cc_supported(exported.calling_convention_version)}
    if not meta.get("custom_call_targets"):
        facts["custom_calls"] = custom_call_facts(custom_calls_of(exported))
    return facts


def custom_call_facts(targets: Iterable[str]) -> list[dict[str, Any]]:
    guaranteed = guaranteed_targets()
    return [{"target": t, "guaranteed": t in guaranteed} for t in sorted(set(targets))]


def custom_calls_of(exported: Any) -> list[str]:
    """Custom-call targets in an Exported's module (as JAX's back-compat tests find them)."""
    return sorted(set(re.findall(r"stablehlo\.custom_call\s*@([^\(\s]+)\(", str(exported.mlir_module()))))


def reason_of(e: BaseException | str) -> str:
    """Why an artifact did not replay, in one word (``facts["reason"]``)."""
    msg = str(e)
    if isinstance(e, ArtifactCorrupt):
        return "corrupt"
    if isinstance(e, ArtifactNotFound):
        return "missing"
    if isinstance(e, UnknownFormatVersion) or "calling convention" in msg.lower():
        return "calling_convention"
    if "custom call" in msg.lower() or "custom_call" in msg.lower():
        return "custom_call"
    if "x64" in msg or "64-bit" in msg:
        return "x64"
    return "runtime"
