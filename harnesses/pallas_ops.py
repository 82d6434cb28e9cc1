"""The Pallas kernels shipped in the jax wheel (``jax.experimental.pallas.ops``), imported from
the installed wheel, never copied: catalog ``pallas`` (``farm sweep --catalog pallas``).

Each harness is a kernel at one shape and dtype. Its ``fun`` runs the kernel in interpret mode
(judged against a float64 NumPy reference of the kernel's math); its ``Kernel`` says which
backends the kernel is written for, and the ``pallas_export`` stage lowers the real kernel for
each of them (every TPU generation for a Mosaic TPU kernel, cuda and rocm for a Triton one).
Kernels are called through their modules (``softmax.softmax``), so a planted fault that wraps
one (``FARM_PLANT=ragged_block:softmax``) reaches every harness.

Shapes include sizes that are not powers of two and not multiples of the kernel's block.
Which kernels are not wired up, and why, is in ``docs/pallas.md``.
"""
from __future__ import annotations

import functools
import importlib

import jax.numpy as jnp
import numpy as np
from farm.catalog import SCAN_ABORTS_CPU, CustomArg, Kernel, Limitation, RandArg, define
from farm.catalog.pallas import interpreting, on_device


def _wheel(name: str):  # noqa: ANN202
    """A kernel module of the installed wheel, or None where this jax has none (an older jax:
    its harnesses are ``skipped`` with the reason, ``farm.pipeline.harness``)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


gpu_attention = _wheel("jax.experimental.pallas.ops.gpu.attention")
decode_attention = _wheel("jax.experimental.pallas.ops.gpu.decode_attention")
hopper_matmul_mgpu = _wheel("jax.experimental.pallas.ops.gpu.hopper_matmul_mgpu")
ragged_dot_mgpu = _wheel("jax.experimental.pallas.ops.gpu.ragged_dot_mgpu")
layer_norm = _wheel("jax.experimental.pallas.ops.gpu.layer_norm")
rms_norm = _wheel("jax.experimental.pallas.ops.gpu.rms_norm")
softmax = _wheel("jax.experimental.pallas.ops.gpu.softmax")
flash_attention = _wheel("jax.experimental.pallas.ops.tpu.flash_attention")
tpu_matmul = _wheel("jax.experimental.pallas.ops.tpu.matmul")
#: The module, not the ``gmm`` function its package exports under the same name.
megablox = _wheel("jax.experimental.pallas.ops.tpu.megablox.gmm")

FAMILY = "pallas_ops"
CATALOG = "pallas"
TPU, TRITON, MOSAIC_GPU = ("mosaic_tpu",), ("triton",), ("mosaic_gpu",)
#: float32 attention (scaled logits): (rtol, atol). The output is a weighted mean of v (|v| ~ 4 at most)
#: over hundreds of keys, so its float32 rounding is absolute, ~2e-5 at 384 keys, whatever the output's size.
ATTENTION_TOL = (1e-4, 1e-4)


def _softmax_ref(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _attention_ref(q, k, v, scale, causal=False):
    """softmax(q k^T * scale) v over the last two axes ([..., s, d])."""
    logits = np.einsum("...qd,...kd->...qk", q, k) * scale
    if causal:
        s_q, s_k = logits.shape[-2:]
        logits = np.where(np.tril(np.ones((s_q, s_k), bool)), logits, -np.inf)
    return np.einsum("...qk,...kd->...qd", _softmax_ref(logits), v)


# ---- tpu: matmul (jax.experimental.pallas.ops.tpu.matmul) ----

def _matmul(block, interpret):
    l, r, k = block
    return interpreting(lambda x, y: tpu_matmul.matmul(x, y, block_shape=(l, r), block_k=k), interpret)


#: The kernel's grid is size // block: a remainder is never computed, silently.
MATMUL_REMAINDER = Limitation(
    "tpu matmul's grid is size // block: rows or columns past the last whole block are never written "
    "(no check, no padding)", platforms=("cpu",), stage="compare", status="fail")

for (m, k, n), block, dt in [((256, 256, 256), (128, 128, 128), "float32"),
                             ((384, 256, 640), (128, 128, 128), "float32"),
                             ((256, 512, 384), (128, 128, 256), "bfloat16"),
                             ((200, 256, 256), (128, 128, 128), "float32")]:
    define(FAMILY, "matmul", _matmul(block, True), [RandArg((m, k), dt), RandArg((k, n), dt)], dtype=dt,
           group="tpu", params={"block": "x".join(map(str, block))}, catalog=CATALOG,
           reference=lambda x, y: x @ y, tol=(2e-2, 2e-2) if dt == "bfloat16" else (1e-4, 1e-4),
           pallas=Kernel(functools.partial(_matmul, block), TPU, "jax.experimental.pallas.ops.tpu.matmul"),
           limitations=[MATMUL_REMAINDER] if m % block[0] else [])


# ---- tpu: flash_attention ----

def _flash(causal, scale, interpret):
    return interpreting(lambda q, k, v: flash_attention.flash_attention(q, k, v, causal=causal, sm_scale=scale),
                        interpret)


def _flash_own(causal, scale, q, k, v):
    return flash_attention.mha_reference(q, k, v, None, causal=causal, sm_scale=scale)


#: The wheel's flash attention differentiates through its own backward Pallas kernels: the
#: harness interprets the forward kernel on CPU, but ``interpret`` does not reach those.
FLASH_BWD_NOT_INTERPRETED = Limitation(
    "flash_attention's custom_vjp runs its backward Pallas TPU kernels uninterpreted: on the CPU they refuse to "
    "run (the harness's interpret switch reaches only the forward kernel)", stage="vjp", status="error",
    error=r"Only interpret mode is supported on CPU backend")

for (b, h, s, d), causal, dt in [((1, 2, 128, 128), False, "float32"), ((2, 1, 256, 64), True, "float32"),
                                 ((1, 3, 384, 128), False, "float32"), ((1, 2, 256, 128), True, "bfloat16")]:
    scale = 1 / np.sqrt(d)
    define(FAMILY, "flash_attention", _flash(causal, scale, True), [RandArg((b, h, s, d), dt)] * 3, dtype=dt,
           group="tpu", params={"causal": causal}, catalog=CATALOG, limitations=[FLASH_BWD_NOT_INTERPRETED],
           reference=functools.partial(_attention_ref, scale=scale, causal=causal),
           # an attention output is a weighted mean of v over up to 384 keys: float32 rounding reaches 2e-5
           tol=(3e-2, 3e-2) if dt == "bfloat16" else ATTENTION_TOL,
           pallas=Kernel(functools.partial(_flash, causal, scale), TPU,
                         "jax.experimental.pallas.ops.tpu.flash_attention",
                         reference=functools.partial(_flash_own, causal, scale)))


# ---- tpu: megablox gmm (grouped matmul) ----

def _gmm(tiling, interpret):
    return lambda x, w, sizes: megablox.gmm(x, w, sizes, tiling=tiling, interpret=interpret)


def _gmm_ref(x, w, sizes):
    out, start = np.zeros((x.shape[0], w.shape[-1])), 0
    for g, size in enumerate(np.asarray(sizes)):
        out[start:start + size] = x[start:start + size] @ w[g]
        start += size
    return out


#: The cuda/rocm census of gmm on jax >= 0.11.2: its cumsum's chlo.scan (known.CHLO_NEW names
#: it for the cumsum primitive; gmm's key is its own).
GMM_SCAN_LEAK = Limitation("lowers its group offsets' cumsum to chlo.scan, which crosses the plugin boundary "
                           "(JAX #15608)", platforms=("cuda", "rocm"), stage="census", error="chlo.scan",
                           jax=">=0.11.2")


for (m, k, n), sizes, dt in [((256, 128, 128), (64, 128, 64), "float32"),
                             ((384, 256, 128), (100, 0, 200, 84), "float32"),
                             ((256, 128, 256), (256,), "bfloat16")]:
    define(FAMILY, "gmm", _gmm((128, 128, 128), True), [RandArg((m, k), dt), RandArg((len(sizes), k, n), dt),
                                                       CustomArg(f"group_sizes={sizes}", lambda r, sizes=sizes: np.asarray(sizes, np.int32),
                                                                 (len(sizes),), "int32")],
           dtype=dt, group="tpu", params={"groups": "-".join(map(str, sizes))}, catalog=CATALOG,
           reference=_gmm_ref, tol=(3e-2, 3e-2) if dt == "bfloat16" else (1e-4, 1e-4),
           pallas=Kernel(functools.partial(_gmm, (128, 128, 128)), TPU,
                         "jax.experimental.pallas.ops.tpu.megablox.gmm"),
           # gmm's group offsets are a cumsum: on jax >= 0.11.2 its cuda/rocm module holds chlo.scan,
           # which crosses the plugin boundary and aborts XLA:CPU (run apart), as the cumsum harnesses'
           limitations=[SCAN_ABORTS_CPU, GMM_SCAN_LEAK])


# ---- gpu (Triton): softmax, layer_norm, rms_norm, attention, decode_attention ----

def _softmax(interpret):
    return lambda x: softmax.softmax(x, axis=-1, interpret=interpret)


for shape, dt in [((8, 128), "float32"), ((13, 100), "float32"), ((16, 1000), "float32"), ((3, 5, 77), "float32"),
                  ((24, 256), "bfloat16")]:
    define(FAMILY, "softmax", _softmax(True), [RandArg(shape, dt)], dtype=dt, group="gpu", catalog=CATALOG,
           reference=_softmax_ref, tol=(2e-2, 1e-2) if dt == "bfloat16" else (1e-5, 1e-6),
           pallas=Kernel(_softmax, TRITON, "jax.experimental.pallas.ops.gpu.softmax"))


def _norm(name, interpret):
    def norm(x, w, b):  # the module's function looked up at call time (a planted wrap is seen)
        return getattr({"layer_norm": layer_norm, "rms_norm": rms_norm}[name], name)(x, w, b, interpret=interpret)
    return norm


def _layer_norm_ref(x, w, b, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps) * w + b


def _rms_norm_ref(x, w, b, eps=1e-5):
    return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * w + b


for name, module, ref in [("layer_norm", layer_norm, _layer_norm_ref), ("rms_norm", rms_norm, _rms_norm_ref)]:
    for shape, dt in [((2, 4, 128), "float32"), ((3, 5, 100), "float32"), ((1, 7, 1000), "float32")]:
        define(FAMILY, name, _norm(name, True),
               [RandArg(shape, dt), RandArg(shape[-1:], dt), RandArg(shape[-1:], dt)],
               dtype=dt, group="gpu", catalog=CATALOG, reference=ref, tol=(1e-4, 1e-5),
               pallas=Kernel(functools.partial(_norm, name), TRITON, f"jax.experimental.pallas.ops.gpu.{name}",
                             reference=getattr(module, f"{name}_reference", None)))


def _mha(causal, interpret):
    return lambda q, k, v: gpu_attention.mha(q, k, v, None, sm_scale=0.125, causal=causal, interpret=interpret)


def _mha_own(causal, q, k, v):
    return gpu_attention.mha_reference(q, k, v, None, sm_scale=0.125, causal=causal)


def _mha_ref(q, k, v, causal):  # [b, s, h, d]
    t = lambda a: np.swapaxes(a, 1, 2)
    return t(_attention_ref(t(q), t(k), t(v), 0.125, causal))


#: The kernel checks its shapes at trace time: a sequence must be a multiple of its block.
MHA_BLOCK = Limitation("gpu attention needs q_seq_len a multiple of block_q (128)", stage="trace",
                       error="must be a multiple of block_q")
#: Triton lowers power-of-2 arrays only; the kernel pads head_dim for its loads but not its compute.
TRITON_POW2 = Limitation("the Pallas Triton lowering needs power-of-2 array sizes", platforms=("triton",),
                         stage="pallas_export", error="whose size is a power of 2")

for (b, s, h, d), causal in [((1, 128, 2, 64), False), ((2, 200, 1, 64), True), ((1, 96, 2, 48), False)]:
    lims = [MHA_BLOCK] if s > 128 and s % 128 else []  # block_q is min(128, q_seq_len)
    lims += [TRITON_POW2] if d & (d - 1) else []
    define(FAMILY, "attention", _mha(causal, True), [RandArg((b, s, h, d), "float32")] * 3, dtype="float32",
           group="gpu", params={"causal": causal}, catalog=CATALOG, limitations=lims,
           reference=functools.partial(_mha_ref, causal=causal), tol=ATTENTION_TOL,
           pallas=Kernel(functools.partial(_mha, causal), TRITON, "jax.experimental.pallas.ops.gpu.attention",
                         reference=functools.partial(_mha_own, causal)))


def _mqa(interpret):
    return lambda q, k, v: decode_attention.mqa(q, k, v, interpret=interpret)


def _mqa_ref(q, k, v):  # q [b, h, d], k/v [b, s, d]: every head attends to the one k/v
    return _attention_ref(q, k, v, 1 / np.sqrt(q.shape[-1]))


#: The kernel asserts at trace time that the k/v length splits evenly into k_splits (16).
MQA_SPLITS = Limitation("gpu decode_attention needs k_seq_len divisible by k_splits (16)", stage="trace",
                        error="must be divisible by k_splits")

for (b, h, s, d) in [(2, 16, 256, 64), (1, 16, 300, 64), (3, 16, 272, 64)]:
    define(FAMILY, "decode_attention", _mqa(True),
           [RandArg((b, h, d), "float32"), RandArg((b, s, d), "float32"), RandArg((b, s, d), "float32")],
           limitations=[MQA_SPLITS] if s % 16 else [TRITON_POW2] if (s // 16) & (s // 16 - 1) else [],
           dtype="float32", group="gpu", catalog=CATALOG, reference=_mqa_ref, tol=ATTENTION_TOL,
           pallas=Kernel(_mqa, TRITON, "jax.experimental.pallas.ops.gpu.decode_attention",
                         reference=decode_attention and decode_attention.mqa_reference))



# ---- gpu (Mosaic GPU): the Hopper matmul and the ragged dot ----
# Not interpretable: their TMA copies have no rule in JAX's HLO interpreter ("No state discharge
# rule implemented for primitive: copy_gmem_to_smem"), so no CPU runs them. The harness's fun is
# the real kernel (told it is on an H100: the matmul reads the SM count from the default device);
# the ordinary stages record JAX's refusals, the pallas_export stage the cuda artifact.

#: A Mosaic GPU kernel lowers for cuda only: the other platforms refuse it, each in its words.
MOSAIC_GPU_ONLY = [
    Limitation("a Pallas kernel runs on the CPU only in interpret mode", platforms=("cpu",), stage="lower",
               error="Only interpret mode is supported on CPU backend"),
    Limitation("Mosaic GPU does not support ROCm; once the kernel was lowered for cuda in the process, JAX exports "
               "it for rocm anyway with the CUDA custom call (docs/findings.md)", platforms=("rocm:mosaic_gpu",),
               stage="pallas_export", error="does not yet support AMD ROCm|CUDA-only mosaic_gpu_v2", jax="<0.12"),
    # jax 0.12: lowering the kernel for rocm fails on a bare assert (no message) instead, in the
    # lower stage and in the per-target export alike; the multi-platform export goes through
    Limitation("jax 0.12 lowers a Mosaic GPU kernel for rocm into a bare AssertionError (no ROCm refusal)",
               platforms=("rocm:mosaic_gpu",), stage="pallas_export", error="^AssertionError: AssertionError$",
               jax=">=0.12"),
    Limitation("jax 0.12 lowers a Mosaic GPU kernel for rocm into a bare AssertionError (no ROCm refusal)",
               platforms=("rocm",), stage="lower", error="^AssertionError: ", jax=">=0.12"),
    # measured: refused on 0.10.2, exported on 0.9.2 and 0.12.0.1
    Limitation("a multi-platform export of a plgpu.kernel is refused", stage="export",
               error="mpmd_map does not support multi-platform lowering", jax=">=0.10,<0.12"),
    # measured on 0.9.2; 0.10.2 lowers it (with the CUDA custom call, docs/findings.md)
    Limitation("jax 0.9 refuses to lower a Mosaic GPU kernel for rocm", platforms=("rocm",), stage="lower",
               error="Mosaic GPU does not yet support AMD ROCm devices", jax="<0.10"),
    Limitation("a Mosaic GPU kernel cannot be lowered for tpu", platforms=("tpu",), stage="lower"),
    Limitation("the CPU backend has no handler for mosaic_gpu_v2", platforms=("cuda",), stage="crossexec"),
]


#: measured on 0.9.2; 0.10.2 and 0.12.0.1 trace it
HOPPER_CORE_COUNT = Limitation(
    "jax 0.9's hopper_matmul sizes its grid by the default backend's device's core_count, which a CPU device "
    "does not have: it traces only on a GPU host", stage="trace", status="error", error="^AttributeError",
    jax="<0.10")


def _hopper_matmul(tiles, interpret):
    m, n, k = tiles

    def matmul(a, b):  # the config made at call time: a jax without the kernel still loads the catalog
        config = hopper_matmul_mgpu.TuningConfig(tile_m=m, tile_n=n, tile_k=k, max_concurrent_steps=2)
        return hopper_matmul_mgpu.matmul(a, b, None, config)
    return on_device(matmul, "cuda")


for (m, k, n), tiles in [((512, 256, 512), (128, 128, 64)), ((384, 192, 768), (128, 128, 64))]:
    define(FAMILY, "hopper_matmul", _hopper_matmul(tiles, False), [RandArg((m, k), "float16"), RandArg((k, n), "float16")],
           dtype="float16", group="gpu", params={"tiles": "x".join(map(str, tiles))}, catalog=CATALOG, compare="none",
           pallas=Kernel(functools.partial(_hopper_matmul, tiles), MOSAIC_GPU, "jax.experimental.pallas.ops.gpu.hopper_matmul_mgpu",
                         interpretable=False), limitations=[*MOSAIC_GPU_ONLY, HOPPER_CORE_COUNT])


def _ragged_dot(interpret):
    return on_device(lambda a, b, g: ragged_dot_mgpu.ragged_dot(a, b, group_sizes=g, block_m=64, block_n=64, block_k=64,
                                                               max_concurrent_steps=2, grid_block_n=1), "cuda")


for (m, k, n), sizes in [((256, 128, 128), (64, 64, 100, 28)), ((320, 192, 256), (300, 20))]:
    define(FAMILY, "ragged_dot", _ragged_dot(False),
           [RandArg((m, k), "float16"), RandArg((len(sizes), k, n), "float16"),
            CustomArg(f"group_sizes={sizes}", lambda r, sizes=sizes: np.asarray(sizes, np.int32), (len(sizes),), "int32")],
           dtype="float16", group="gpu", params={"groups": "-".join(map(str, sizes))}, catalog=CATALOG, compare="none",
           pallas=Kernel(_ragged_dot, MOSAIC_GPU, "jax.experimental.pallas.ops.gpu.ragged_dot_mgpu", interpretable=False),
           limitations=MOSAIC_GPU_ONLY)


# ---- paged attention: tpu (Mosaic TPU) and gpu (Triton) ----

def _paged_ref(q, k_pages, v_pages, lengths, pages):
    """Grouped-query attention of each sequence over its first ``lengths[b]`` tokens, gathered
    from its pages (no scaling: neither kernel scales the logits)."""
    b, hq, d = q.shape
    hkv, _, page, _ = k_pages.shape
    out = np.zeros((b, hq, d))
    for i in range(b):
        n = int(lengths[i])
        for h in range(hq):
            kv = h // (hq // hkv)
            k = k_pages[kv, np.asarray(pages[i])].reshape(-1, d)[:n]
            v = v_pages[kv, np.asarray(pages[i])].reshape(-1, d)[:n]
            out[i, h] = _softmax_ref(q[i, h] @ k.T) @ v
    return out


def _paged_args(b, hq, hkv, d, total, page, per_seq, lengths):  # noqa: ANN001, ANN202
    def pages(r):  # noqa: ANN001, ANN202  each sequence its own pages, in a shuffled order
        return np.asarray(r.permutation(total)[:b * per_seq].reshape(b, per_seq), np.int32)
    return [RandArg((b, hq, d), "float32"), RandArg((hkv, total, page, d), "float32"),
            RandArg((hkv, total, page, d), "float32"),
            CustomArg(f"lengths={lengths}", lambda r: np.asarray(lengths, np.int32), (b,), "int32"),
            CustomArg("pages=permutation", pages, (b, per_seq), "int32")]


def _paged_own(q, k_pages, v_pages, lengths, pages):
    """The gpu kernel's shipped ``paged_attention_reference`` over each sequence's pages made
    contiguous ([b, tokens, kv heads, d]); the tpu kernel ships none, so it is held to this one too."""
    from jax.experimental.pallas.ops.gpu import paged_attention as gpu_paged

    hkv, _, _, d = k_pages.shape
    b = pages.shape[0]
    k = k_pages[:, pages].reshape(hkv, b, -1, d).transpose(1, 2, 0, 3)
    v = v_pages[:, pages].reshape(hkv, b, -1, d).transpose(1, 2, 0, 3)
    return gpu_paged.paged_attention_reference(q, k, v, lengths)


def _tpu_paged(per_block, interpret):
    def paged(q, k, v, n, p):  # imported when called: a jax without the kernel still loads the catalog
        from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention_kernel as tpu_paged

        return tpu_paged.paged_attention(q, k, v, n, p, pages_per_compute_block=per_block)
    return interpreting(paged, interpret)


def _gpu_paged(interpret):
    def paged(q, k, v, n, p):  # imported when called, as _tpu_paged
        from jax.experimental.pallas.ops.gpu import paged_attention as gpu_paged

        return gpu_paged.paged_attention(q, k, v, p, n, pages_per_compute_block=4, k_splits=2, interpret=interpret)
    return paged


#: The tpu kernel rounds float32 K and V pages to bfloat16: ``MultiPageAsyncCopyDescriptor._maybe_dequantize``
#: casts to its default ``dtype=jnp.bfloat16`` when there are no quantization scales (docs/findings.md).
TPU_PAGED_BF16 = Limitation("tpu paged_attention rounds float32 K/V pages to bfloat16 (_maybe_dequantize's default "
                            "dtype): errors of ~1e-2 where the gpu kernel is within 1e-4", platforms=("cpu",),
                            stage="compare", status="fail")
TPU_PAGED_BF16_OWN = Limitation(TPU_PAGED_BF16.description + "; against the gpu kernel's jnp reference too",
                                platforms=("cpu",), stage="pallas_reference", status="fail")

for b, hq, hkv, lengths in [(2, 8, 2, (100, 37)), (3, 4, 4, (128, 1, 77))]:
    args = _paged_args(b, hq, hkv, 128, 32, 16, 8, lengths)
    # unscaled logits (neither kernel scales q k^T) of normal inputs reach |30|: float32 rounding alone
    # gives 3e-5 (the gpu kernel and the shipped jnp reference alike), hence (1e-3, 1e-4)
    define(FAMILY, "paged_attention", _tpu_paged(4, True), args, dtype="float32", group="tpu",
           limitations=[TPU_PAGED_BF16, TPU_PAGED_BF16_OWN],
           params={"lengths": "-".join(map(str, lengths))}, catalog=CATALOG, reference=_paged_ref, tol=(1e-3, 1e-4),
           pallas=Kernel(functools.partial(_tpu_paged, 4), TPU,
                         "jax.experimental.pallas.ops.tpu.paged_attention.paged_attention_kernel", reference=_paged_own))
    define(FAMILY, "paged_attention", _gpu_paged(True), args, dtype="float32", group="gpu",
           params={"lengths": "-".join(map(str, lengths))}, catalog=CATALOG, reference=_paged_ref, tol=(1e-3, 1e-4),
           pallas=Kernel(_gpu_paged, TRITON, "jax.experimental.pallas.ops.gpu.paged_attention", reference=_paged_own))


# ---- splash attention (tpu): a causal mask, single device ----

def _splash(heads, seq, interpret):
    def attention(q, k, v):  # the kernel made when called, as _tpu_paged
        from jax.experimental.pallas.ops.tpu import splash_attention as splash

        mask = splash.MultiHeadMask([splash.CausalMask((seq, seq)) for _ in range(heads)])
        sizes = splash.BlockSizes(block_q=128, block_kv=128, block_kv_compute=128)
        return splash.make_splash_mha_single_device(mask, block_sizes=sizes, interpret=interpret)(q, k, v)
    return attention


def _splash_own(heads, seq):
    from jax.experimental.pallas.ops.tpu import splash_attention as splash

    mask = splash.MultiHeadMask([splash.CausalMask((seq, seq)) for _ in range(heads)])
    return splash.make_masked_mha_reference(mask)


#: The harness builds splash attention with forward block sizes only (what the forward needs).
SPLASH_NO_BWD_BLOCKS = Limitation(
    "splash attention is built with forward block sizes only: its custom_vjp refuses to differentiate without "
    "backward ones", stage="vjp", status="error", error=r"Need to specify backward blocks")

for h, s, d in [(2, 256, 128), (1, 384, 64)]:
    define(FAMILY, "splash_attention", _splash(h, s, True), [RandArg((h, s, d), "float32")] * 3, dtype="float32",
           # unscaled logits of normal q, k (|qk| ~ 30): float32 rounding reaches 9e-5, as in the kernel's own
           # jnp reference (make_masked_mha_reference), which the kernel matches within 2e-6
           group="tpu", params={"mask": "causal"}, catalog=CATALOG, tol=(2e-3, 2e-4), limitations=[SPLASH_NO_BWD_BLOCKS],
           reference=functools.partial(_attention_ref, scale=1.0, causal=True),
           pallas=Kernel(functools.partial(_splash, h, s), TPU,
                         "jax.experimental.pallas.ops.tpu.splash_attention", reference=_splash_own(h, s)))


# ---- random (tpu): threefry2x32 random bits, padded to the kernel's block where ragged ----

def _threefry_bits(shape, interpret):
    def bits(key):  # imported when called, as _tpu_paged
        from jax.experimental.pallas.ops.tpu.random import threefry

        return threefry.plthreefry_random_bits(key, 32, shape)
    return interpreting(bits, interpret)


def _threefry_ref(key, shape):
    """Threefry-2x32 (20 rounds, Random123) in NumPy: the kernel hashes counter (0, i) for the
    i-th element in row-major order of ``shape`` and returns the two words XORed."""
    k0, k1 = (np.uint32(k) for k in np.asarray(key, np.uint32))
    ks = (k0, k1, np.uint32(k0 ^ k1 ^ np.uint32(0x1BD11BDA)))
    x0 = np.zeros(int(np.prod(shape)), np.uint32) + ks[0]
    x1 = np.arange(int(np.prod(shape)), dtype=np.uint32) + ks[1]
    rotations = ((13, 15, 26, 6), (17, 29, 16, 24))
    with np.errstate(over="ignore"):
        for i in range(5):
            for r in rotations[i % 2]:
                x0 = x0 + x1
                x1 = (x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r))
                x1 = x0 ^ x1
            x0 = x0 + ks[(i + 1) % 3]
            x1 = x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return (x0 ^ x1).reshape(shape)


for shape in [(8, 128), (256, 512), (20, 300)]:
    define(FAMILY, "threefry_bits", _threefry_bits(shape, True),
           [CustomArg("key=(42,7)", lambda r: np.asarray([42, 7], np.uint32), (2,), "uint32")], dtype="uint32",
           group="tpu", params={"shape": "x".join(map(str, shape))}, catalog=CATALOG,
           reference=functools.partial(_threefry_ref, shape=shape),
           pallas=Kernel(functools.partial(_threefry_bits, shape), TPU, "jax.experimental.pallas.ops.tpu.random.threefry"))


# ---- ragged paged attention (tpu): export only ----
# Neither interpreter runs it in jax 0.10.2: the HLO interpreter raises "'TypedInt' object has no
# attribute 'shape'" (_swap_discharge_rule), TPU interpret mode (InterpretParams) "'ReshapeTransform'
# object has no attribute 'indices'". Its tuned block sizes are read from jax.devices()[0].device_kind
# (not the abstract device: "TPU version must be 4 or higher" on this CPU host), so the block sizes
# are given. The harness's fun is the real kernel; pallas_export exports it for every generation.

#: A Mosaic TPU kernel lowers for tpu only: the other platforms refuse it, each in its words.
MOSAIC_TPU_ONLY = [
    Limitation("a Pallas kernel runs on the CPU only in interpret mode", platforms=("cpu",), stage="lower",
               error="Only interpret mode is supported on CPU backend"),
    Limitation("a Mosaic TPU kernel cannot be lowered for a GPU", platforms=("cuda", "rocm"), stage="lower",
               error="Compiler params for platform tpu cannot be used for gpu lowering|Cannot lower pallas_call on "
                     "platform: gpu"),
    Limitation("the ordinary tpu lowering asks this host's default device for the TPU generation (docs/findings.md); "
               "pallas_export tells it each generation", platforms=("tpu",), stage="lower",
               error="Unsupported TPU device kind: cpu"),
    Limitation("the CPU backend has no handler for tpu_custom_call", platforms=("tpu",), stage="crossexec"),
]


def _ragged_paged(interpret):
    def attention(q, kv, kv_lens, pages, cu_q_lens, num_seqs):  # imported when called, as _tpu_paged
        from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as rpa

        return rpa.ragged_paged_attention(q, kv, kv_lens, pages, cu_q_lens, num_seqs, sm_scale=0.1,
                                          num_kv_pages_per_block=4, num_queries_per_block=8, vmem_limit_bytes=32 * 2**20)
    return attention


for q_lens, kv_lens in [((5, 1, 20), (37, 100, 20))]:
    hq, hkv, d, page, total, per_seq = 4, 2, 128, 16, 32, 8
    n = len(q_lens)
    define(FAMILY, "ragged_paged_attention", _ragged_paged(False),
           [RandArg((sum(q_lens), hq, d), "float32"), RandArg((total, page, 2 * hkv, d), "float32"),
            CustomArg(f"kv_lens={kv_lens}", lambda r, k=kv_lens: np.asarray(k, np.int32), (n,), "int32"),
            CustomArg("pages=permutation", lambda r, n=n: np.asarray(r.permutation(total)[:n * per_seq].reshape(n, per_seq),
                                                                     np.int32), (n, per_seq), "int32"),
            CustomArg(f"cu_q_lens={q_lens}", lambda r, q=q_lens: np.asarray(np.concatenate([[0], np.cumsum(q)]), np.int32),
                      (n + 1,), "int32"),
            CustomArg(f"num_seqs={n}", lambda r, n=n: np.asarray([n], np.int32), (1,), "int32")],
           dtype="float32", group="tpu", params={"q_lens": "-".join(map(str, q_lens))}, catalog=CATALOG,
           compare="none", limitations=MOSAIC_TPU_ONLY,
           pallas=Kernel(_ragged_paged, TPU, "jax.experimental.pallas.ops.tpu.ragged_paged_attention",
                         interpretable=False))
