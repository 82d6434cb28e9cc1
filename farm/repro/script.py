"""The ``repro.py`` files: standalone scripts that need only jax, jaxlib and numpy.

A script rebuilds the failing computation (from the serialized ``jax.export`` artifact,
or from emitted ``jax.lax`` code), runs it on the recorded inputs, and judges it the
way the farm did: against the expected values under the same tolerance (an element
agrees if it is close to the float64 reference or to its subnormal-flushing variant),
or by the error or the crash it must still raise. It prints the disagreement and exits
1 while the failure is there, 0 once it is fixed.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from farm.repro.invariant import CODE as INVARIANT_CODE
from farm.repro.verdict import Check

#: The judging code every script carries (a copy of ``farm.judge.tolerance``'s
#: pointwise rule, so that the script needs no farm).
CHECK_CODE = '''
def wide(x):
    x = np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64) if x.dtype.kind not in "biu" else x


def mismatched(got, want, dtype, CHECK=CHECK):
    """Elements of ``got`` that disagree with ``want`` (rounded to ``dtype``) under CHECK's tolerance."""
    dt = np.dtype(dtype)
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return np.ones(max(got.size, want.size, 1), bool)
    if CHECK["exact"] or dt.kind in "biu":
        return ~((got == want.astype(dt)) | (np.isnan(wide(got)) & np.isnan(wide(want))))
    with np.errstate(all="ignore"):
        g, r = wide(got), wide(want.astype(dt))
        part = np.float32 if dt == np.complex64 else (np.float64 if dt.kind == "c" else dt)
        tiny = float(ml_dtypes.finfo(part).tiny)
        scale = 1.0 if CHECK["pointwise"] else float(np.max(np.abs(r[np.isfinite(r)]), initial=1.0))
        close = np.abs(g - r) <= np.maximum(CHECK["atol"] * scale, tiny) + CHECK["rtol"] * np.abs(r)
        bad = ~(close | (g == r) | (np.isnan(g) & np.isnan(r)))
        if CHECK["signed_zeros"] and CHECK["pointwise"] and dt.kind == "f":
            bad |= (g == 0) & (r == 0) & (np.signbit(g) != np.signbit(r))
    return bad


def judge(outs, expected, inputs, CHECK=CHECK):
    """Print every output's disagreement with one expected side; True if there is one."""
    if CHECK["kind"] == "invariant":
        return invariant_failed(outs, expected, CHECK)
    failed = False
    for i, got in enumerate(outs):
        want = expected[i]
        if want is None:  # not compared on this side (e.g. judged by an invariant)
            continue
        bad = mismatched(got, want[0], got.dtype, CHECK)
        for alt in want[1:]:  # e.g. the reference with subnormals flushed to zero
            bad &= mismatched(got, alt, got.dtype, CHECK)
        if bad.any():
            failed = True
            print(f"output {i}: {int(bad.sum())} of {bad.size} elements disagree with {CHECK['against']} "
                  f"(rtol {CHECK['rtol']:.3g}, atol {CHECK['atol']:.3g})")
            bad = bad.reshape(np.shape(got)) if bad.size == np.size(got) else bad
            for idx in ([()] if bad.ndim == 0 else [tuple(j) for j in np.argwhere(bad)])[:5]:
                g, w = np.asarray(got)[idx], np.asarray(want[0])[idx]
                ulp = ""
                if np.asarray(got).dtype.kind == "f" and np.isfinite(wide(w)) and np.isfinite(wide(g)):
                    ulp = f", {abs(float(wide(g)) - float(wide(w))) / abs(float(np.spacing(np.asarray(w).astype(got.dtype)))):.0f} ULP"
                args = ", ".join(repr(np.asarray(x)[idx]) if np.shape(x) == np.shape(got) else
                                 (repr(x) if np.size(x) <= 4 else f"{np.asarray(x).dtype}{list(np.shape(x))}") for x in inputs)
                print(f"  at {tuple(int(j) for j in idx)}: inputs ({args}) got {g!r}, expected {w!r}{ulp}")
    return failed
'''

IMPORTS = '''import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETTINGS = {settings}  # the configuration it failed in: jax reads these at import
for _k, _v in SETTINGS.items():
    os.environ.setdefault(_k, _v)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402,F401
import ml_dtypes  # noqa: E402  (installed with jax)
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402,F401
'''

LOAD_CODE = '''
def native():
    """Whether PLATFORM's module is this backend's own (jax calls a CUDA or ROCm backend "gpu")."""
    here = jax.default_backend()
    return PLATFORM == here or (here == "gpu" and PLATFORM in ("cuda", "rocm"))

def load(name):
    """The arrays of an .npz beside this script, bfloat16/float8 restored from their dtype names."""
    with np.load(HERE / name, allow_pickle=False) as z:
        names = dict(s.split("=", 1) for s in z["__dtypes__"].tolist()) if "__dtypes__" in z.files else {}
        arrays = {k: z[k] for k in z.files if k != "__dtypes__"}
    for k, dtype in names.items():
        if arrays[k].dtype.kind == "V":
            arrays[k] = arrays[k].view(getattr(ml_dtypes, dtype))
    return arrays
