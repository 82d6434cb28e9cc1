"""Planted faults, for proving the farm's checks can fail (tests, `farm sweep` self-checks).
Loaded only where ``FARM_PLANT`` is set (``farm.faults.plant_from_env``): it imports jax
and patches its lowering rules.

Activated in a worker process by ``FARM_PLANT`` (comma list), before any harness runs:
  wrong_lowering:PRIM:PLATFORM   the primitive lowers as its "twin" (sin→cos, exp→expm1, add→sub...);
                                  PLATFORM "all": on every platform (a wrong rule no cross-platform
                                  comparison can see)
  drop_dtype:PRIM:DTYPE           the primitive no longer lowers for that dtype
  chlo_leak:PRIM:PLATFORM         the primitive lowers through a chlo op
  wrong_constant:PRIM:PLATFORM    the primitive adds a constant of its output's shape: ±0.0 on
                                  every platform but PLATFORM, where one element is 1 (two modules
                                  that differ only in the values of a large constant)
  wrong_groups:allreduce          the all-reduce lowering rule (psum/pmax/pmin) computes its replica
                                  groups transposed: the groups of the other mesh axes (a changed
                                  lowering rule that only a structural check sees on a big mesh)
  low_precision:PRIM:DTYPE:VIA   for DTYPE the primitive computes in VIA (a narrower float) and
                                  converts back, on every platform: a result of lower precision
                                  than its dtype (float16 exp via bfloat16, float32 sin via float16,
                                  float64 eigh via float32: an invariant failure)
  odd_reduction:PRIM:MIN         the reduction skips the last element of every reduced axis whose
                                  length is odd and greater than MIN (default 16), on every platform:
                                  a shape-dependent wrong rule that no catalog harness's shape hits
                                  (`farm fuzz` finds it; docs/fuzzing.md)
  symbolic_only:PRIM:PLATFORM    the primitive lowers as its twin only when an operand has a symbolic
                                  dimension (shape polymorphism), on PLATFORM or "all": every static
                                  harness stays right, only a symbolic export can see it
  ragged_block:KERNEL:BLOCK       a Pallas kernel shipped in the jax wheel (softmax, layer_norm, rms_norm:
                                  jax.experimental.pallas.ops.gpu) returns its output's last rows wrong
                                  (+1) where their count is not a multiple of BLOCK (default 8): an
                                  incomplete last block of rows, on every platform and in interpret mode
                                  alike; every shape whose rows fill whole blocks stays right
  wrong_jvp:PRIM                  the primitive's JVP rule is its twin's (sin differentiates as cos does:
                                  -sin(x)·t): every value stays right, and jax.vjp and the exported vjp
                                  modules agree with each other (the same rule); only finite differences
                                  of the float64 reference see it (`farm sweep --vjp`, docs/gradients.md)
  stateful:PRIM                   the primitive's lowering rule keeps state in the process: each platform's
                                  rule lowers right the first time it runs, as its twin every later time
                                  (a second harness of the primitive in one worker gets a wrong module;
                                  a fresh process makes it right: `--check-determinism`, docs/determinism.md)
  vmap_exported                   a batching rule for an exported call (JAX has none): each element of the
                                  batch called on its own, the last one's outputs off by one: only
                                  `jax.vmap` of an exported call sees it (`--compositions`, docs/compositions.md)
  slow:PRIM:SECONDS               executing the primitive sleeps (a host callback)
  abort:PRIM                      running the primitive aborts the process
  hang:PRIM                       running the primitive never returns
"""
from __future__ import annotations

import dataclasses
import os
import time

import jax
import numpy as np
from jax import lax
from jax._src.interpreters import mlir
from jax._src.lib.mlir.dialects import chlo, hlo

from farm.platforms import LOWERING_PLATFORMS

#: Each primitive's "twin": same parameters, other numbers (a reduction and a cumulative op too,
#: so a planted wrong rule can hit more than one primitive family).
TWINS = {"sin": "cos", "cos": "sin", "exp": "expm1", "tanh": "sin", "add": "sub", "mul": "add",
         "log1p": "log", "max": "min", "reduce_max": "reduce_min", "cumsum": "cumprod"}


