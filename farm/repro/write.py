"""Writing a repro directory: the full reproducer, and the minimized one beside it.

Files: ``repro.py`` (the minimized script when minimizing; then ``repro_full.py`` is the
unminimized one), ``inputs.npz``, ``expected.npz``, ``export.bin`` (the farm's own
serialized artifact), ``program.jaxpr``, ``environment.json``; with ``--minimize`` also
``minimized.jaxpr``, ``min_*`` data files and ``steps.json``; ``run.sh``. Every script is
run before it is reported, in the environment its failure needs (``farm.repro.needs``: the
overlay on ``PYTHONPATH``, the jax/XLA/plugin/BLAS variables; environment.json's ``needs``,
what run.sh sets) and nothing else: no farm on the path, no planted faults. Where there is
an overlay it is run plainly too, which says whether the failure lives in it.
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from farm.errors import FarmError
from farm.repro import emit
from farm.repro.case import Case, artifact, check, export_platforms
from farm.repro.needs import Needs
from farm.repro.script import Check, Script

#: mpmath functions for a correctly rounded expected value of a one-equation program
_MPMATH = {"log1p": "log1p", "atanh": "atanh", "atan2": "atan2", "exp": "exp", "expm1": "expm1", "log": "log",
           "sin": "sin", "cos": "cos", "tan": "tan", "tanh": "tanh", "sinh": "sinh", "cosh": "cosh", "asin": "asin",
           "acos": "acos", "atan": "atan", "asinh": "asinh", "acosh": "acosh", "sqrt": "sqrt", "cbrt": "cbrt",
           "pow": "power", "erf": "erf", "erfc": "erfc"}


@dataclass(frozen=True)
class Written:
    """A written script and what running it standalone gave."""

    path: Path
    rc: int
    output: str
    plain_rc: int | None = None  # where it needs an overlay: its exit code run plainly, without it


def npz(path: Path, arrays: dict[str, Any]) -> None:
    """An .npz whose ml_dtypes arrays (bfloat16...) travel with their dtype names (as ``farm.formats.iofile``)."""
    arrays = {k: np.asarray(a) for k, a in arrays.items()}
    buf = io.BytesIO()
    np.savez(buf, __dtypes__=np.array([f"{k}={a.dtype.name}" for k, a in arrays.items()], dtype=np.str_), **arrays)
    path.write_bytes(buf.getvalue())


def _run(path: Path, env: dict[str, str], python: str, timeout_s: float) -> tuple[int, str]:
    try:
        p = subprocess.run([python, path.name], cwd=path.parent, env=env, capture_output=True, text=True,
                           timeout=timeout_s)
        return p.returncode, (p.stdout + p.stderr)[-3000:]
    except subprocess.TimeoutExpired:
        return -1, f"did not finish in {timeout_s:.0f} s"


def verify(path: Path, timeout_s: float = 300.0, python: str | None = None, needs: Needs | None = None) -> Written:
    """Run a script as a user would: its own directory, no farm on the path, no planted faults,
    in the environment its failure needs (``needs``: the overlay and variables run.sh sets;
    where there is an overlay, once more plainly, to say whether the failure lives in it);
    with ``python``: that interpreter (e.g. another jax version's venv)."""
    python = python or (needs.python if needs else sys.executable)
    rc, output = _run(path, needs.env() if needs else Needs(python).env(plain=True), python, timeout_s)
    plain = _run(path, needs.env(plain=True), python, timeout_s)[0] if needs and needs.overlay else None
    return Written(path, rc, output, plain)


def write_needs(needs: Needs, out: Path) -> None:
    """``run.sh``: the directory's scripts in the environment their failure needs."""
    sh = out / "run.sh"
    sh.write_text(needs.run_sh())
    sh.chmod(0o755)


def header(needs: Needs | None, base: str = "Needs only jax, jaxlib and numpy.") -> str:
    """What a script's docstring says it needs."""
    more = needs.header() if needs else ""
    return f"{base}\n{more}" if more else base


def _story(case: Case) -> str:
    r = case.failure
    h = case.harness
    cfg = ", ".join(f"{k}={v}" for k, v in case.settings.items()) or "default settings"
    lines = [f"The farm's harness {h.name} ({h.catalog} catalog, {h.primitive}, {h.dtype}): the {r.stage} stage on "
             f"{r.platform} is {r.status}.", f"Settings: {cfg}."]
    if r.error:
        lines += ["The farm saw:"] + textwrap.wrap(f"{r.error_type or ''}: {r.error}"[:600], 88,
                                                  initial_indent="    ", subsequent_indent="    ")
    if case.stored:
        lines.append(f"Stored run {case.stored.get('run')}: jax {case.stored.get('jax_version')}, "
                     f"jaxlib {case.stored.get('jaxlib_version')}.")
    return "\n".join(lines)


def _environment(case: Case, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    from farm.host import describe

    env = describe()
    r = case.failure
    return {"harness": case.harness.describe(), "settings": case.settings,
            "planted": os.environ.get("FARM_PLANT") or None,
            "failure": {"stage": r.stage, "platform": r.platform, "status": r.status, "error_type": r.error_type,
                        "error": r.error, "facts": dict(r.facts)},
            "environment": {k: env.get(k) for k in ("jax_version", "jaxlib_version", "python", "xla_flags",
                                                     "jax_config", "jaxlib_revision", "device_kinds", "farm_commit")},
            **({"needs": case.needs.to_dict()} if case.needs else {}),
            **({"stored_run": case.stored} if case.stored else {}), **(extra or {})}


def _platform(case: Case) -> str:
    p = case.failure.platform
    return p if p in ("cuda", "rocm", "tpu") and case.failure.stage == "crossexec" else "cpu"


def write_full(case: Case, program: Any, dyn: list[np.ndarray], out: Path, name: str = "repro.py") -> Written:
    """The unminimized reproducer: the farm's export artifact (or emitted code where the
    failure comes before there is one), its inputs and the expected side."""
    chk, expected = check(case, program.closed, dyn)
    more = invariant_side(case.harness.name, program.closed, dyn, chk, out)
    if more:  # those outputs are the invariant's: the values side leaves them out
        judged = more[0][0].invariant["outputs"].values()
        expected = [[] if k in judged else alts for k, alts in enumerate(expected)]
    platform = _platform(case)
    blob = artifact(case.outcome, "export")
    code, why = None, ""
    planted_export = os.environ.get("FARM_PLANT") and blob is not None and platform in export_platforms(case.outcome)
    if not planted_export:  # a planted fault lives in the farm's lowering: only its export has it (if any)
        try:
            code = emit.function(program.closed)
        except emit.Unemittable as e:
            why = str(e)
    if code is None:
        if blob is None or platform not in export_platforms(case.outcome):
            raise FarmError(f"{case.harness.name}: no export artifact for {platform} and no source form ({why})")
        (out / "export.bin").write_bytes(blob)
    npz(out / "inputs.npz", {f"in{i}": d for i, d in enumerate(dyn)})
    npz(out / "expected.npz", {f"out{i}_{j}": a for i, alts in enumerate(expected) for j, a in enumerate(alts)})
    (out / "program.jaxpr").write_text(str(program.closed) + "\n")
    (out / "environment.json").write_text(json.dumps(_environment(case), indent=1, default=str) + "\n")
    if case.needs:
        write_needs(case.needs, out)
    counts = [len(a) for a in expected]
    script = Script(
        title=f"Reproducer for {case.harness.name}: {case.failure.stage} on {case.failure.platform} {case.failure.status}",
        story=_story(case) + "\nGenerated by `farm repro`; the computation is "
              + ("the farm's serialized jax.export artifact (export.bin;\ndeserializing it needs the flatbuffers package "
                 "too)." if code is None else "the harness's program as jax.lax code."),
        settings=case.settings, platform=platform, check=chk, code=code,
        inputs=f'[load("inputs.npz")[f"in{{i}}"] for i in range({len(dyn)})]',
        expected=f'(lambda z: [[z[f"out{{i}}_{{j}}"] for j in range(k)] if k else None for i, k in enumerate({counts})])'
                 f'(load("expected.npz"))' if counts else "[]", more=more, header=header(case.needs))
    path = out / name
    path.write_text(script.render())
    return verify(path, needs=case.needs)


def invariant_side(name: str, closed: Any, dyn: list[np.ndarray], chk: Check, out: Path) -> list[tuple[Check, str]]:
    """The invariant side of a values check whose program has non-unique outputs (its data in
    invariant.npz), as ``Script.more``; none where every output is unique."""
    from farm.repro import invariant

    if chk.kind != "values" or chk.against not in ("the float64 reference",):
        return []
    try:
        inv = invariant.side(closed, dyn)
    except invariant.NoStandaloneCheck as e:
        raise FarmError(f"{name}: {e}") from None
    if inv is None:
        return []
    npz(out / "invariant.npz", {"operand": inv.data[0],
                                **{f"ref{i}": a for i, a in enumerate(inv.data[1:]) if a is not None}})
    src = (f'(lambda z: [z["operand"]] + [z.get(f"ref{{i}}") for i in range({len(inv.data) - 1})])'
           f'(load("invariant.npz"))')
    return [(inv.check, src)]


def correctly_rounded(closed: Any, args: list[np.ndarray]) -> np.ndarray | None:
    """A one-equation elementwise float program on scalars, evaluated by mpmath at 300 bits
    and rounded once to the output's dtype; None where that does not apply."""
    try:
        import mpmath
    except ImportError:
        return None
    j = closed.jaxpr
    if len(j.eqns) != 1 or len(j.outvars) != 1 or j.eqns[0].primitive.name not in _MPMATH:
        return None
    dt = np.dtype(j.outvars[0].aval.dtype)
    if dt not in (np.float64, np.float32) or any(np.shape(a) for a in args):
        return None
    fn = getattr(mpmath, _MPMATH[j.eqns[0].primitive.name])
    with mpmath.workprec(300):
        try:
            v = fn(*[mpmath.mpf(float(a)) for a in args])
        except (ValueError, ZeroDivisionError):
            return None
        if not isinstance(v, mpmath.mpf):
            return None
        return np.asarray(dt.type(float(v)) if dt == np.float64 else np.float32(mpmath.nstr(v, 40)))


def compact(title: str, story: str, settings: dict[str, str], code: str, args: list[np.ndarray],
            wants: list[np.ndarray], how: str, chk: Check, label: str = "f",
            needs: str = "Needs only jax, jaxlib and numpy.") -> str:
    """The few-line script for a one-output scalar failure (``label``: how the call is printed)."""
    names = [f"x{i}" if len(args) > 1 else "x" for i in range(len(args))]
    dt = np.asarray(wants[0]).dtype
    prelude = [f"os.environ.setdefault({k!r}, {v!r})" for k, v in settings.items() if k != "JAX_ENABLE_X64"]
    x64 = settings.get("JAX_ENABLE_X64") in ("1", "true", "True")
    lines = ["#!/usr/bin/env python3", f'"""{title}\n\n{story.rstrip()}\n\n{needs} '
             'Exit 1 while the failure is there, 0 once it is fixed.\n"""',
             "import os", "import sys", "",
             "sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # the script itself broke: exit 2, not 1",
             *prelude, "import jax",
             "import jax.numpy as jnp  # noqa: F401", "import numpy as np", "from jax import lax", ""]
    if x64:
        lines += ['jax.config.update("jax_enable_x64", True)', ""]
    lines += [code.rstrip(), ""]
    lines += [f"{n} = {emit.array(a)}" for n, a in zip(names, args)]
    lines += [f"got = np.asarray(jax.jit(f)({', '.join(names)}))"]
    want_src = [emit.array(np.asarray(w).astype(dt)) for w in wants]
    lines += [f"want = {want_src[0]}  # {how}"]
    if len(want_src) > 1:
        lines += [f"also = {want_src[1]}  # the reference with subnormals flushed to zero (also accepted)"]
    def tol(w: str) -> str:
        return f"max({chk.atol!r}, float(jnp.finfo({w}.dtype).tiny)) + {chk.rtol!r} * abs({w})"

    ok = "got == want or (np.isnan(got) and np.isnan(want)) or abs(got - want) <= " + tol("want")
    if len(want_src) > 1:
        ok = f"({ok}) or got == also or abs(got - also) <= {tol('also')}"
    args_fmt = ", ".join(f"{{{n}!r}}" for n in names)
    lines += [f"ok = bool({ok})"]
    if np.dtype(dt).kind == "f":
        lines += ["ulps = abs(float(got) - float(want)) / abs(float(np.spacing(want)))"]
        lines += [f'print(f"{label}({args_fmt}) = {{got.item()!r}}, expected {{want.item()!r}}: {{ulps:.0f}} ULP apart '
                  f'(the farm allows {round(chk.rtol / float(np.finfo(dt).eps))})")']
    else:
        lines += [f'print(f"{label}({args_fmt}) = {{got.item()!r}}, expected {{want.item()!r}}")']
    lines += ["sys.exit(0 if ok else 1)", ""]
    return "\n".join(lines)