'''

EXPORT_CODE = '''
def prepare(inputs):
    """The serialized jax.export artifact the farm made (deserializing needs the flatbuffers
    package, an optional dependency of jax); another platform's module is lowered for that
    platform and compiled by this host's backend (what the farm's crossexec does)."""
    exported = jax.export.deserialize(bytearray((HERE / "{blob}").read_bytes()))
    if native():
        return exported.call
    return jax.jit(exported.call).trace(*inputs).lower(lowering_platforms=(PLATFORM,)).compile()
'''

CODE_CODE = '''

def prepare(inputs):
    """f, jitted; another platform's lowering is compiled by this host's backend (the farm's crossexec)."""
    if native():
        return jax.jit(f)
    return lambda *xs: jax.jit(f).trace(*xs).lower(lowering_platforms=(PLATFORM,)).compile()(*xs)
'''

MAIN_CODE = '''

def main():
    kind = CHECK["kind"]
    if kind in ("crash", "timeout") and "--child" not in sys.argv:
        import subprocess
        try:
            rc = subprocess.run([sys.executable, __file__, "--child"], timeout=CHECK["timeout_s"]).returncode
        except subprocess.TimeoutExpired:
            print("still fails: the computation did not finish"); return 1
        if rc not in (0, 1, 2):
            print(f"still fails: the process running the computation died (exit code {{rc}})"); return 1
        print("fixed: the computation ran to the end" if rc == 0 else "the child could not run"); return rc
    inputs = INPUTS()
    try:
        outs = [np.asarray(o) for o in jax.tree.leaves(prepare(inputs)(*inputs))]
    except ImportError:  # a missing package (flatbuffers): the script cannot run, not the failure
        raise
    except Exception as e:
        if kind == "error" and (not CHECK.get("match_type") or type(e).__name__ == CHECK["error_type"]):
            print(f"still fails: {{type(e).__name__}}: {{e}}"[:2000]); return 1
        raise
    if kind not in ("values", "invariant"):
        print("fixed: the computation ran without " + ("an error" if kind == "error" else "dying")); return 0
    failed = False
    for check, expected in SIDES:  # every expected side is judged; any disagreement is the failure
        failed = judge(outs, expected(), inputs, check) or failed
    print("still fails" if failed else "fixed: every output agrees")
    return 1 if failed else 0
'''

#: The end of every emitted script: main()'s status, or 2 where the script itself broke.
RUN_CODE = '''

if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # the script itself broke: not the failure it reproduces
        import traceback
        traceback.print_exc()
        print("the reproducer could not run (exit 2): see the error above")
        status = 2
    sys.exit(status)
'''


@dataclass(frozen=True)
class Script:
    """What one ``repro.py`` says and does."""

    title: str
    story: str  # the docstring's body: what the farm saw, where
    settings: dict[str, str]
    platform: str
    check: Check
    code: str | None = None  # emitted ``def f(...)``; None: the export artifact ``blob``
    blob: str = "export.bin"
    inputs: str = ""  # source of INPUTS(): a list of arrays
    expected: str = ""  # source of EXPECTED(): per output, [reference, alternatives...]
    notes: list[str] = field(default_factory=list)
    more: list[tuple[Check, str]] = field(default_factory=list)  # further expected sides: (check, source)
    header: str = "Needs only jax, jaxlib and numpy."
    prepare: str | None = None  # source of prepare(inputs) (and what it needs) in place of the export's or f's

    def render(self) -> str:
        check = _literal(self.check.to_dict())
        sides = [("CHECK", "EXPECTED")] + [(f"CHECK_{i}", f"EXPECTED_{i}") for i in range(2, len(self.more) + 2)]
        uses_invariant = any(c.kind == "invariant" for c in [self.check, *(c for c, _ in self.more)])
        parts = [
            "#!/usr/bin/env python3",
            f'"""{self.title}\n\n{self.story.rstrip()}\n\n{self.header} Exit 1 while the failure is there, '
            f'0 once it is fixed.\n"""',
            IMPORTS.format(settings=repr(self.settings)),
            f"PLATFORM = {self.platform!r}  # whose module runs here",
            f"CHECK = {check}",
            *(f"CHECK_{i} = {_literal(c.to_dict())}" for i, (c, _) in enumerate(self.more, start=2)),
            *(f"# {n}" for n in self.notes),
            LOAD_CODE,
        ]
        if self.prepare is not None:  # e.g. a symbolic export of f (farm.repro.symbolic)
            parts += ["\n" + self.code.rstrip() + "\n"] if self.code is not None else []
            parts.append(self.prepare)
        elif self.code is None:
            parts.append(EXPORT_CODE.format(blob=self.blob))
        else:
            parts.append("\n" + self.code.rstrip() + "\n" + CODE_CODE)
        parts += [f"\ndef INPUTS():\n    return {self.inputs}\n", f"\ndef EXPECTED():\n    return {self.expected or '[]'}\n"]
        parts += [f"\ndef EXPECTED_{i}():\n    return {src}\n" for i, (_, src) in enumerate(self.more, start=2)]
        parts += [f"\nSIDES = [{', '.join(f'({c}, {e})' for c, e in sides)}]\n", CHECK_CODE]
        if uses_invariant:
            parts.append(INVARIANT_CODE)
        parts.append(MAIN_CODE.format())
        parts.append(RUN_CODE)
        return "\n".join(parts)


def _literal(d: dict[str, Any]) -> str:
    """A dict as Python source (JSON's literals spelled as Python's)."""
    return json.dumps(d, indent=None).replace("null", "None").replace("true", "True").replace("false", "False")
