"""Content digests behind the result cache: the installation, the farm's own code, a
harness's definition and the options of a sweep.

Like Bazel's action cache, a cached result is keyed by the digest of *every* input that
can change it, and a version label is never a key: an editable jax checkout with an
edited lowering rule, a rebuilt jaxlib or a nightly plugin with the same version string
all change the key. File contents are hashed once and memoized by path, size and mtime
(on disk, shared by every process on the host), so checking an unchanged installation
costs a directory walk and a stat per file.

Two keys per harness (see ``result_key`` and ``downstream_key``):

- the *result* key covers everything: a hit copies the whole outcome. Everything
  includes what the process runs with beyond those trees (``farm.cache.hermetic``):
  every Python module it has loaded (a sitecustomize, an overlay on ``PYTHONPATH``, a
  ``jax_plugins`` namespace module, a ``--modules`` module: memoized per process by the
  set of loaded files) and every environment variable with a prefix jax, XLA or a PJRT
  plugin reads (``JAX_``, ``XLA_``, ``TF_``, ``PJRT_``, ``TPU_``, ``LIBTPU``, ``CUDA_``...);
- the *downstream* key replaces the Python side (jax's lowering rules, the harness's
  function) with what it produced: the exact modules, the serialized export and the
  input bytes. When only Python changed, trace and lower run again (they are cheap) and
  compile, execute, compare and crossexec are reused only if this key is unchanged.
  Neither a configuration's name nor a jax version is in it, and the flags whose whole
  effect is in the modules (x64, the default matmul precision) are left out of it: a
  ``--config x64=off,on`` sweep, or two jax versions on one jaxlib, share compile,
  execute and compare wherever the modules and inputs are the same.

No database, Ray or jax imports: device hosts use this too.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import sys
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from farm.cache import hermetic, units
from farm.catalog import jaxrepo
from farm.cache.filedigests import FileDigests

#: Bump when the meaning of a key changes: every earlier result stops matching.
KEY_VERSION = "3"

ROOT = Path(__file__).resolve().parents[2]

#: The jax Python package: lowering rules, tracing. A change re-traces and re-lowers.
PYTHON_PACKAGES = ("jax",)
#: The compiler and runtime: jaxlib, PJRT plugins, libtpu. Matched against installed
#: distribution names; their files are hashed.
COMPILER_DISTS = re.compile(r"^(jaxlib|jax[-_](cuda|rocm)\d*[-_](plugin|pjrt)|libtpu.*|jax[-_]plugins.*)$", re.I)
#: What the references and inputs are computed with.
REFERENCE_PACKAGES = ("numpy", "scipy", "ml_dtypes")
#: Big vendor libraries the plugins load (CUDA, cuDNN...): their wheel RECORD (which
#: lists every file's sha256) stands for their content; nobody rebuilds them in place.
VENDOR_DISTS = re.compile(r"^nvidia[-_]", re.I)

#: The farm's code that shapes results, relative to the repository root. Everything a
#: worker imports to run a harness must be in here (tests/test_result_cache.py, test_farm_code_digest_covers_everything_a_worker_imports, checks it).
#: Left out on purpose: the store, analysis, CLI commands and dashboards, which read
#: results but never make them; and the family modules under harnesses/, which are part
#: of each harness's own digest (editing one family re-runs only that family).
FARM_CODE = ("farm/__init__.py", "farm/results.py", "farm/errors.py", "farm/platforms.py", "farm/host.py",
             "farm/faults/*.py", "farm/catalog/*.py", "farm/catalog/ulp_bounds.toml", "farm/pipeline/*.py",
             "farm/judge/*.py", "farm/cache/*.py", "farm/stages/*.py", "farm/reference/*.py", "farm/formats/*.py",
             "workers/*.py", "harnesses/__init__.py")
FARM_CODE_EXCLUDE = ("farm/catalog/coverage.py",)

#: Environment variables that change what a worker computes: every one with a prefix jax,
#: XLA or a PJRT plugin reads (``hermetic.ENV_PREFIXES``), and the farm's ``FARM_PLANT``.
ENV_PREFIXES = hermetic.ENV_PREFIXES
#: Flags whose whole effect is in the modules and the inputs they make (the dtypes jax
#: canonicalizes to, the precision of each dot): left out of the downstream key.
CAPTURED_BY_MODULE = ("JAX_ENABLE_X64", "JAX_DEFAULT_MATMUL_PRECISION")


# ------------------------------------------------------------------ file hashing
FILES = FileDigests()
UNITS = units.UnitDigests(lambda p: FILES.sha(p))


def _sha(*parts: Any) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else json.dumps(p, sort_keys=True, default=str).encode())
        h.update(b"\0")
    return h.hexdigest()


# ------------------------------------------------------------------ installation
def _module_roots(name: str) -> list[str]:
    """Where an importable top-level module lives, without importing it (editable
    installs included: the spec points at the checkout)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return sorted(set(spec.submodule_search_locations))
    return [spec.origin] if spec.origin and os.path.exists(spec.origin) else []


