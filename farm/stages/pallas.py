"""pallas_export: a Pallas kernel (``Harness.pallas``) lowered and exported for one target
(a TPU generation, cuda with Mosaic GPU or Triton, rocm with Triton or Mosaic GPU), the
census of its custom call, and the serialize round trip.

How each target is reached from a CPU host (jax 0.10.2, ``docs/pallas.md``):

- ``tpu:<generation>``: under an abstract mesh whose ``AbstractDevice`` has the generation's
  device kind. Without it a kernel that asks ``tpu_info`` about the chip (``jnp.sign``,
  1-D blocks) reads the default device, the CPU, and raises "Unsupported TPU device kind: cpu";
- every GPU target is told its device too (``GPU_DEVICES``: an H100, an MI300X): the Mosaic GPU
  matmul reads the SM count from the default device;
- ``cuda:mosaic_gpu``, ``rocm:mosaic_gpu``: ``jax_pallas_use_mosaic_gpu`` on (a kernel without
  compiler parameters; the Mosaic GPU kernels of the wheel carry their own); jax 0.12 has no
  such switch (its ``pl.pallas_call`` is Triton's on GPUs): ``skipped``, with the reason;
- ``cuda:triton``, ``rocm:triton``: ``jax_pallas_use_mosaic_gpu`` off; the Triton custom call has
  no compatibility guarantee, so the export needs ``DisabledSafetyCheck.custom_call``: every
  check turned off is in ``facts.disabled_checks``.

The payload of each custom call is MLIR bytecode (the Mosaic TPU module in the JSON
``backend_config``'s base64 ``body``, the Mosaic GPU ``module`` and Triton ``ir`` in
``mhlo.backend_config``); ``facts.payloads`` counts the ops inside where the installed jaxlib
can read them back. Whether what ran is right is the judge's (``farm.judge.pallas``).
"""
from __future__ import annotations

import base64
import contextlib
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from farm.catalog import Harness, Kernel, Target
from farm.catalog.pallas import CUSTOM_CALL, abstract_device
from farm.results import Record
from farm.stages.census import guaranteed_targets
from farm.stages.record import Timer, failure

#: The prefix Mosaic GPU gives the ops it wraps (``stable_mosaic_gpu.arith.addf``).
_MGPU_PREFIX = "stable_mosaic_gpu."


@dataclass(frozen=True, slots=True)
class PallasExported(Record):
    """stage ``pallas_export``, platform the target's label ("tpu:v5e", "cuda:triton").
    facts: ``platform``, ``backend``, ``generation``, ``device_kind``, ``expected_call`` (the
    target's custom call), ``custom_calls`` (those in the exported module), ``payloads``
    ([{"target", "bytes", "sha256", "ops": {op: count} or None, "unreadable": why the payload does not
    parse, "config_error": why the configuration around it is not what the backend reads}]: the sha256 shows
    whether two TPU generations got the same kernel; "config": what the call tells its backend
    besides the kernel, ``configuration``), ``disabled_checks``,
    ``symbolic`` (the symbolic shapes exported at), ``round_trip`` ({"same_module",
    "same_platforms", "same_avals", "same_disabled_checks"}), ``failed_at`` (export, census,
    serialize), ``written_with`` ("plgpu.kernel": a Mosaic GPU target of a jax without a Mosaic GPU
    ``pallas_call`` lowering, exported from the kernel's ``Kernel.mosaic_gpu`` twin)."""


