"""jax.scipy.special.xlogy / xlog1py with an integer first argument cannot be differentiated with
respect to the second: the custom_jvp rule multiplies the integer argument's float0 tangent.
jax.scipy.stats.gumbel_l.ppf and gumbel_r.ppf call xlog1py(-1, ...) themselves, so their grad
fails the same way. Exits 1 where it fails, 0 where it works."""
import sys

import jax
import jax.scipy.special as jsp
import jax.scipy.stats as jst

print("jax", jax.__version__)
bad = 0
for name, f in [("xlogy(-1, y)", lambda y: jsp.xlogy(-1, y)), ("xlog1py(-1, y)", lambda y: jsp.xlog1py(-1, y)),
                ("gumbel_l.ppf(q)", jst.gumbel_l.ppf), ("gumbel_r.ppf(q)", jst.gumbel_r.ppf)]:
    try:
        print(f"grad {name} at 0.3 = {float(jax.grad(f)(0.3)):.6g}")
    except TypeError as e:
        bad += 1
        print(f"grad {name}: {type(e).__name__}: {str(e).splitlines()[0][:80]}")
sys.exit(1 if bad else 0)