def _dist_modules(dist: importlib.metadata.Distribution) -> list[str]:
    top = dist.read_text("top_level.txt")
    if top:
        return [t.strip() for t in top.split() if t.strip()]
    names = set()
    for f in dist.files or ():
        first = f.parts[0] if f.parts else ""
        if first and not first.endswith((".dist-info", ".data")) and first != "..":
            names.add(first.removesuffix(".py"))
    return sorted(names)


@dataclass(frozen=True, slots=True)
class Installation:
    """Content digests of what a result depends on outside the farm.

    ``python``: the jax package (lowering rules); ``compiler``: jaxlib, PJRT plugins,
    libtpu and the vendor libraries they load; ``reference``: numpy, scipy, ml_dtypes;
    ``parts``: a digest per package, to say what changed."""

    python: str
    compiler: str
    reference: str
    parts: Mapping[str, str]
    seconds: float = 0.0
    #: the directories hashed (jax, jaxlib, plugins, references): their files are covered
    roots: tuple[str, ...] = ()

    @property
    def digest(self) -> str:
        return _sha(self.python, self.compiler, self.reference)

    def to_dict(self) -> dict[str, Any]:
        return {"digest": self.digest, "python": self.python, "compiler": self.compiler,
                "reference": self.reference, "parts": dict(self.parts), "seconds": round(self.seconds, 3)}


def _packages_digest(modules: Iterable[str], parts: dict[str, str], hashed: list[str]) -> str:
    out = []
    for m in modules:
        roots = _module_roots(m)
        hashed += roots
        d = _sha([FILES.tree(r) for r in roots]) if roots else "absent"
        parts[m] = d
        out.append((m, d))
    return _sha(out)


def installation(refresh: bool = False) -> Installation:
    """Hash the installed jax, jaxlib, plugins and reference libraries (memoized per
    process; file contents memoized on disk)."""
    if refresh:
        _installation.cache_clear()
    return _installation()


@functools.lru_cache(maxsize=1)
def _installation() -> Installation:
    import time

    t0 = time.perf_counter()
    parts: dict[str, str] = {}
    roots: list[str] = []
    python = _packages_digest(PYTHON_PACKAGES, parts, roots)
    compiler_modules: list[str] = []
    vendor: list[tuple[str, str]] = []
    for dist in sorted(importlib.metadata.distributions(), key=lambda d: (d.metadata["Name"] or "").lower()):
        name = dist.metadata["Name"] or ""
        if COMPILER_DISTS.match(name):
            compiler_modules += [m for m in _dist_modules(dist) if m not in compiler_modules]
        elif VENDOR_DISTS.match(name):
            record = dist.read_text("RECORD") or dist.version
            vendor.append((name, hashlib.sha256(record.encode()).hexdigest()))
    compiler = _sha(_packages_digest(sorted(compiler_modules), parts, roots), vendor)
    for name, d in vendor:
        parts[name] = d
    reference = _packages_digest(REFERENCE_PACKAGES, parts, roots)
    FILES.save()
    return Installation(python, compiler, reference, parts, time.perf_counter() - t0,
                        tuple(sorted({os.path.realpath(r) for r in roots})))


# ------------------------------------------------------------------ farm code
def farm_code_files() -> list[Path]:
    excluded = {ROOT / p for p in FARM_CODE_EXCLUDE}
    files: set[Path] = set()
    for pattern in FARM_CODE:
        files.update(p for p in ROOT.glob(pattern) if p not in excluded)
    return sorted(files)


@functools.lru_cache(maxsize=1)
def farm_code() -> str:
    """Digest of the farm's stage, pipeline and worker code."""
    d = _sha([(str(p.relative_to(ROOT)), FILES.sha(str(p))) for p in farm_code_files()])
    FILES.save()
    return d


