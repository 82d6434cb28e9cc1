"""jnp.gcd(x, INT_MIN) never returns for x >= 0 (and jnp.lcm, which calls it).

jnp.gcd takes absolute values, then loops `while any(x2 != 0)`, keeping x1 >= x2. The
absolute value of INT_MIN is INT_MIN (negative), so from (0, INT_MIN) the body computes
(INT_MIN, rem(0, INT_MIN) = 0), then swaps them back because INT_MIN < 0: (0, INT_MIN)
again, forever. NumPy answers at once (np.gcd(np.int32(0), np.int32(-2**31)) is -2**31).
Found by the api catalog's int32 edge-value variants (jnp.gcd_int32_11_11_edge=x1), whose
sweep timed out. The call runs in a child process with a time limit; exits 1 on the hang.
"""
import subprocess
import sys

CHILD = """
import jax, jax.numpy as jnp, numpy as np
x, y = np.int32(0), np.int32(-2**31)
print("numpy:", np.gcd(x, y), flush=True)
print("jnp:  ", jax.jit(jnp.gcd)(x, y), flush=True)
"""
try:
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60)
    print(out.stdout, end="")
    print("ok: jnp.gcd returned")
    sys.exit(0)
except subprocess.TimeoutExpired as e:
    print((e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), end="")
    print("BUG: jnp.gcd(0, INT_MIN) did not return within 60 s (an endless while loop)")
    sys.exit(1)