def run(h: Harness, dyn: list[Any], target: Target) -> PallasExported:
    """Export ``h``'s real kernel for ``target`` and round-trip the artifact."""
    import jax
    from jax import export

    assert h.pallas is not None, "a Pallas harness declares Harness.pallas"
    checks = [] if target.custom_call in guaranteed_targets() else [target.custom_call]
    facts: dict[str, Any] = {"platform": target.platform, "backend": target.backend,
                             "generation": target.generation, "device_kind": target.device_kind,
                             "expected_call": target.custom_call,
                             "disabled_checks": [f"custom_call({c})" for c in checks],
                             "symbolic": list(h.pallas.symbolic)}
    build = h.pallas.build
    if target.backend == "mosaic_gpu" and h.pallas.mosaic_gpu is not None and not mosaic_gpu_switch():
        build = lambda interpret: h.pallas.mosaic_gpu()  # noqa: E731  (no pallas_call lowering: plgpu.kernel)
        facts["written_with"] = "plgpu.kernel"
    timer = Timer()
    step = "export"
    try:
        with timer():
            with _reach(target), _dynamic_shapes(h.pallas):
                exp = export.export(jax.jit(build(False)), platforms=(target.platform,),
                                    disabled_checks=[export.DisabledSafetyCheck.custom_call(c) for c in checks]
                                    )(*_specs(h.pallas, dyn))
            step = "census"
            facts["payloads"] = payloads(exp.mlir_module())
            facts["custom_calls"] = sorted({p["target"] for p in facts["payloads"]})
            step = "serialize"
            blob = exp.serialize()
            back = export.deserialize(blob)
            facts["round_trip"] = {
                "same_module": bytes(back.mlir_module_serialized) == bytes(exp.mlir_module_serialized),
                "same_platforms": tuple(back.platforms) == tuple(exp.platforms),
                "same_avals": (str(back.in_avals), str(back.out_avals)) == (str(exp.in_avals), str(exp.out_avals)),
                "same_disabled_checks": sorted(map(str, back.disabled_safety_checks))
                == sorted(map(str, exp.disabled_safety_checks)),
            }
        calls = sum(len(p["ops"] or {}) for p in facts["payloads"])
        blob = bytes(blob)
        return PallasExported("pallas_export", target.label, "ok", timer.seconds, facts=facts,
                              metrics={"artifact_bytes": float(len(blob)), "payload_op_kinds": float(calls),
                                       "payload_bytes": float(sum(p["bytes"] for p in facts["payloads"]))},
                              artifact=hashlib.sha256(blob).hexdigest(),
                              handle=(blob, artifact_meta(exp, target, facts["payloads"])))
    except NotInThisJax as e:
        return PallasExported("pallas_export", target.label, "skipped", timer.seconds, error_type="NotInThisJax",
                              error=str(e), facts=facts)
    except Exception as e:
        return failure(PallasExported, "pallas_export", target.label, e, timer.seconds,
                       facts={**facts, "failed_at": step})


def artifact_meta(exp: Any, target: Target, found: list[dict[str, Any]]) -> dict[str, Any]:
    """What another jax checks a kernel's artifact against when it deserializes it
    (``cross_version``): the target, and what this jax saw in the export it made."""
    import jax

    return {"stage": "pallas_export", "target": target.label, "format": "jax.export.serialize",
            "jax_version": jax.__version__, **exported_view(exp),
            "payloads": [{"target": p["target"], "sha256": p["sha256"]} for p in found]}


def exported_view(exp: Any) -> dict[str, Any]:
    """An ``Exported``'s platforms, avals, disabled checks and calling convention, as text."""
    return {"platforms": list(exp.platforms), "in_avals": str(exp.in_avals), "out_avals": str(exp.out_avals),
            "disabled_checks": sorted(map(str, exp.disabled_safety_checks)),
            "calling_convention_version": int(exp.calling_convention_version)}


#: What ``cross_version`` compares between the exporting jax's view and this jax's.
SAME = ("platforms", "in_avals", "out_avals", "disabled_checks", "payloads")


@dataclass(frozen=True, slots=True)
class PallasCrossVersion(Record):
    """stage ``pallas_xver``, platform the target's label: a kernel's ``pallas_export``
    artifact made by another jax (``facts.exported_on``), deserialized by this one
    (``facts.run_on``). Deserialize only: no TPU or GPU here (``facts.execution``
    "not_runnable_here"). facts: ``same`` ({platforms, in_avals, out_avals, disabled_checks,
    payloads (custom-call targets and payload sha256)}: what this jax reads back against what
    the exporting jax saw), ``differs`` (for each that differs: {"exported", "read"}),
    ``calling_convention`` ({"exported", "read", "supported": this jax's range}), ``reason``
    (a deserialize failure, in one word)."""


