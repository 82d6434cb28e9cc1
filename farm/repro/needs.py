"""The environment a failure lives in, which a reproducer keeps: environment.json's
``needs``, the script's header, ``run.sh``, and the environment ``farm repro`` verifies
each script in.

A failure need not live in jax's installed trees. An engineer testing a lowering change
runs with a jax checkout or a patched rule on ``PYTHONPATH``, a ``sitecustomize``, a
``jax_plugins`` module, or ``XLA_FLAGS``; a script run without them says "fixed". What
shapes a result is what the result key already accounts for (``farm.cache.hermetic``),
and the same notion decides what a reproducer needs:

- the overlay: every ``PYTHONPATH`` entry except the farm's own checkout, the site
  directories and the standard library (those come with the interpreter), plus the
  directory of a loaded ``sitecustomize``/``usercustomize`` and the parent of each
  ``jax_plugins`` namespace directory where they lie outside those; the loaded modules
  that come from it are listed by name (``modules``);
- the variables: ``hermetic.environment()`` (``JAX_``, ``XLA_``, the plugins', TPU,
  CUDA and ROCm variables, the BLAS/OpenMP ones) without the farm's own (``FARM_PLANT``:
  a planted fault is baked into the artifact a script runs), with the script's settings
  (its ``XLA_FLAGS`` without the farm's forced device count).

The farm itself is never on the path a script is verified with: it must stand alone.
Imports no jax.
"""
from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from farm.cache import hermetic

#: The farm's checkout: never part of a script's environment
FARM_ROOT = os.path.realpath(Path(__file__).resolve().parents[2])
#: What every verification keeps of the caller's environment (plus ``needs``)
BASE = ("PATH", "HOME", "LANG", "TMPDIR")
#: Modules a Python start-up imports from the path by name
STARTUP = ("sitecustomize", "usercustomize")


@dataclass(frozen=True)
class Needs:
    """What a reproducer needs beyond jax, jaxlib and numpy on ``python``."""

    python: str
    pythonpath: tuple[str, ...] = ()  # the overlay, in PYTHONPATH's order
    modules: dict[str, str] = field(default_factory=dict)  # loaded module -> its file, from the overlay
    plugins: tuple[str, ...] = ()  # jax_plugins namespace directories
    variables: dict[str, str] = field(default_factory=dict)

    @property
    def overlay(self) -> bool:
        return bool(self.pythonpath)

    def env(self, environ: Mapping[str, str] | None = None, *, plain: bool = False) -> dict[str, str]:
        """The environment a script is verified in: ``BASE`` of ``environ`` and, unless
        ``plain``, the overlay and the variables."""
        environ = os.environ if environ is None else environ
        out = {k: environ[k] for k in BASE if k in environ}
        if not plain:
            out.update(self.variables)
            if self.pythonpath:
                out["PYTHONPATH"] = os.pathsep.join(self.pythonpath)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"python": self.python, "pythonpath": list(self.pythonpath), "modules": dict(self.modules),
                "jax_plugins": list(self.plugins), "variables": dict(self.variables)}

    def header(self) -> str:
        """What the script's docstring says about it ('' where it needs nothing)."""
        if not (self.pythonpath or self.variables):
            return ""
        lines = ["Its failure lives in this environment (environment.json, \"needs\"); ./run.sh runs it there:"]
        if self.pythonpath:
            lines.append(f"    PYTHONPATH={os.pathsep.join(self.pythonpath)}")
            lines += [f"      ({name}: {path})" for name, path in sorted(self.modules.items())]
        lines += [f"    {k}={v}" for k, v in sorted(self.variables.items())]
        lines.append("Run plainly (python3 SCRIPT) it has none of them.")
        return "\n".join(lines)

    def run_sh(self) -> str:
        """``run.sh``: a script of this directory in exactly the environment it was verified in."""
        assigns = ([f"PYTHONPATH={shlex.quote(os.pathsep.join(self.pythonpath))}"] if self.pythonpath else []) + \
                  [f"{k}={shlex.quote(v)}" for k, v in sorted(self.variables.items())]
        lines = ["#!/bin/sh",
                 "# Runs a reproducer of this directory in the environment its failure needs (environment.json,",
                 "# \"needs\"): the overlay on PYTHONPATH and the jax/XLA/plugin/BLAS variables, nothing else of",
                 "# this shell's, as `farm repro` verified it. Exit 1 while the failure is there, 0 once fixed.",
                 "#   ./run.sh                     repro.py",
                 "#   ./run.sh repro_full.py       another script of this directory",
                 "#   PYTHON=python3 ./run.sh      another interpreter (default: the one farm repro used)",
                 'cd "$(dirname "$0")" || exit 2',
                 'exec env -i PATH="$PATH" HOME="$HOME" LANG="${LANG:-C.UTF-8}" TMPDIR="${TMPDIR:-/tmp}" \\',
                 *(f"    {a} \\" for a in assigns),
                 f'    "${{PYTHON:-{self.python}}}" "${{1:-repro.py}}"', ""]
        return "\n".join(lines)


def _inside(path: str, dirs: list[str]) -> bool:
    return any(path == d or path.startswith(d + os.sep) for d in dirs)


def capture(settings: Mapping[str, str] | None = None, replaces: tuple[str, ...] = (),
            environ: Mapping[str, str] | None = None, python: str | None = None) -> Needs:
    """The ``Needs`` of this process (its loaded start-up modules, its ``jax_plugins``) in
    ``environ`` (default: its own): ``settings`` are the script's own configuration, which
    replace the variables named in ``replaces``."""
    environ = os.environ if environ is None else environ
    given = set(hermetic.site_dirs()) | set(hermetic.stdlib_dirs())
    skip = sorted(given | {FARM_ROOT})

    def overlay(d: str) -> str | None:
        real = os.path.realpath(d) if d else ""
        return real if real and os.path.isdir(real) and real not in skip else None

    path = [p for p in (overlay(d) for d in environ.get("PYTHONPATH", "").split(os.pathsep)) if p]
    for name in STARTUP:  # a start-up module found elsewhere (e.g. through a .pth file) comes with its directory
        f = getattr(sys.modules.get(name), "__file__", None)
        if isinstance(f, str) and not _inside(os.path.realpath(f), sorted(given)):
            d = overlay(os.path.dirname(os.path.realpath(f)))
            path += [d] if d else []
    plugins = tuple(hermetic.namespace_dirs("jax_plugins"))
    for d in plugins:
        if not _inside(d, sorted(given)):
            p = overlay(os.path.dirname(d))
            path += [p] if p else []
    path = list(dict.fromkeys(path))
    modules = {}
    for name, m in list(sys.modules.items()):
        f = getattr(m, "__file__", None)
        if isinstance(f, str) and name not in hermetic.ENTRY_MODULES and _inside(os.path.realpath(f), path) \
                and ("." not in name or name in STARTUP):
            modules[name] = os.path.realpath(f)
    variables = {k: v for k, v in hermetic.environment(environ).items() if k not in hermetic.FARM_VARS}
    for k in replaces:
        variables.pop(k, None)  # the script's settings decide these (the farm's forced device count left out)
    variables.update(settings or {})
    return Needs(python or sys.executable, tuple(path), modules, plugins, variables)
