"""Accuracy tables: every floating elementwise primitive's error in ULP against a correctly
rounded multiprecision reference, per (primitive, dtype, platform) and jax version.

- ``functions``: which primitives, their arity and interesting points (poles, zeros, cuts).
- ``inputs``: every 16-bit input; stratified binade samples plus special classes above.
- ``reference``: the exact values (MPFR through gmpy2, mpmath where MPFR has no function),
  cached on disk under a key of everything that can change them.
- ``runner``: the jax side, a self-contained script any jax version's venv can run.
- ``score``: ULP errors, their distribution, worst inputs, special-value agreement.
- ``table``: building, rendering and comparing tables across versions.
"""