# ------------------------------------------------------------------ loaded modules
def _covered(path: str) -> bool:
    """Whether a file's content is in the key already: the installation's trees, the
    farm code, a harness family module or a jax test file a catalog adapter imported
    (each of their harnesses' digests holds its own)."""
    if any(path.startswith(r + os.sep) or path == r for r in installation().roots):
        return True
    p = Path(path)
    return (p in _farm_code_set() or (p.parent == ROOT / "harnesses" and p.suffix == ".py")
            or os.path.realpath(path) in jaxrepo.LOADED_FILES)


@functools.lru_cache(maxsize=1)
def _farm_code_set() -> frozenset[Path]:
    return frozenset(p.resolve() for p in farm_code_files())


LOADED = hermetic.Loaded(_covered, FILES.sha, lambda root, skip: FILES.tree(root, skip), ROOT)


def loaded_digest() -> str:
    """Digest of every module this process has loaded (``farm.cache.hermetic``). The
    file memo is written back after the first one only (writing it costs ~0.1 s; what a
    process loads later is little and mostly hashed already)."""
    d = LOADED.digest()
    if not LOADED.saved:
        FILES.save()
        LOADED.saved = True
    return d


# ------------------------------------------------------------------ harnesses
def _code_files(obj: Any, out: set[str], depth: int = 0) -> None:
    """Source files of a callable and of the functions its closure holds."""
    if depth > 4 or obj is None:
        return
    if isinstance(obj, functools.partial):
        _code_files(obj.func, out, depth + 1)
        for v in (*obj.args, *obj.keywords.values()):
            if callable(v):
                _code_files(v, out, depth + 1)
        return
    obj = getattr(obj, "__wrapped__", obj)
    code = getattr(obj, "__code__", None)
    if not isinstance(code, types.CodeType):
        call = getattr(type(obj), "__call__", None)
        code = getattr(call, "__code__", None)
        if not isinstance(code, types.CodeType):
            return
    out.add(code.co_filename)
    for cell in getattr(obj, "__closure__", None) or ():
        try:
            v = cell.cell_contents
        except ValueError:
            continue
        if callable(v):
            _code_files(v, out, depth + 1)


@functools.lru_cache(maxsize=None)
def _repo_source(path: str) -> tuple[str, str] | None:
    """(path relative to the repository, content sha256) of a farm source file; None for a
    library file (covered by the installation digest). Once per process: a process runs
    the code it imported, so that is the content its results come from."""
    try:
        rel = Path(path).resolve().relative_to(ROOT)
    except (ValueError, OSError):
        return None
    return (str(rel), FILES.sha(path)) if os.path.isfile(path) else None


def harness_digest(h: Any) -> str:
    """Everything that defines one harness: its fingerprint (key, args, seed, function
    source), its whole description (compare mode, limitations, tolerances) and the
    content of every farm source file its function, reference, invariant and argument
    makers come from."""
    cached = h.__dict__.get("_digest")
    if cached is not None:
        return cached
    from farm.catalog import _code_digest

    files: set[str] = set()
    makers = [getattr(a, "maker", None) for a in h.args]
    own = hashlib.sha256()
    for f in (h.fun, h.reference, h.invariant, h.arg_maker, *makers):
        _code_files(f, files)
        _code_digest(f, own)  # the function's own source (a library function: its name)
        own.update(repr(f if f is None or isinstance(f, np_ufunc_types()) else type(f)).encode())
    sources = sorted(filter(None, map(_repo_source, files)))
    limits = [repr(l) for l in h.limitations]
    d = _sha(KEY_VERSION, h.fingerprint, h.describe(), limits, h.tol, h.timeout_s, h.devices, h.needs_x64, sources,
             own.hexdigest())
    object.__setattr__(h, "_digest", d)
    return d


def np_ufunc_types() -> tuple[type, ...]:
    """Callables whose repr names them exactly (``<ufunc 'sin'>``)."""
    import numpy as np

    return (np.ufunc,)


