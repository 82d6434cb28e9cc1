"""A platform's symbolic module called in a process of its own, where its static module is known
to kill the process that compiles it (``Limitation.crashes`` on the platform's crossexec: jax
0.12's cuda/rocm ``chlo.scan`` modules abort XLA:CPU's compiler). In the worker, the abort would
take every record of the harness down with it; here it is that call's ``crashed`` record, judged
by the limitation like any failure, and a call that returns is judged as every call is (a fixed
XLA shows).

``python -m farm.stages.symbolic_apart DIR``: DIR holds ``exp.bin`` (the serialized module,
relabelled for the CPU), ``rows.npz`` (``farm.formats.iofile``: ml_dtypes keep their dtypes) and
``points.json`` (each point's label and argument count); the child writes ``out.npz`` and
``out.json`` (each label's output count, or the error it raised).
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

#: Seconds the separate process may take (importing jax and the farm is most of it).
TIMEOUT_S = 300.0


def call(here: Any, rows: list[tuple[str, list[np.ndarray]]]) -> tuple[dict[str, list[np.ndarray]], dict[str, str]]:
    """``here`` (an ``Exported`` the CPU runs) called at each (label, arguments) in a fresh
    process: ({label: outputs}, {label: the error a call raised}). Raises ``RuntimeError`` (with
    the child's last words: XLA's check failure) where the process dies, ``TimeoutError`` where it hangs."""
    import jax

    with tempfile.TemporaryDirectory(prefix="farm-symbolic-apart-") as tmp:
        d = Path(tmp)
        (d / "exp.bin").write_bytes(bytes(here.serialize()))
        (d / "rows.npz").write_bytes(iofile.pack([a for _, args in rows for a in args], []))
        (d / "points.json").write_text(json.dumps([[lab, len(args)] for lab, args in rows]))
        env = {**os.environ, "JAX_ENABLE_X64": "1" if jax.config.jax_enable_x64 else "0",
               "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS") or "cpu"}
        try:
            p = subprocess.run([sys.executable, "-m", "farm.stages.symbolic_apart", str(d)], capture_output=True,
                               text=True, timeout=TIMEOUT_S, env=env)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"the separate process gave no result in {TIMEOUT_S:.0f}s") from None
        if p.returncode != 0 or not (d / "out.json").exists():
            raise RuntimeError(f"the separate process died ({how_it_died(p)})")
        done = json.loads((d / "out.json").read_text())
        outs: dict[str, list[np.ndarray]] = {}
        raised: dict[str, str] = {}
        _, got = iofile.unpack((d / "out.npz").read_bytes())
        i = 0
        for lab, n in done["counts"]:
            if isinstance(n, str):
                raised[lab] = n
                continue
            outs[lab], i = got[i:i + n], i + n
        return outs, raised


def how_it_died(p: subprocess.CompletedProcess[str]) -> str:
    """The signal (or exit code) and XLA's check failure (or the last line) a dead process printed;
    the frames of a check failure's stack trace (``@ 0x...``) are not last words."""
    how = f"killed by signal {-p.returncode}" if p.returncode < 0 else f"exit {p.returncode}"
    lines = [ln for ln in (p.stderr or "").splitlines() if ln.strip() and not ln.lstrip().startswith("@")]
    check = next((ln for ln in lines if "Check failed" in ln), lines[-1] if lines else "")
    return f"{how}): {check.strip()[:500]}"


def _main(d: Path) -> None:
    import jax
    from jax import export

    from farm.stages.compile import checked_call

    here = export.deserialize(bytearray((d / "exp.bin").read_bytes()))
    flat, _ = iofile.unpack((d / "rows.npz").read_bytes())
    counts: list[list[Any]] = []
    outs: list[np.ndarray] = []
    i = 0
    for lab, n in json.loads((d / "points.json").read_text()):
        args, i = flat[i:i + n], i + n
        try:
            got = [np.asarray(o) for o in jax.tree.leaves(checked_call(here.call, *args))]
        except Exception as e:  # noqa: BLE001  the parent's judge asks whether it should have
            counts.append([lab, f"{type(e).__name__}: {str(e)[:300]}"])
            continue
        counts.append([lab, len(got)])
        outs += got
    (d / "out.npz").write_bytes(iofile.pack([], outs))
    (d / "out.json").write_text(json.dumps({"counts": counts}))


if __name__ == "__main__":
    _main(Path(sys.argv[1]))