def plant(spec: str) -> list[str]:
    """Plant every fault of ``spec`` (the ``FARM_PLANT`` comma list); the items planted."""
    planted = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        kind, _, rest = item.partition(":")
        args = rest.split(":") if rest else []
        PLANTERS[kind](*args)
        planted.append(item)
    return planted


def _prim(name: str):  # noqa: ANN202
    return getattr(lax, f"{name}_p", None) or getattr(lax.linalg, f"{name}_p")  # eigh, svd, qr...


def wrong_lowering(prim: str, platform: str) -> None:
    twin = _prim(TWINS[prim])
    for p in LOWERING_PLATFORMS if platform == "all" else (platform,):
        mlir.register_lowering(_prim(prim), mlir.lower_fun(lambda *a, **kw: twin.bind(*a, **kw),
                                                           multiple_results=False), platform=p)


def symbolic_only(prim: str, platform: str = "all") -> None:
    p, twin = _prim(prim), _prim(TWINS[prim])
    for target in LOWERING_PLATFORMS if platform == "all" else (platform,):
        orig = _original_rule(p, target)

        def rule(ctx, *args, _orig=orig, **kw):  # noqa: ANN001, ANN202
            symbolic = any(not isinstance(d, int) for a in ctx.avals_in for d in getattr(a, "shape", ()))
            if not symbolic:
                return _orig(ctx, *args, **kw)
            return mlir.lower_fun(lambda *a, **k: twin.bind(*a, **k), multiple_results=False)(ctx, *args, **kw)

        mlir.register_lowering(p, rule, platform=target)


def stateful(prim: str) -> None:
    p, twin = _prim(prim), _prim(TWINS[prim])
    for target in LOWERING_PLATFORMS:
        orig = _original_rule(p, target)
        ran = [0]

        def rule(ctx, *args, _orig=orig, _ran=ran, **kw):  # noqa: ANN001, ANN202
            _ran[0] += 1
            if _ran[0] == 1:
                return _orig(ctx, *args, **kw)
            return mlir.lower_fun(lambda *a, **k: twin.bind(*a, **k), multiple_results=False)(ctx, *args, **kw)

        mlir.register_lowering(p, rule, platform=target)


def vmap_exported() -> None:
    from jax._src.export import _export
    from jax._src.interpreters import batching

    p = _export.call_exported_p

    def rule(args, dims, **params):  # noqa: ANN001, ANN202
        unmapped = getattr(batching, "not_mapped", None)
        n = next(a.shape[d] for a, d in zip(args, dims) if d is not unmapped)
        per = [p.bind(*[a if d is unmapped else lax.index_in_dim(a, i, d, keepdims=False)
                        for a, d in zip(args, dims)], **params) for i in range(n)]
        per[-1] = [o + 1 if jax.numpy.issubdtype(o.dtype, jax.numpy.number) else o for o in per[-1]]  # a key stays
        return [jax.numpy.stack(outs) for outs in zip(*per)], [0] * len(per[0])

    batching.primitive_batchers[p] = rule


def _original_rule(p, platform: str):  # noqa: ANN001, ANN202
    entry = mlir._platform_specific_lowerings[platform].get(p) or mlir._lowerings[p]
    return getattr(entry, "rule", entry)


def drop_dtype(prim: str, dtype: str) -> None:
    """The primitive no longer lowers for one dtype (on every platform)."""
    p = _prim(prim)
    for platform in LOWERING_PLATFORMS:
        orig = _original_rule(p, platform)

        def rule(ctx, *args, _orig=orig, **kw):  # noqa: ANN001, ANN202
            if str(ctx.avals_in[0].dtype) == dtype:
                raise NotImplementedError(f"{prim} has no lowering for {dtype} (planted fault)")
            return _orig(ctx, *args, **kw)

        mlir.register_lowering(p, rule, platform=platform)


