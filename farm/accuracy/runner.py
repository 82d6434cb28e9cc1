"""The jax side of an accuracy table: evaluate primitives on inputs, write the raw outputs.

A self-contained script (jax, NumPy and ml_dtypes only) so that any jax version's venv
(``farm.run.versions.venvs.provision``) can run it: ``python runner.py INPUTS.npz JOBS.json OUT.npz``.
Each job names a primitive, a dtype, a platform and the input arrays' keys. ``cpu`` runs
natively; ``cuda``, ``rocm`` and ``tpu`` lower the function for that platform and compile
that module with this host's CPU backend (the farm's crossexec). float64 always runs with
x64 on. A job that cannot run records its error instead of outputs.
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np


def _functions():  # noqa: ANN202
    from jax import lax

    unary = ["exp", "exp2", "expm1", "log", "log1p", "sqrt", "rsqrt", "cbrt", "sin", "cos", "tan", "asin", "acos",
             "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "logistic", "erf", "erfc", "erf_inv",
             "lgamma", "digamma", "bessel_i0e", "bessel_i1e", "square", "floor", "ceil", "sign", "abs", "neg"]
    fns = {n: getattr(lax, n) for n in unary if hasattr(lax, n)}
    fns["round"] = lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)
    for n in ("pow", "atan2", "rem", "nextafter"):
        fns[n] = getattr(lax, n)
    return fns


def _platform_function(fn, platform: str, args: list[np.ndarray]):  # noqa: ANN001, ANN202
    import jax

    if platform == "cpu":
        return jax.jit(fn)
    traced = jax.jit(fn).trace(*args)
    return traced.lower(lowering_platforms=(platform,)).compile()


def run(inputs: dict[str, np.ndarray], jobs: list[dict]) -> tuple[dict[str, np.ndarray], list[dict]]:
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_platforms", "cpu")
    fns = _functions()
    outs: dict[str, np.ndarray] = {}
    done = []
    for job in jobs:
        t0 = time.perf_counter()
        info = {"key": job["key"], "error": None}
        try:
            args = [inputs[k] for k in job["args"]]
            f = _platform_function(fns[job["name"]], job["platform"], args)
            y = np.asarray(f(*args))
            if y.dtype != args[0].dtype:
                raise TypeError(f"result dtype {y.dtype}, inputs {args[0].dtype}")
            outs[job["key"]] = y
        except Exception as e:  # noqa: BLE001  (recorded, not raised: one job's failure is a finding)
            info["error"] = f"{type(e).__name__}: {e}"[:300]
        info["seconds"] = time.perf_counter() - t0
        done.append(info)
    return outs, done


def versions() -> dict[str, str]:
    import jax
    import jaxlib

    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__}


def main(argv: list[str]) -> int:
    import ml_dtypes  # noqa: F401  (registers bfloat16 with NumPy for loading)

    inputs_path, jobs_path, out_path = argv
    with np.load(inputs_path) as z:
        inputs = {k: z[k] for k in z.files}
    jobs = json.loads(open(jobs_path).read())
    bf16 = {k for k, v in json.loads(open(jobs_path + ".dtypes").read()).items() if v == "bfloat16"}
    for k in bf16:
        inputs[k] = inputs[k].view(ml_dtypes.bfloat16)
    outs, done = run(inputs, jobs)
    for k, v in outs.items():
        if v.dtype == ml_dtypes.bfloat16:
            outs[k] = v.view(np.uint16)
    np.savez(out_path, **outs)
    with open(out_path + ".json", "w") as f:
        json.dump({"jobs": done, "versions": versions()}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
