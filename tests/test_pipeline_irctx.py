"""Reusing JAX's MLIR context across lowerings changes no module (farm.pipeline.irctx)."""
from __future__ import annotations

import subprocess
import sys

CODE = r"""
import hashlib, sys
sys.path.insert(0, {root!r})
if {patch}:
    from farm.pipeline import irctx; assert irctx.install(every=3)
from farm import catalog
from farm.pipeline import run_harness
from farm.results import Options
hs = catalog.select(catalog.Filters.parse(primitive="sin,cumsum,sort,dot_general,cholesky", dtype="float32"))
sig = hashlib.sha256()
for h in hs:
    for r in run_harness(h, Options(repeats=1)).records:
        sig.update(repr((h.name, r.stage, r.platform, r.status, r.facts.get("module_sha256"),
                         r.facts.get("custom_calls"), r.facts.get("non_stablehlo"))).encode())
print(len(hs), sig.hexdigest())
"""


def _run(patch: bool) -> str:
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", CODE.format(root=root, patch=patch)], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def test_shared_context_gives_identical_modules_and_verdicts() -> None:
    plain, shared = _run(False), _run(True)
    assert int(plain.split()[0]) >= 5
    assert plain == shared


def test_install_is_idempotent_and_reversible() -> None:
    from jax._src.interpreters import mlir

    from farm.pipeline import irctx

    # a worker run in this process (standalone or in-process tests) may have installed it already
    was_installed = irctx._STATE["installed"]
    irctx.uninstall()
    before = mlir.make_ir_context
    made = []

    def counting():  # jax's own, counted: whether jax hands out a context it already made is its affair
        made.append(before())
        return made[-1]

    mlir.make_ir_context = counting
    try:
        assert irctx.install(every=2) and irctx.install(every=2)
        assert mlir.make_ir_context is not counting
        a, b, c = mlir.make_ir_context(), mlir.make_ir_context(), mlir.make_ir_context()
        assert a is b is made[0]
        assert len(made) == 2 and c is made[1]  # replaced after `every` uses
    finally:
        irctx.uninstall()
        assert mlir.make_ir_context is counting
        mlir.make_ir_context = before
        if was_installed:
            irctx.install()
