"""What else a process runs with: every Python module it has loaded and every
environment variable jax, XLA or a PJRT plugin reads. Both go into the result key
(``farm.cache.key``), so code that patches jax from outside the hashed trees
(a sitecustomize, a ``.pth`` file, an overlay directory on ``PYTHONPATH``, a
``jax_plugins`` namespace module that is no installed distribution, a ``--modules``
module) or a flag that is on no fixed list cannot be served a stale result.

Loaded modules (``loaded_digest``): every file in ``sys.modules`` is accounted for, and
the digest stays the same in the driver (which looks results up) and in the workers
(which store them) although the two load different things:

- files of the trees hashed elsewhere: jax, jaxlib and the plugins, numpy, scipy and
  ml_dtypes (``key.installation``), the farm's code that shapes results
  (``FARM_CODE``) and the harness family modules (each harness's own digest);
- files of an installed distribution in the site directories whose content is the
  sha256 its ``RECORD`` lists: covered by the identity (name, version, ``RECORD``
  digest) of *every* distribution installed there, loaded or not, so the driver's
  SQLAlchemy and a worker's Ray are in both keys alike. A file edited in place no
  longer matches its ``RECORD`` and is hashed on its own;
- the standard library: its whole tree (``.py`` and extension modules) is hashed, and
  so is every ``.pth`` file of the site directories and every module a ``jax_plugins``
  namespace directory holds (jax imports them when its backends start: a worker has,
  the driver may not have);
- everything else is hashed by module name and content: that is how overlays,
  sitecustomize, usercustomize and ``--modules`` modules get in.

Left out (``NOT_SHAPING``): the farm's own packages, whose result-shaping part is hashed
whole in ``FARM_CODE`` and the harness digests, while the rest (the CLI, ``farm.run``,
``farm.store``, the dashboards, the test suite) only reads or schedules results; and the
process's entry script (``__main__``: the farm CLI, Ray's worker loop or a
multiprocessing child). The digest is memoized per process by the set of loaded files
and recomputed only when ``sys.modules`` has changed size; file contents are memoized by
path, size and mtime like every other digest (``key.FILES``).

Environment (``environment``): every variable whose name starts with one of
``ENV_PREFIXES``, found by reading jax 0.10.2 and jaxlib (``os.getenv``/``os.environ``
calls and the strings of jaxlib's extension) and the plugins' documentation:

- ``JAX_``: every jax config option reads ``JAX_<NAME>`` (``jax/_src/config.py``), and
  ``xla_bridge`` reads ``JAX_PLATFORM_NAME``, ``JAX_BACKEND_TARGET``;
- ``XLA_``: ``XLA_FLAGS``, ``XLA_PYTHON_CLIENT_*`` (allocator, preallocation), ``XLA_CLIENT_MEM_FRACTION``;
- ``TF_``: XLA's runtime reads ``TF_*`` (``TF_XLA_FLAGS``, ...);
- ``PJRT_``: ``PJRT_NAMES_AND_LIBRARY_PATHS`` (plugins loaded by path), ``PJRT_NPROC``;
  ``ENABLE_PJRT_COMPATIBILITY`` (plugin version checks);
- ``TPU_``, ``LIBTPU_``, ``MEGASCALE_``: libtpu (``LIBTPU_INIT_ARGS``, topology);
- ``CUDA_``, ``NVIDIA_``, ``NCCL_``, ``CUDNN_``, ``MOSAIC_GPU_``: the CUDA plugin
  (``NVIDIA_TF32_OVERRIDE`` changes matmul numerics);
- ``ROCM_``, ``HIP_``, ``HSA_``, ``MIOPEN_``, ``ROCR_``: the ROCm plugin;
- ``OPENBLAS_``, ``GOTO_``, ``BLIS_``, ``MKL_``, ``OMP_``, ``KMP_``, ``VECLIB_``: the BLAS
  behind NumPy and SciPy (the float64 reference, invariants) and XLA CPU's threads: the
  kernel a BLAS picks (``OPENBLAS_CORETYPE``, ``MKL_CBWR``, ``MKL_ENABLE_INSTRUCTIONS``)
  and the thread count (``OMP_NUM_THREADS``...) change the order of a sum's terms.

Not keyed (``ENV_IGNORED``): where a process was placed (``*_VISIBLE_DEVICES``,
``TPU_VISIBLE_CHIPS``: the device kind is keyed) and log verbosity (``TF_CPP_*``).

No database, Ray or jax imports: device hosts use this too.
"""
from __future__ import annotations

