"""jax.export: an artifact exported with the GSPMD partitioner and called inside jit with its
shardings, GSPMD still selected, fails to lower (MLIR verifier: 'stablehlo.custom_call' op should
have a sharding attribute of type TensorShardingPerValueAttr). Exits 1 where it fails (jax 0.10.2,
0.12.0.1), 0 where the call returns the right values (SHARDY=1: the same with Shardy). Needs only
jax and numpy. Found by `farm sweep --compositions` (docs/compositions.md)."""
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import jax
import numpy as np
from jax import export
from jax.sharding import NamedSharding, PartitionSpec as P

jax.config.update("jax_use_shardy_partitioner", os.environ.get("SHARDY") == "1")  # GSPMD unless SHARDY=1
s = NamedSharding(jax.make_mesh((2,), ("y",)), P("y"))
x = np.arange(4, dtype=np.float32)
exp = export.export(jax.jit(lambda a: a * 2, in_shardings=s, out_shardings=s))(jax.ShapeDtypeStruct((4,), np.float32, sharding=s))
if len(sys.argv) > 1:
    exp = export.deserialize(exp.serialize())
try:
    out = jax.jit(exp.call, in_shardings=s, out_shardings=s)(x)
except ValueError as e:
    print(f"{jax.__version__}: {str(e).splitlines()[1].strip()}")
    sys.exit(1)
print(f"{jax.__version__}: ok")
sys.exit(0 if np.allclose(out, x * 2) else 1)
