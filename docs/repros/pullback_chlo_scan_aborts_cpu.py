"""jaxlib 0.12.0.1: the cuda lowering of the gradient of jax.scipy.special.spence (exp1, expn,
jnp.place alike) holds the forward cumsum as chlo.scan, and XLA:CPU aborts compiling it
(computation_partitioner.cc: Check failed: operand_maps.size() == 1). Dies by SIGABRT (rc 134)."""
import jax
import jax.scipy.special as jsp
import numpy as np

x = np.linspace(0.5, 2.0, 21, dtype=np.float32).reshape(7, 3)
g = jax.jit(jax.grad(lambda x: jsp.spence(x).sum()))
g.trace(x).lower(lowering_platforms=("cpu",)).compile()
print("the cpu lowering of the gradient compiles")
text = g.trace(x).lower(lowering_platforms=("cuda",)).as_text()
print("chlo.scan in the cuda lowering:", "chlo.scan" in text)
g.trace(x).lower(lowering_platforms=("cuda",)).compile()
print("the cuda lowering compiled on XLA:CPU")
