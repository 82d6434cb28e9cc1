"""A Mosaic GPU kernel written with ``plgpu.kernel`` is refused for ROCm in a fresh process,
but exports for ROCm, carrying the CUDA ``mosaic_gpu_v2`` custom call, once the same kernel
has been lowered for cuda in that process (jax 0.10.2; docs/findings.md, docs/pallas.md).

Standalone: jax, jaxlib and numpy only; runs on a CPU host. Exits 1 while the second rocm
export succeeds after the first was refused.
"""
import re
import sys

import jax
import jax.numpy as jnp
from jax import export
from jax.experimental.pallas.ops.gpu import ragged_dot_mgpu

args = (jax.ShapeDtypeStruct((256, 128), jnp.float16), jax.ShapeDtypeStruct((4, 128, 128), jnp.float16),
        jax.ShapeDtypeStruct((4,), jnp.int32))


def f(a, b, g):
    return ragged_dot_mgpu.ragged_dot(a, b, group_sizes=g, block_m=64, block_n=64, block_k=64,
                                      max_concurrent_steps=2, grid_block_n=1)


def rocm() -> str:
    try:
        exp = export.export(jax.jit(f), platforms=("rocm",))(*args)
    except ValueError as e:
        return f"refused: {e}"
    calls = sorted(set(re.findall(r"custom_call @([\w$.]+)", exp.mlir_module())))
    return f"exported, custom calls {calls}"


first = rocm()
print("1. rocm, fresh process:", first)
export.export(jax.jit(f), platforms=("cuda",))(*args)
print("2. cuda: exported")
second = rocm()
print("3. rocm again:", second)
sys.exit(1 if first.startswith("refused") and second.startswith("exported") else 0)
