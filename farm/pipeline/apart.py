"""A stage known to kill the process, run in a process of its own.

A harness whose limitation says a stage aborts the process (``Limitation.crashes``: jax 0.12's
cuda/rocm cumsum module, ``chlo.scan``, aborts XLA:CPU's compiler) would take every other
record of the harness down with it: the worker dies and the harness is one ``crashed`` record.
Here that stage alone runs in a fresh Python (``python -m farm.pipeline.apart``): it traces the
harness again (by catalog and name, with the parent's inputs), lowers it for the platform,
compiles and runs the module on this backend and hands back the outputs. A death there is a
``crashed`` record of that stage, judged by the limitation like any failure; a clean run is
judged as crossexec always is, so a fixed XLA shows as ``unexpected_pass``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from farm.formats import iofile
from farm.judge import lost_record
from farm.results import Options, Record
from farm.stages.symbolic_apart import how_it_died

#: Seconds the separate process may take (importing jax and the catalog is most of it).
TIMEOUT_S = 300.0


def aborts(h: Any, platform: str) -> bool:
    """Whether ``h``'s module for ``platform`` is known to kill the process compiling it here (its
    crossexec limitation ``crashes``): that module is only ever compiled in a process of its own
    (the static crossexec here, its symbolic calls in ``farm.stages.symbolic_apart``)."""
    lim = h.limitation(platform, "crossexec")
    return lim is not None and lim.crashes


def run(h: Any, platform: str, dyn: list[Any], opts: Options) -> tuple[Record, Record | None, list[np.ndarray] | None]:
    """(compile record, execute record, outputs) of ``h``'s ``platform`` module run here in a
    separate process; a process that dies gives a ``crashed`` compile record and nothing else."""
    import jax

    with tempfile.TemporaryDirectory(prefix="farm-apart-") as d:
        (Path(d) / "in.npz").write_bytes(iofile.pack(dyn, []))  # ml_dtypes (bfloat16) keep their dtypes
        env = {**os.environ, "JAX_ENABLE_X64": "1" if jax.config.jax_enable_x64 else "0",
               "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS") or "cpu"}
        cmd = [sys.executable, "-m", "farm.pipeline.apart", h.catalog, h.name, platform, str(opts.repeats), d]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
        except subprocess.TimeoutExpired:
            hung = lost_record("crossexec", platform, hung=True,
                                        why=f"the separate process gave no result in {TIMEOUT_S:.0f}s")
            return Record.from_dict({**hung, "seconds": TIMEOUT_S, "facts": {"apart": True}}), None, None
        out = Path(d) / "out.json"
        if p.returncode != 0 or not out.exists():
            died = lost_record("crossexec", platform, hung=False, why=_why(p))
            return Record.from_dict({**died, "error_type": "Crashed",
                                     "facts": {"apart": True, "returncode": p.returncode}}), None, None
        done = json.loads(out.read_text())
        c = Record.from_dict(done["compile"])
        e = Record.from_dict(done["execute"]) if done.get("execute") else None
        arrays = None
        if done.get("outputs"):
            _, arrays = iofile.unpack((Path(d) / "out.npz").read_bytes())
        return c, e, arrays


def _why(p: subprocess.CompletedProcess[str]) -> str:
    """How the process died: the signal, and XLA's check failure (or the last line) it printed."""
    return f"the module's compile or run in a separate process died ({how_it_died(p)}"


def _main(catalog_name: str, name: str, platform: str, repeats: str, where: str) -> int:
    from farm import catalog
    from farm.pipeline.compile_cache import compile_execute
    from farm.stages import lower, trace

    d = Path(where)
    # the exact name: the name filter matches substrings (cumsum_float32_7x3 is in cumsum_float32_7x3_axis=0)
    found = [h for h in catalog.select(catalog.Filters(catalog=catalog_name, name=(name,))) if h.name == name]
    if len(found) != 1:  # an error of its own, never a death a limitation could take for the crash
        lost = Record("crossexec", platform, "error", error_type="NotFound",
                      error=f"{name} is not one harness of the {catalog_name} catalog in a separate process")
        (d / "out.json").write_text(json.dumps({"compile": lost.to_dict(), "execute": None}))
        return 0
    h = found[0]
    dyn, _ = iofile.unpack((d / "in.npz").read_bytes())
    lo = lower.run(trace.run(h, h.make_args()), platform)
    c, e = compile_execute(lo, dyn, Options(repeats=int(repeats), warmup=0), "crossexec")
    done: dict[str, Any] = {"compile": c.with_status(c.status, handle=None).to_dict(),
                            "execute": e.with_status(e.status, handle=None).to_dict() if e is not None else None}
    arrays = getattr(getattr(e, "handle", None), "arrays", None)
    if arrays is not None:
        (d / "out.npz").write_bytes(iofile.pack([], arrays))
        done["outputs"] = True
    (d / "out.json").write_text(json.dumps(done, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(_main(*sys.argv[1:]))