def cross_version(blob: bytes, meta: dict[str, Any], label: str) -> PallasCrossVersion:
    """Deserialize another jax's artifact of this kernel for ``label`` and compare what this
    jax reads with what the exporting jax recorded in ``meta``; a failure is a record."""
    import jax
    from jax import export
    from jax._src.export import _export

    from farm.stages.stored import reason_of

    facts: dict[str, Any] = {"exported_on": meta.get("jax_version"), "run_on": jax.__version__,
                             "artifact_sha256": hashlib.sha256(blob).hexdigest(), "execution": "not_runnable_here",
                             "why_not_run": "deserialize only: no TPU or GPU on this host"}
    timer = Timer()
    try:
        with timer():
            back = export.deserialize(bytearray(blob))
            read = {**exported_view(back),
                    "payloads": [{"target": p["target"], "sha256": p["sha256"]} for p in payloads(back.mlir_module())]}
    except Exception as e:  # this jax does not read the artifact: JAX's error is the finding
        return failure(PallasCrossVersion, "pallas_xver", label, e, timer.seconds,
                       facts={**facts, "deserialized": False, "reason": reason_of(e)})
    facts["deserialized"] = True
    facts["same"] = {k: read[k] == meta.get(k) for k in SAME}
    facts["differs"] = {k: {"exported": meta.get(k), "read": read[k]} for k, same in facts["same"].items() if not same}
    facts["calling_convention"] = {"exported": meta.get("calling_convention_version"),
                                   "read": read["calling_convention_version"],
                                   "supported": [_export.minimum_supported_calling_convention_version,
                                                 _export.maximum_supported_calling_convention_version]}
    return PallasCrossVersion("pallas_xver", label, "ok", timer.seconds, facts=facts)


@contextlib.contextmanager
def _reach(target: Target) -> Iterator[None]:
    """The context a lowering for ``target`` is traced in (see the module's docstring)."""
    import jax

    device = abstract_device(target.device_kind, target.cores, target.platform)
    with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((1,), ("pallas",), abstract_device=device)):
        if target.platform == "tpu":
            yield
        else:
            with _use_mosaic_gpu()(target.backend == "mosaic_gpu"):
                yield


def _dynamic_shapes(kernel: Kernel) -> Any:
    """``pl.pallas_export_experimental(dynamic_shapes=True)`` for a kernel that asks for it
    (``Kernel.dynamic_shapes``), around the whole export: the lowering reads it too."""
    if not kernel.dynamic_shapes:
        return contextlib.nullcontext()
    from jax.experimental import pallas as pl

    if not hasattr(pl, "pallas_export_experimental"):
        raise NotInThisJax("this jax has no pl.pallas_export_experimental (dynamic-shape export of a kernel)")
    return pl.pallas_export_experimental(dynamic_shapes=True)


class NotInThisJax(Exception):
    """What this jax cannot do at all (a ``skipped`` record with the reason, never an error)."""


#: Why a kernel without compiler parameters has no Mosaic GPU lowering on jax 0.12 and later.
NO_MOSAIC_GPU_SWITCH = ("this jax lowers pl.pallas_call for GPUs with Triton only (no jax_pallas_use_mosaic_gpu "
                        "switch; a Mosaic GPU kernel is written with plgpu.kernel)")


def mosaic_gpu_switch() -> bool:
    """Does this jax lower a kernel without compiler parameters with Mosaic GPU when told to?
    (jax 0.9.2 to 0.11: yes; 0.12: no, ``NO_MOSAIC_GPU_SWITCH``.)"""
    return _use_mosaic_gpu() is not _no_switch