import base64
import csv
import fnmatch
import hashlib
import importlib.util
import json
import os
import re
import site
import sys
import sysconfig
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

#: Environment variable prefixes that jax, XLA or a PJRT plugin read (see the module docstring).
ENV_PREFIXES = ("JAX_", "XLA_", "TF_", "PJRT_", "ENABLE_PJRT_", "TPU_", "LIBTPU", "MEGASCALE_", "CUDA_", "NVIDIA_",
                "NCCL_", "CUDNN_", "MOSAIC_GPU_", "ROCM_", "HIP_", "HSA_", "MIOPEN_", "ROCR_",
                "OPENBLAS_", "GOTO_", "BLIS_", "MKL_", "OMP_", "KMP_", "VECLIB_")
#: Placement (the device kind is keyed instead) and log verbosity: read, but change no result.
ENV_IGNORED = re.compile(r"(_VISIBLE_DEVICES|_VISIBLE_CHIPS|^TF_CPP_[A-Z_]*)$")
#: The farm's own variables that change what a worker computes.
FARM_VARS = ("FARM_PLANT",)

#: The farm's own packages (relative to the repository root): never a loaded-module part.
#: What of them shapes a result is hashed whole, loaded or not: ``FARM_CODE`` holds every
#: farm module a worker imports (checked by tests/test_result_cache.py) and each harness's
#: digest its family module. The rest (the CLI, run, store, analysis, coverage, the
#: dashboards, the test suite) only reads or schedules results, and the driver, which looks
#: results up, loads any of it that a worker never does: listing them one by one missed
#: ``farm.catalog.coverage`` and every lookup after ``farm coverage`` ran in-process missed.
NOT_SHAPING = ("farm/*", "workers/*", "harnesses/*", "dashboards/*", "tests/*")
#: Entry scripts: the runner (farm's CLI, Ray's worker loop, a multiprocessing child).
ENTRY_MODULES = ("__main__", "__mp_main__")
#: Standard-library directories that hold no standard library (or only its tests).
_STDLIB_SKIP = {"site-packages", "dist-packages", "__pycache__", "test", "tests", "idle_test"}


def environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of ``environ`` (default: this process's) that can change a result."""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items()
            if (k.startswith(ENV_PREFIXES) and not ENV_IGNORED.search(k)) or k in FARM_VARS}


