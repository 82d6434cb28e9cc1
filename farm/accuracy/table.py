"""Measure a table: inputs → the jax side (a subprocess, any jax version) → exact values → scores.

The jax side runs ``runner.py`` with the Python of the jax version asked for (one process
per dtype, so a float64 table's outputs are never all in memory at once) while this process
computes the exact values on the other cores: the references never depend on jax.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import ml_dtypes
import numpy as np

from farm.accuracy import reference
from farm.accuracy.functions import Function
from farm.accuracy.inputs import FLOATS, for_function, np_dtype
from farm.accuracy.score import Score, score
from farm.errors import FarmError

PLATFORMS = ("cpu", "cuda", "rocm", "tpu")
#: default inputs per float32/float64 function (and pairs per binary function)
SAMPLES = 1 << 20
#: at most this many for the functions whose reference is mpmath's (~20x slower than MPFR)
MPMATH_SAMPLES = 1 << 17
#: at most this many pairs for a binary function (2^16 x 2^16 pairs are not exhaustible anyway)
BINARY_SAMPLES = 1 << 18


def _count(f: Function, samples: int) -> int:
    if f.engine == "mpmath":
        return min(samples, MPMATH_SAMPLES)
    return min(samples, BINARY_SAMPLES) if f.arity == 2 else samples


@dataclass(frozen=True)
class Table:
    """A measured table: its rows and the versions that produced them."""

    jax: str
    jaxlib: str
    rows: list[Score]
    seconds: float
    timings: dict[str, float]

    def to_dict(self) -> dict:
        return {"jax": self.jax, "jaxlib": self.jaxlib, "seconds": self.seconds, "timings": self.timings,
                "rows": [r.to_dict() for r in self.rows]}


def measure(functions: list[Function], dtypes: list[str], platforms: list[str], *, samples: int = SAMPLES,
            python: str | None = None, log: Callable[[str], None] = lambda s: None,
            workers: int | None = None) -> Table:
    """The table of ``functions`` × ``dtypes`` × ``platforms`` with the jax of ``python``."""
    bad = [d for d in dtypes if d not in FLOATS] + [p for p in platforms if p not in PLATFORMS]
    if bad:
        raise FarmError(f"not a floating dtype or platform: {', '.join(bad)}")
    t0 = time.perf_counter()
    rows: list[Score] = []
    timings: dict[str, float] = {}
    versions = {"jax": "?", "jaxlib": "?"}
    with tempfile.TemporaryDirectory(prefix="farm-accuracy-") as tmp:
        work = Path(tmp)
        script = work / "runner.py"
        shutil.copy(Path(__file__).with_name("runner.py"), script)
        for dtype in dtypes:
            td = time.perf_counter()
            args = {f.name: for_function(f, dtype, _count(f, samples)) for f in functions}
            proc = _start(python or sys.executable, script, work, dtype, args, platforms)
            tr = time.perf_counter()
            exact = {f.name: reference.exact(f.name, dtype, args[f.name], workers) for f in functions}
            timings[f"reference {dtype}"] = time.perf_counter() - tr
            outs, info, versions = _finish(proc, work, dtype)
            for f in functions:
                for p in platforms:
                    key = f"{f.name}|{p}"
                    job = info.get(key, {"error": "not run"})
                    if key not in outs:
                        rows.append(Score(f.name, dtype, p, 0, float("nan"), {}, [], {}, job.get("error")))
                        continue
                    s = score(f.name, dtype, p, args[f.name], outs[key], exact[f.name],
                              lambda a, n=f.name: reference.exact(n, dtype, a, workers))
                    rows.append(Score(**{**s.__dict__, "seconds": float(job.get("seconds", 0.0))}))
            timings[dtype] = time.perf_counter() - td
            log(f"  {dtype}: {timings[dtype]:.1f} s (references {timings[f'reference {dtype}']:.1f} s)")
    return Table(versions["jax"], versions["jaxlib"], rows, time.perf_counter() - t0, timings)


def _start(python: str, script: Path, work: Path, dtype: str, args: dict[str, list[np.ndarray]],
           platforms: list[str]) -> subprocess.Popen:
    arrays, dtypes, jobs = {}, {}, []
    for name, a in args.items():
        keys = []
        for i, x in enumerate(a):
            k = f"{name}.{i}"
            arrays[k] = x.view(np.uint16) if x.dtype == ml_dtypes.bfloat16 else x
            dtypes[k] = dtype
            keys.append(k)
        jobs += [{"key": f"{name}|{p}", "name": name, "platform": p, "args": keys} for p in platforms]
    np.savez(work / f"in-{dtype}.npz", **arrays)
    (work / f"jobs-{dtype}.json").write_text(json.dumps(jobs))
    (work / f"jobs-{dtype}.json.dtypes").write_text(json.dumps(dtypes))
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_ENABLE_X64": "1"}
    env.pop("PYTHONPATH", None)  # the runner needs jax only: the venv's, not this checkout's
    return subprocess.Popen([python, str(script), str(work / f"in-{dtype}.npz"), str(work / f"jobs-{dtype}.json"),
                             str(work / f"out-{dtype}.npz")], env=env, cwd=work, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen, work: Path, dtype: str) -> tuple[dict[str, np.ndarray], dict[str, dict], dict]:
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise FarmError(f"the jax side failed for {dtype}: {(err or out).strip().splitlines()[-1:]}")
    meta = json.loads((work / f"out-{dtype}.npz.json").read_text())
    with np.load(work / f"out-{dtype}.npz") as z:
        outs = {k: (z[k].view(ml_dtypes.bfloat16) if dtype == "bfloat16" else z[k]).astype(np_dtype(dtype))
                for k in z.files}
    return outs, {j["key"]: j for j in meta["jobs"]}, meta["versions"]


def reference_key(samples: int) -> str:
    """What a row was measured against: the inputs (their code and count) and the reference's
    code and libraries. Two versions' rows compare only where this is equal."""
    import hashlib  # noqa: PLC0415

    h = hashlib.sha256(f"{samples} {MPMATH_SAMPLES} {BINARY_SAMPLES} {reference.source_digest()}".encode())
    for mod in ("inputs.py", "functions.py", "score.py"):
        h.update(Path(__file__).with_name(mod).read_bytes())
    return h.hexdigest()
