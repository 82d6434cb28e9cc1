"""jax.scipy.special.hyp2f1(a, b, c, x) never returns for an infinite or huge a (here 3.4e38, the
largest float32; also -3.4e38 and +-inf), and answers 1.0 for a NaN a.

hyp2f1(3.4e38, 0.4, 1.5, 0.3) has no finite value (the series diverges), so NaN or inf would
do; JAX computes every branch of its piecewise definition, and the terminating-series branch
loops as many times as |a| says. Found by the api catalog's edge-value variants of
jax.scipy.special (a timeout, the worker killed). The call runs in a child process with a
30 s limit. Exits 1 while it hangs or a NaN parameter gives a number, 0 once both are fixed.
"""
import subprocess
import sys

CALL = """
import sys, numpy as np, jax, jax.scipy.special as jsp
jax.config.update("jax_platforms", "cpu")
print(float(jax.jit(jsp.hyp2f1)(np.float32(float(sys.argv[1])), np.float32(0.4), np.float32(1.5), np.float32(0.3))))
"""
ok = True
for a in ("3.4e38", "inf", "nan"):
    try:
        out = subprocess.run([sys.executable, "-c", CALL, a], capture_output=True, text=True, timeout=30)
        value = out.stdout.strip() or out.stderr.strip().splitlines()[-1]
    except subprocess.TimeoutExpired:
        value = "no result in 30 s"
    good = value not in ("no result in 30 s",) and (a != "nan" or value == "nan")
    ok &= good
    print(f"hyp2f1({a}, 0.4, 1.5, 0.3) -> {value}   {'ok' if good else 'BUG'}")
sys.exit(0 if ok else 1)
