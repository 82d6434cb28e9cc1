#!/usr/bin/env python3
"""grad(lax.logistic) and grad(lax.tanh) in float32 are exactly 0 where the true derivative is
representable: JAX's JVP rules compute it from the rounded value (ans * (1 - ans), 1 - ans**2),
which cancels to 0 once the value rounds to 1 (logistic from x = 17, tanh from x = 9).

Needs only jax and numpy. Exit 1 while either derivative is 0 (or off by more than 1%), 0 once fixed.
Upstream: jax-ml/jax#40385 and #40342 (logistic, open; fix proposed in #40825), #40388 (tanh).
"""
import math
import sys

import jax
import numpy as np
from jax import lax

CASES = [  # (name, function, x, the true derivative in float64)
    ("logistic", lax.logistic, 17.0, math.exp(-17.0) / (1.0 + math.exp(-17.0)) ** 2),
    ("logistic", lax.logistic, 12.0, math.exp(-12.0) / (1.0 + math.exp(-12.0)) ** 2),
    ("tanh", lax.tanh, 9.0, 1.0 / math.cosh(9.0) ** 2),
]
failed = False
for name, f, x, want in CASES:
    got = float(jax.grad(f)(np.float32(x)))
    ok = abs(got - want) <= 0.01 * want
    failed |= not ok
    print(f"grad({name})({x}) float32: {got:.6g}, true {want:.6g} (representable: float32 tiny is "
          f"{np.finfo(np.float32).tiny:.3g}){'' if ok else '  <-- wrong'}")
print(f"jax {jax.__version__}: " + ("still fails" if failed else "fixed"))
sys.exit(1 if failed else 0)