def low_precision(prim: str, dtype: str, via: str = "bfloat16") -> None:
    """The primitive, for ``dtype``, converts its operands to ``via``, computes there and
    converts back (on every platform, so no cross-platform comparison can see it)."""
    p = _prim(prim)
    low = np.dtype(getattr(jax.numpy, via))
    for platform in LOWERING_PLATFORMS:
        orig = _original_rule(p, platform)

        def rule(ctx, *args, _orig=orig, **kw):  # noqa: ANN001, ANN202
            if str(ctx.avals_in[0].dtype) != dtype:
                return _orig(ctx, *args, **kw)

            def narrow(*xs):  # noqa: ANN002, ANN202
                out = p.bind(*[lax.convert_element_type(x, low) for x in xs], **kw)
                real = np.finfo(np.dtype(dtype)).dtype if dtype != "bfloat16" else low

                def back(o):  # noqa: ANN001, ANN202  (each output to its own kind: eigh's values are real)
                    return lax.convert_element_type(o, np.result_type(real, np.complex64) if o.dtype.kind == "c"
                                                    and real != low else real)
                return [back(o) for o in out] if p.multiple_results else back(out)

            return mlir.lower_fun(narrow, multiple_results=p.multiple_results)(ctx, *args)

        mlir.register_lowering(p, rule, platform=platform)


def odd_reduction(prim: str = "reduce_sum", minimum: str = "16") -> None:
    """``prim`` (a reduction with an ``axes`` param) ignores the last element of each reduced
    axis of odd length > ``minimum``, on every platform (so only the reference sees it)."""
    p = _prim(prim)
    low = int(minimum)
    for platform in LOWERING_PLATFORMS:
        orig = _original_rule(p, platform)

        def rule(ctx, x, *rest, _orig=orig, axes, **kw):  # noqa: ANN001, ANN202
            shape = ctx.avals_in[0].shape
            odd = [a for a in axes if shape[a] % 2 == 1 and shape[a] > low]
            if not odd:
                return _orig(ctx, x, *rest, axes=axes, **kw)

            def short(v):  # noqa: ANN001, ANN202  (the odd axes one shorter: even, so the next lowering is the original)
                v = lax.slice(v, (0,) * v.ndim, tuple(d - (i in odd) for i, d in enumerate(v.shape)))
                return p.bind(v, axes=axes, **kw)

            return mlir.lower_fun(short, multiple_results=False)(ctx, x)

        mlir.register_lowering(p, rule, platform=platform)


def wrong_jvp(prim: str) -> None:
    """``prim`` is differentiated by its twin's JVP rule (its lowering, and so every value, unchanged)."""
    from jax._src.interpreters import ad

    p, twin = _prim(prim), _prim(TWINS[prim])
    ad.primitive_jvps[p] = ad.primitive_jvps[twin]
    # reverse mode linearizes by a rule of its own where a primitive has one (sin does): the twin's, or the JVP
    if twin in ad.primitive_linearizations:
        ad.primitive_linearizations[p] = ad.primitive_linearizations[twin]
    else:
        ad.primitive_linearizations.pop(p, None)


def chlo_leak(prim: str, platform: str) -> None:
    def rule(ctx, x, **kw):  # noqa: ANN001, ANN202
        return [chlo.sinh(x)]

    mlir.register_lowering(_prim(prim), rule, platform=platform)


def wrong_constant(prim: str, platform: str) -> None:
    p = _prim(prim)
    for target in LOWERING_PLATFORMS:
        orig = _original_rule(p, target)

        def rule(ctx, *args, _orig=orig, _wrong=target == platform, **kw):  # noqa: ANN001, ANN202
            out = _orig(ctx, *args, **kw)
            vals = list(out) if isinstance(out, (list, tuple)) else [out]
            aval = ctx.avals_out[0]
            c = np.zeros(aval.shape, dtype=aval.dtype)
            c.flat[1::2] = -c.flat[1::2]  # 0.0, -0.0, ...: adds nothing, but is no splat (printed in full)
            if _wrong and c.size:
                c.flat[c.size - 1] = 1
            return [hlo.add(vals[0], mlir.ir_constant(c)), *vals[1:]]

        mlir.register_lowering(p, rule, platform=target)