# ------------------------------------------------------------------ options and keys
def options_digest(options: Any, env: Mapping[str, str] | None = None, device_kinds: Iterable[str] = ()) -> str:
    """The sweep options that change results, the worker environment variables that do
    (every one jax, XLA or a plugin reads: ``hermetic.ENV_PREFIXES``), the device kinds
    and the Python version, as ``RESULT:DOWNSTREAM``: the downstream half leaves out the
    flags whose whole effect is in the modules and inputs (``CAPTURED_BY_MODULE``), so
    that configurations that make the same modules share compile, execute and compare."""
    fields = options.key_fields() if hasattr(options, "key_fields") else \
        {k: getattr(options, k) for k in getattr(options, "__dataclass_fields__", {})}
    environ = hermetic.environment({**os.environ, **{k: v for k, v in (env or {}).items()}})
    downstream = {k: v for k, v in environ.items() if k not in CAPTURED_BY_MODULE}
    kinds, version = sorted(device_kinds), sys.version
    return (f"{_sha(KEY_VERSION, fields, sorted(environ.items()), kinds, version)}:"
            f"{_sha(KEY_VERSION, fields, sorted(downstream.items()), kinds, version)}")


def _halves(options: str) -> tuple[str, str]:
    result, _, downstream = options.partition(":")
    return result, downstream or result


def result_key(harness: Any, options: str, install: Installation | None = None, code: str | None = None,
               loaded: str | None = None) -> str:
    """Key of a whole outcome: a hit means nothing that shapes the result has changed,
    down to every module the process has loaded (``loaded_digest``)."""
    install = install or installation()
    return _sha(KEY_VERSION, "result", harness_digest(harness), install.digest, code or farm_code(), options,
                loaded or loaded_digest())[:40]


def downstream_key(harness: Any, options: str, modules: Mapping[str, str], inputs_sha: str,
                   install: Installation | None = None, code: str | None = None) -> str:
    """Key of what runs after lowering (compile, execute, compare, crossexec): the exact
    module of every platform (and the export artifact), the input bytes, the compiler,
    the references' libraries, the harness definition, the farm code and the options and
    flags that act after lowering. jax's Python (and whatever else the process loaded
    that patches it) is not in it: what it produced is. Nor is a version label or a
    configuration's name: two configurations or two jax versions whose modules, inputs
    and compiler are the same share one key."""
    install = install or installation()
    return _sha(KEY_VERSION, "downstream", harness_digest(harness), install.compiler, install.reference,
                code or farm_code(), _halves(options)[1], sorted(modules.items()), inputs_sha)[:40]


# ------------------------------------------------------------------ per-harness jax code
def jax_roots() -> list[str]:
    """The directories of the jax package (one, unless it is a namespace)."""
    return [os.path.realpath(r) for r in _module_roots(PYTHON_PACKAGES[0])]


@functools.lru_cache(maxsize=1)
def jax_tree() -> units.Tree | None:
    """The jax tree cut into units (``farm.cache.units``); None where jax is not one directory."""
    roots = jax_roots()
    return units.Tree(roots[0], UNITS, FILES.sha) if len(roots) == 1 else None


def code_cache() -> Path:
    """Where instrumented jax code is cached (``farm.cache.recorder``), beside the digest memos."""
    return FILES.path.parent / f"jax-code-{units.UNITS_VERSION}-{sys.implementation.cache_tag}"


def deps_key(harness: Any, options: str, parts: Mapping[str, Mapping[str, Any]], install: Installation | None = None,
             code: str | None = None, loaded: str | None = None, tree: units.Tree | None = None) -> str | None:
    """The result key with the jax tree narrowed to what the harness ran: the tree's
    global digest (skeletons, cached units, other files) and today's digest of each unit
    the harness's recorded ``parts`` name, instead of every file's content. Everything
    else is ``result_key``'s. None where the jax tree is not one directory."""
    tree = tree or jax_tree()
    if tree is None:
        return None
    install = install or installation()
    return _sha(KEY_VERSION, "deps", harness_digest(harness), tree.digest, tree.deps_digest(parts), install.compiler,
                install.reference, code or farm_code(), options, loaded or loaded_digest())[:40]


def inputs_digest(arrays: Iterable[Any]) -> str:
    """sha256 over the arguments' dtypes, shapes and bytes (static arguments by repr)."""
    import numpy as np

    h = hashlib.sha256()
    for a in arrays:
        if isinstance(a, np.ndarray) or hasattr(a, "__array__") and hasattr(a, "dtype"):
            arr = np.ascontiguousarray(np.asarray(a))
            h.update(f"{arr.dtype.str}{arr.dtype.name}{arr.shape}".encode())
            h.update(arr.tobytes())
        else:
            h.update(repr(a).encode())
        h.update(b"\0")
    return h.hexdigest()