# ------------------------------------------------------------------ the static part
def site_dirs() -> list[str]:
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
        dirs.append(site.getusersitepackages())
    return [os.path.realpath(d) for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def stdlib_dirs() -> list[str]:
    paths = sysconfig.get_paths()
    dirs = {os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib") if paths.get(k)}
    return sorted(d for d in dirs if os.path.isdir(d))


def _record_b64(hexd: str) -> str:
    """A sha256 as RECORD writes it (urlsafe base64, unpadded)."""
    return base64.urlsafe_b64encode(bytes.fromhex(hexd)).decode().rstrip("=")


class Static:
    """What every process of this environment shares, whatever it loaded: the
    distributions of the site directories (and the file -> sha256 index of their
    RECORDs), the standard library, the ``.pth`` files and the ``jax_plugins`` namespace."""

    def __init__(self, sha: Callable[[str], str], tree: Callable[[str, set[str]], str],
                 sites: list[str] | None = None) -> None:
        self.records: dict[str, str] = {}  # path -> sha256 as RECORD lists it
        dists: list[tuple[str, str]] = []
        self.sites = site_dirs() if sites is None else [os.path.realpath(s) for s in sites]
        for s in self.sites:
            for info in _glob(s, "*.dist-info") + _glob(s, "*.egg-info"):
                record = _read(os.path.join(info, "RECORD"))
                meta = record if record is not None else _read(os.path.join(info, "PKG-INFO")) or ""
                dists.append((os.path.basename(info), hashlib.sha256(meta.encode()).hexdigest()))
                for row in csv.reader((record or "").splitlines()):
                    if len(row) >= 2 and row[1].startswith("sha256="):
                        path = s + os.sep + row[0] if ".." not in row[0] else os.path.normpath(os.path.join(s, row[0]))
                        self.records[path] = row[1][7:].rstrip("=")
        # names and contents, never where they are: hosts with the same environment elsewhere agree
        pth = sorted((os.path.basename(p), sha(p)) for s in self.sites for p in _glob(s, "*.pth"))
        self.stdlib = [d for d in stdlib_dirs() if d not in self.sites]
        stdlib = sorted(tree(d, _STDLIB_SKIP) for d in self.stdlib)
        self.plugin_dirs = namespace_dirs("jax_plugins")
        plugins = [(os.path.basename(os.path.dirname(d)), tree(d, {"__pycache__"})) for d in self.plugin_dirs]
        self.digest = _sha(sorted(dists), pth, stdlib, plugins, sys.version, sys.implementation.cache_tag)

    def in_stdlib(self, path: str) -> bool:
        for d in self.stdlib:
            if path.startswith(d + os.sep):
                rel = path[len(d) + 1:].split(os.sep)
                return not any(p in _STDLIB_SKIP for p in rel[:-1])
        return False


def _glob(d: str, pattern: str) -> list[str]:
    try:
        return [os.path.join(d, n) for n in sorted(os.listdir(d)) if fnmatch.fnmatch(n, pattern)]
    except OSError:
        return []


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def namespace_dirs(name: str) -> list[str]:
    """The directories of a (namespace) package, found without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return []
    locs = getattr(spec, "submodule_search_locations", None) if spec is not None else None
    return sorted({os.path.realpath(p) for p in locs or () if os.path.isdir(p)})


def _sha(*parts: Any) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(json.dumps(p, sort_keys=True, default=str).encode())
        h.update(b"\0")
    return h.hexdigest()


# ------------------------------------------------------------------ the loaded modules
class Loaded:
    """The loaded-module digest of this process (see the module docstring).

    ``covered(path)`` says whether a file's content is in the key already (the trees
    ``key`` hashes); ``sha(path)`` hashes a file (memoized)."""

    def __init__(self, covered: Callable[[str], bool], sha: Callable[[str], str],
                 tree: Callable[[str, set[str]], str], root: Path, sites: list[str] | None = None) -> None:
        self._covered, self._sha, self._tree, self.root, self._sites = covered, sha, tree, root, sites
        self._static: Static | None = None
        self._seen: dict[str, tuple[str, str] | None] = {}  # file -> its part of the key, once per process
        self._size = -1
        self._files: frozenset[tuple[str, str]] = frozenset()
        self._digest = ""
        self.computed = 0  # how often the digest was recomputed (a measure of its cost)
        self.saved = False  # whether the file memo was written back after the first digest

    @property
    def static(self) -> Static:
        if self._static is None:
            self._static = Static(self._sha, self._tree, self._sites)
        return self._static

    def files(self) -> frozenset[tuple[str, str]]:
        """(module name, file) of every loaded module with a file."""
        out = set()
        for name, m in list(sys.modules.items()):
            f = getattr(m, "__file__", None)
            if isinstance(f, str) and name not in ENTRY_MODULES:
                out.add((name, f))
        return frozenset(out)

    def digest(self) -> str:
        """The digest of this process's loaded modules; recomputed only when ``sys.modules`` changed size."""
        size = len(sys.modules)
        if size == self._size:
            return self._digest
        files = self.files()
        self._size = size
        if files == self._files and self._digest:
            return self._digest
        self._files = files
        parts = self.parts(files)
        self._digest = _sha(self.static.digest, sorted(parts.items()))
        self.computed += 1
        return self._digest

    def parts(self, files: Iterable[tuple[str, str]] | None = None) -> dict[str, str]:
        """module name -> content sha256 of the loaded files the key holds one by one
        (those no tree, distribution or standard library covers)."""
        out: dict[str, str] = {}
        for name, f in files if files is not None else self.files():
            if f not in self._seen:
                self._seen[f] = self._classify(os.path.realpath(f))
            part = self._seen[f]
            if part is not None:
                out[name] = part[1]
        return out

    def _classify(self, path: str) -> tuple[str, str] | None:
        """None when the file's content is in the key another way; else (kind, sha256)."""
        if not os.path.isfile(path) or self._covered(path):
            return None
        try:
            rel = Path(path).relative_to(self.root).as_posix()
        except ValueError:
            rel = None
        if rel is not None and any(fnmatch.fnmatch(rel, p) for p in NOT_SHAPING):
            return None
        st = self.static
        sha = self._sha(path)
        listed = st.records.get(path)
        if listed is not None and listed == _record_b64(sha):
            return None  # an installed distribution's file as installed
        if listed is not None:
            return ("edited", sha)
        if st.in_stdlib(path) or any(path.startswith(d + os.sep) for d in st.plugin_dirs):
            return None
        return ("loaded", sha)