def _use_mosaic_gpu() -> Any:
    """A context factory that turns Mosaic GPU on or off for kernels without compiler parameters:
    the ``jax_pallas_use_mosaic_gpu`` state (in ``jax._src.config`` from 0.10; jax 0.9.2 defines it
    in ``pallas_call``). jax 0.12 has neither: ``_no_switch`` says so for such kernels."""
    from jax._src import config
    from jax._src.pallas import pallas_call

    flag = getattr(config, "jax_pallas_use_mosaic_gpu", None)
    if flag is None:
        flag = getattr(pallas_call, "_PALLAS_USE_MOSAIC_GPU", None)
    return flag if flag is not None else _no_switch


@contextlib.contextmanager
def _no_switch(mosaic_gpu: bool) -> Iterator[None]:
    """While on, ``pl.pallas_call`` of a kernel without compiler parameters raises
    ``NotInThisJax`` (the kernels call it through ``jax.experimental.pallas``); the wheel's Mosaic
    GPU kernels (``plgpu.kernel``) are untouched."""
    if not mosaic_gpu:
        yield
        return
    import functools

    from jax.experimental import pallas as pl

    original = pl.pallas_call

    @functools.wraps(original)
    def refuse(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("compiler_params") is None:
            raise NotInThisJax(NO_MOSAIC_GPU_SWITCH)
        return original(*args, **kwargs)

    pl.pallas_call = refuse
    try:
        yield
    finally:
        pl.pallas_call = original


def _specs(kernel: Kernel, dyn: list[Any]) -> list[Any]:
    """The export's argument specs: each argument's shape, or its symbolic one where the
    kernel declares it (all in one scope: separate scopes cannot be mixed)."""
    import jax
    from jax import export

    if not kernel.symbolic:
        return [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in dyn]
    scope = export.SymbolicScope()
    return [jax.ShapeDtypeStruct(export.symbolic_shape(spec, scope=scope), a.dtype)
            for spec, a in zip(kernel.symbolic, dyn, strict=True)]


def payloads(module_text: str) -> list[dict[str, Any]]:
    """Each custom call of the module: its target, payload size and the ops inside."""
    from jax._src.interpreters import mlir

    ir = mlir.ir
    module = ir.Module.parse(module_text, context=mlir.make_ir_context())
    out: list[dict[str, Any]] = []

    def visit(op: Any) -> Any:
        if op.name == "stablehlo.custom_call":
            target = ir.StringAttr(op.attributes["call_target_name"]).value
            try:
                blob = _payload(op, target)
                bad_config = None
            except Exception as e:  # a backend_config that is not what the backend reads: said, judged
                blob, bad_config = None, f"{type(e).__name__}: {str(e)[:300]}"
            entry: dict[str, Any] = {"target": target, "bytes": len(blob) if blob is not None else 0, "ops": None,
                                     "sha256": hashlib.sha256(blob).hexdigest() if blob is not None else None}
            if bad_config is not None:
                entry["config_error"] = bad_config
            else:
                try:
                    entry["config"] = configuration(op, target)
                except Exception as e:  # the farm could not read it: said (a kernel that declares a config fails)
                    entry["config_unread"] = f"{type(e).__name__}: {str(e)[:300]}"
            if blob is not None:
                try:
                    entry["ops"] = ops_inside(blob, target, entry.get("config"))
                except Exception as e:  # unreadable with this jaxlib: said, not hidden
                    lines = [line.strip() for line in str(e).strip().splitlines()]
                    entry["unreadable"] = f"{type(e).__name__}: {' '.join(lines[:2])[:300]}"
            out.append(entry)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return out


def _payload(op: Any, target: str) -> bytes | None:
    """The kernel's MLIR bytecode inside a custom call (None: a custom call of another kind).
    Raises where the configuration is not what the backend reads: a Mosaic TPU
    ``backend_config`` that is not JSON or has no ``custom_call_config.body``, a body that is not
    base64."""
    from jax._src.interpreters import mlir

    ir = mlir.ir
    attrs = op.attributes
    if target == "tpu_custom_call" and "backend_config" in attrs:
        config = json.loads(ir.StringAttr(attrs["backend_config"]).value)
        return base64.b64decode(config["custom_call_config"]["body"], validate=True)
    if "mhlo.backend_config" in attrs:
        d = ir.DictAttr(attrs["mhlo.backend_config"])
        for key in ("module", "ir"):  # Mosaic GPU, Triton
            if key in d:
                return ir.StringAttr(d[key]).value_bytes
    return None


def _value(attr: Any) -> Any:
    """An MLIR attribute of a custom call's configuration as plain data (its text where it is
    none of bool, integer, float, string, array)."""
    from jax._src.interpreters import mlir

    ir = mlir.ir

    def of(kind: Any) -> bool:  # older bindings: Kind.isinstance(attr); newer ones give typed attributes
        check = getattr(kind, "isinstance", None)
        return bool(check(attr)) if check is not None else isinstance(attr, kind)

    for kind in (ir.BoolAttr, ir.IntegerAttr, ir.FloatAttr):
        if of(kind):
            return kind(attr).value
    if of(ir.StringAttr):
        text = ir.StringAttr(attr)
        try:
            return text.value
        except RuntimeError:  # bytes that are not UTF-8 (Mosaic GPU's serialized entries): their size
            return f"<{len(text.value_bytes)} bytes>"
    if of(ir.ArrayAttr):
        return [_value(a) for a in ir.ArrayAttr(attr)]
    return str(attr)


def configuration(op: Any, target: str) -> dict[str, Any]:
    """What a custom call tells its backend besides the kernel itself, as plain data (the paths a
    ``Kernel.config`` names): Mosaic TPU's JSON ``backend_config`` without the body
    (``custom_call_config.*``, ``scoped_memory_configs``, ``flag_configs``), the Triton and Mosaic
    GPU ``mhlo.backend_config`` entries without the payload (``serialized_metadata`` read as
    ``metadata``, a ``<name>_json`` string as ``<name>``), and the op's own ``kernel_name``, ``kernel_metadata``, ``has_side_effect`` and
    ``output_operand_aliases`` (how many). ``body.*``: what the kernel's module says of itself
    (``ops_inside`` adds it)."""
    from jax._src.interpreters import mlir

    ir = mlir.ir
    attrs = op.attributes
    out: dict[str, Any] = {}
    if target == "tpu_custom_call" and "backend_config" in attrs:
        config = json.loads(ir.StringAttr(attrs["backend_config"]).value)
        config["custom_call_config"] = {k: v for k, v in config.get("custom_call_config", {}).items() if k != "body"}
        out.update(config)
    if "mhlo.backend_config" in attrs:
        d = ir.DictAttr(attrs["mhlo.backend_config"])
        for i in range(len(d)):
            named = d[i]
            if named.name in ("module", "ir"):
                continue
            value = _value(named.attr)
            if named.name == "serialized_metadata":
                out["metadata"] = json.loads(value) if value else {}
            elif named.name.endswith("_json") and isinstance(value, str):  # Mosaic GPU's cost_estimate_json
                out[named.name.removesuffix("_json")] = json.loads(value) if value else {}
            else:
                out[named.name] = value
    for name in ("kernel_name", "has_side_effect"):
        if name in attrs:
            out[name] = _value(attrs[name])
    if "mhlo.frontend_attributes" in attrs:
        front = ir.DictAttr(attrs["mhlo.frontend_attributes"])
        if "kernel_metadata" in front:
            out["kernel_metadata"] = json.loads(ir.StringAttr(front["kernel_metadata"]).value or "{}")
    if "output_operand_aliases" in attrs:
        out["output_operand_aliases"] = len(ir.ArrayAttr(attrs["output_operand_aliases"]))
    return out


def ops_inside(blob: bytes, target: str, config: dict[str, Any] | None = None) -> dict[str, int]:
    """Op counts of a payload's module (Mosaic TPU's is deserialized from its versioned form first);
    into ``config``, what the module's kernel function says of itself (``body.dimension_semantics``;
    ``body.entry``: the name of Mosaic GPU's entry function, the host's C interface, which carries the
    kernel's name)."""
    from jax._src.interpreters import mlir

    ir = mlir.ir
    ctx = mlir.make_ir_context()
    counts: dict[str, int] = {}
    with ctx, ir.Location.unknown():
        ctx.allow_unregistered_dialects = True
        if target == "tpu_custom_call":
            from jax._src.lib import tpu
            from jaxlib.mlir.passmanager import PassManager

            tpu.register_dialect(ctx)
            module = ir.Module.parse(blob)
            PassManager.parse("builtin.module(mosaic-serde{serialize=false})").run(module.operation)
        else:
            if target == "mosaic_gpu_v2":
                from jax._src.lib import mosaic_gpu_dialect

                mosaic_gpu_dialect.register_dialect(ctx)  # its barrier types inside memrefs
            elif target == CUSTOM_CALL["triton"]:
                _register_triton(ctx)  # its attributes' bytecode (layer_norm's: "invalid Attribute index" without)
            module = ir.Module.parse(blob)

        def visit(op: Any) -> Any:
            name = op.name.removeprefix(_MGPU_PREFIX)
            counts[name] = counts.get(name, 0) + 1
            if config is not None and name == "func.func" and "dimension_semantics" in op.attributes:
                config.setdefault("body", {})["dimension_semantics"] = [
                    str(a) for a in ir.ArrayAttr(op.attributes["dimension_semantics"])]
            if config is not None and name == "func.func" and "llvm.emit_c_interface" in op.attributes:
                config.setdefault("body", {})["entry"] = ir.StringAttr(op.attributes["sym_name"]).value
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
    return dict(sorted(counts.items()))


def _register_triton(ctx: Any) -> None:
    """The Triton dialect in ``ctx``, where this jaxlib ships it (a payload whose attributes are
    the dialect's own cannot be read back without it)."""
    try:
        from jax._src.lib.triton import dialect
    except ImportError:  # an older jaxlib: read it as unregistered ops
        return
    dialect.register_dialect(ctx)


@dataclass(frozen=True, slots=True)
class PallasReferenced(Record):
    """stage ``pallas_reference``, platform this host's backend: the interpret-mode kernel
    (``h.fun``) and the jnp reference it ships (``Kernel.reference``), each run here; ``handle``
    holds (kernel outputs, reference outputs) for the judge. facts: ``reference``."""


#: Half-precision arguments reach the kernel's own reference as float32 copies: run in bfloat16,
#: the wheel's ``mha_reference`` is itself 0.11 off its float32 result on a causal 256 x 128
#: attention, while the kernel is within 0.014 of it (jax 0.9.2's sweep flagged the reference's
#: rounding as the kernel's). The kernel is held against what its reference means, not against
#: that reference's own rounding.
_WIDENED = {"bfloat16": "float32", "float16": "float32"}


def run_reference(h: Harness, dyn: list[Any]) -> PallasReferenced:
    """Run the kernel in interpret mode, and its own jnp reference on the same arguments
    (half-precision ones widened to float32, ``_WIDENED``)."""
    import jax
    import numpy as np

    assert h.pallas is not None and h.pallas.reference is not None, "a kernel with its own reference"
    reference = h.pallas.reference
    name = getattr(getattr(reference, "__wrapped__", reference), "__qualname__", "reference")
    platform = jax.default_backend()
    timer = Timer()
    try:
        with timer():
            got = [np.asarray(o) for o in jax.tree.leaves(jax.jit(h.fun)(*dyn))]
            wide = [a.astype(_WIDENED[str(a.dtype)]) if str(getattr(a, "dtype", "")) in _WIDENED else a for a in dyn]
            want = [np.asarray(o) for o in jax.tree.leaves(jax.jit(reference)(*wide))]
        widened = any(w is not a for w, a in zip(wide, dyn))
        facts = {"reference": name, **({"reference_inputs": "float32"} if widened else {})}
        return PallasReferenced("pallas_reference", platform, "ok", timer.seconds, facts=facts, handle=(got, want))
    except Exception as e:
        return failure(PallasReferenced, "pallas_reference", platform, e, timer.seconds, facts={"reference": name})