def _callback_wrap(prim: str, effect) -> None:  # noqa: ANN001
    """The primitive's own CPU lowering, its result passed through a host callback that
    runs ``effect`` first. Multi-platform lowerings (export) keep the original rule, so
    the serialized artifact stays portable and only native execution is affected."""
    p = _prim(prim)
    orig = _original_rule(p, "cpu")

    def passthrough(y):  # noqa: ANN001, ANN202
        return jax.pure_callback(lambda v: (effect(), v)[1], jax.ShapeDtypeStruct(y.shape, y.dtype), y)

    wrap = mlir.lower_fun(passthrough, multiple_results=False)

    def rule(ctx, *args, **kw):  # noqa: ANN001, ANN202
        out = orig(ctx, *args, **kw)
        if len(ctx.module_context.platforms) > 1:
            return out
        vals = list(out) if isinstance(out, (list, tuple)) else [out]
        outs = []
        for v, aval in zip(vals, ctx.avals_out):
            sub = dataclasses.replace(ctx, primitive=None, avals_in=[aval], avals_out=[aval])
            res = wrap(sub, v)
            outs.extend(res if isinstance(res, (list, tuple)) else [res])
        return outs

    mlir.register_lowering(p, rule, platform="cpu")


def slow(prim: str, seconds: str) -> None:
    _callback_wrap(prim, lambda: time.sleep(float(seconds)))


def abort(prim: str) -> None:
    _callback_wrap(prim, os.abort)


def hang(prim: str) -> None:
    _callback_wrap(prim, lambda: time.sleep(10**6))


def wrong_groups(rule: str = "allreduce") -> None:
    """Replica groups of the collectives lowered by ``_<rule>_lowering`` come out transposed.
    jax 0.12 writes an all-reduce's groups as mesh axes (``_try_mesh_axes_replica_group``)
    where it can: there the rule gets the transposed dense groups instead."""
    import sys

    from jax._src.lax import parallel

    original = parallel._replica_groups

    def wrong(groups):  # noqa: ANN001, ANN202
        ids = np.asarray(groups)
        return ids.T.reshape(ids.shape).tolist() if ids.ndim == 2 and min(ids.shape) > 1 else groups

    def by_rule(depth: int) -> bool:  # jax 0.12 names it _all_reduce_lowering, earlier _allreduce_lowering
        return rule.replace("_", "") in sys._getframe(depth + 1).f_code.co_name.replace("_", "")  # noqa: SLF001

    def transposed(axis_ctx, axis_name, axis_index_groups):  # noqa: ANN001, ANN202
        groups = original(axis_ctx, axis_name, axis_index_groups)
        return wrong(groups) if by_rule(1) else groups

    parallel._replica_groups = transposed
    mesh_axes = getattr(parallel, "_try_mesh_axes_replica_group", None)
    if mesh_axes is not None:
        def dense_and_transposed(ctx, axis_names, axis_index_groups):  # noqa: ANN001, ANN202
            if not by_rule(1):
                return mesh_axes(ctx, axis_names, axis_index_groups)
            groups = original(ctx.module_context.axis_context, axis_names, axis_index_groups)
            return parallel._device_list_replica_groups_hlo(wrong(groups))

        parallel._try_mesh_axes_replica_group = dense_and_transposed


#: The kernels ``ragged_block`` can wrap: name -> the wheel's module that defines it.
PALLAS_KERNELS = {"softmax": "jax.experimental.pallas.ops.gpu.softmax",
                  "layer_norm": "jax.experimental.pallas.ops.gpu.layer_norm",
                  "rms_norm": "jax.experimental.pallas.ops.gpu.rms_norm"}


def ragged_block(kernel: str, block: str = "8") -> None:
    import importlib

    module = importlib.import_module(PALLAS_KERNELS[kernel])
    orig, rows_per_block = getattr(module, kernel), int(block)

    def wrapped(x, *args, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        out = orig(x, *args, **kw)
        rows = int(np.prod(out.shape[:-1]))
        tail = rows % rows_per_block
        if not tail:
            return out
        flat = out.reshape(rows, out.shape[-1])
        return flat.at[rows - tail:].add(1).reshape(out.shape)

    setattr(module, kernel, wrapped)


PLANTERS = {"wrong_lowering": wrong_lowering, "low_precision": low_precision, "wrong_groups": wrong_groups, "drop_dtype": drop_dtype, "chlo_leak": chlo_leak,
            "wrong_constant": wrong_constant, "odd_reduction": odd_reduction, "symbolic_only": symbolic_only, "wrong_jvp": wrong_jvp, "stateful": stateful, "vmap_exported": vmap_exported, "slow": slow,
            "abort": abort, "hang": hang, "ragged_block": ragged_block}
