"""The verdict on a Pallas kernel's export for one target (``farm.stages.pallas``): the
module must carry the target's custom call (a Mosaic TPU lowering that came out as something
else, or a GPU kernel that fell back to plain HLO, is wrong) with a configuration its backend
reads (a JSON ``backend_config`` with a base64 Mosaic body; a Mosaic GPU or Triton payload that
parses as MLIR bytecode), and the serialize round trip
must give back the same module, platforms, shapes and disabled checks. A rocm artifact holding
Mosaic GPU's custom call is wrong too (JAX refuses Mosaic GPU for ROCm, except after a cuda
lowering of the same kernel in the same process: ``docs/findings.md``).

The kernel's numbers are judged by the ordinary compare stage (interpret mode against the
float64 reference); JAX's refusals are the harness's limitations, applied with the others.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from farm.catalog import Harness
from farm.judge.outputs import compared
from farm.judge.tolerance import of_harness, rtol_atol
from farm.results import Record


_MISSING = object()


def _at(config: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` of a custom call's configuration (``_MISSING``: none)."""
    here: Any = config
    for part in path.split("."):
        if not isinstance(here, Mapping) or part not in here:
            return _MISSING
        here = here[part]
    return here


def declared_config(declared: Mapping[str, Any], backend: str, config: Mapping[str, Any] | None) -> list[str]:
    """What a kernel's ``Kernel.config`` says its ``backend``'s custom call must hold and the
    lowered one does not ({"<backend>:<path>": value}; a value of None: the path is absent)."""
    wrong = []
    for key, want in declared.items():
        where, _, path = key.partition(":")
        if where != backend:
            continue
        got = _at(config or {}, path)
        if want is None and got is _MISSING:
            continue
        if isinstance(want, Mapping) and isinstance(got, Mapping) and all(got.get(k, _MISSING) == v
                                                                          for k, v in want.items()):
            continue  # a mapping holds what was asked for (a cost estimate gains remote_bytes_transferred: 0)
        if got is _MISSING:
            wrong.append(f"the kernel asked for {path} = {want!r}; its custom call's configuration has no {path}")
        elif got != want:
            wrong.append(f"the kernel asked for {path} = {want!r}; its custom call's configuration has {got!r}")
    return wrong


def pallas(rec: Record, h: Harness | None = None) -> Record:
    """``rec`` as ``fail`` where the export holds the wrong custom call, where that call's
    configuration is not what its backend reads (a Mosaic TPU ``backend_config`` that is not JSON
    with a base64 body, a Mosaic GPU or Triton payload that does not parse as MLIR bytecode, no
    payload at all) or lacks what the kernel asked for (``h.pallas.config``: a parameter that
    lowered without an error but never reached the backend), or where the round trip changed it;
    a record that did not run stands as it is."""
    if rec.status != "ok":
        return rec
    wrong: list[str] = []
    expected = rec.facts.get("expected_call")
    calls = list(rec.facts.get("custom_calls") or [])
    if expected not in calls:
        wrong.append(f"the module holds custom calls {calls}, not {expected}")
    if rec.facts.get("platform") == "rocm" and "mosaic_gpu_v2" in calls:  # JAX: Mosaic GPU does not support ROCm
        wrong.append("a rocm artifact holds the CUDA-only mosaic_gpu_v2 custom call")
    backend = rec.facts.get("backend", "")
    asked = {k: v for k, v in (h.pallas.config if h is not None and h.pallas is not None else {}).items()
             if k.partition(":")[0] == backend}  # what the kernel asked of this backend's configuration
    for p in rec.facts.get("payloads") or []:  # the backend's configuration must be what it reads
        if p.get("target") != expected:
            continue
        if p.get("config_error"):
            wrong.append(f"{expected}: its configuration is not what the backend reads: {p['config_error']}")
        elif not p.get("bytes"):
            wrong.append(f"{expected}: no kernel payload in its configuration")
        elif p.get("unreadable"):
            wrong.append(f"{expected}: its kernel payload does not parse: {p['unreadable']}")
        if asked and not p.get("config_error"):
            if "config" not in p:
                wrong.append(f"{expected}: what the kernel asked of its configuration cannot be checked: "
                             f"the farm could not read it ({p.get('config_unread')})")
            else:
                wrong += [f"{expected}: {w}" for w in declared_config(asked, backend, p["config"])]
    trip = rec.facts.get("round_trip") or {}
    wrong += [f"serialize round trip: {k.removeprefix('same_')} changed" for k, same in trip.items() if not same]
    if not wrong:
        return rec
    return rec.with_status("fail", error_type="PallasExportMismatch", error="; ".join(wrong)[:1000],
                           facts={**rec.facts, "mismatches": wrong})


def own_reference(h: Harness, rec: Record) -> Record:
    """The interpret-mode kernel against the jnp reference it ships, under twice the harness's
    tolerance (``of_harness`` with two roundings: the kernel computes in its dtype, the reference on
    float32 copies of half-precision inputs; the farm's float64 reference is the ``compare``
    stage's); the outputs the stage carried are dropped."""
    if rec.status != "ok" or rec.handle is None:
        return rec.with_status(rec.status, handle=None)
    got, want = rec.handle
    rtol, atol = rtol_atol(of_harness(h, rec.platform, roundings=2))
    out = compared(got, want, platform=rec.platform, against="the kernel's own jnp reference", rtol=rtol, atol=atol,
                   exact=False, stage="pallas_reference")
    return out.with_status(out.status, seconds=rec.seconds, facts={**out.facts, **rec.facts})


def cross_version(rec: Record) -> Record:
    """Another jax's kernel artifact read by this one (``farm.stages.pallas.cross_version``):
    ``fail`` where what this jax reads back differs from what the exporting jax saw (platforms,
    avals, disabled checks, custom-call targets or payload sha256), or where its calling
    convention is outside what this jax promises to read; a deserialize failure stands as the
    error JAX raised (with ``facts.reason``)."""
    if rec.status != "ok":
        return rec.with_status(rec.status, handle=None)
    wrong = [f"{k} changed: exported {v['exported']!r:.150}, read {v['read']!r:.150}"
             for k, v in (rec.facts.get("differs") or {}).items()]
    cc = rec.facts.get("calling_convention") or {}
    lo, hi = cc.get("supported") or (None, None)
    if isinstance(cc.get("read"), int) and lo is not None and not lo <= cc["read"] <= hi:
        wrong.append(f"calling convention {cc['read']} outside this jax's {lo}..{hi}")
    if not wrong:
        return rec.with_status(rec.status, handle=None)
    return rec.with_status("fail", error_type="PallasCrossVersionMismatch", error="; ".join(wrong)[:1000],
                           handle=None, facts={**rec.facts, "mismatches": wrong})
