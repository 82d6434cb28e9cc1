"""Where replayed artifacts come from: the exports earlier runs stored, and JAX's own
back-compat test data shipped in the wheel (imported as artifacts first).

Each source yields ``StoredExport``s: an export artifact in the store, the ``io``
artifact holding the inputs it ran on and the outputs it gave, and the harness it
belongs to.

This module and ``farm.run.replay`` read and write the store, which ``farm.pipeline``
may not import (pyproject's import contracts); the stages an artifact runs through are
the pipeline's (``farm.pipeline.artifact``), which do not.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import importlib
import pkgutil
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from farm.formats import iofile
from farm.stages.stored import FORMAT_STABLEHLO, ReplayError
from farm.store import artifacts, queries
from farm.store.models import ArtifactRow, HarnessRow, ResultRow, Run

BACKCOMPAT_CATALOG = "jax-backcompat"
BACKCOMPAT_PACKAGE = "jax._src.internal_test_util.export_back_compat_test_data"


@dataclass(frozen=True, slots=True)
class StoredExport:
    """An export artifact and what replay needs around it (plain data, no bytes)."""

    export_sha: str
    harness: dict[str, Any]  # a describe() dict: fingerprint, name, primitive, dtype, ...
    io_sha: str | None = None
    source_run: str | None = None


# ------------------------------------------------------------------ JAX's back-compat data
@dataclass(frozen=True, slots=True)
class BackCompatEntry:
    """One data dict of JAX's back-compat test data."""

    name: str  # module.variable[.key], e.g. cpu_eig_lapack_geev.data_2024_08_19.f32
    platform: str
    custom_call_targets: tuple[str, ...]
    serialized_date: dt.date
    inputs: tuple[np.ndarray, ...]
    expected_outputs: tuple[np.ndarray, ...]
    module_text: str = field(repr=False)
    module_serialized: bytes = field(repr=False)
    calling_convention_version: int
    nr_devices: int = 1

    @property
    def primitive(self) -> str:
        return primitive_of(self.name.split(".", 1)[0])

    @property
    def dtype(self) -> str:
        key = self.name.rsplit(".", 1)[-1]
        if key in _SHORT_DTYPES:
            return _SHORT_DTYPES[key]
        arrays = self.inputs or self.expected_outputs
        return str(np.asarray(arrays[0]).dtype) if arrays else "float32"

    def harness(self) -> dict[str, Any]:
        """A describe() dict, so the entry has a harnesses row like any catalog entry."""
        fp = hashlib.sha256(f"{BACKCOMPAT_CATALOG}|{self.name}|{self.platform}".encode()).hexdigest()[:20]
        return {"name": f"{self.platform}/{self.name}", "fingerprint": fp, "catalog": BACKCOMPAT_CATALOG,
                "family": "backcompat", "primitive": self.primitive, "group": self.name.split(".", 1)[0],
                "dtype": self.dtype, "shapes": [list(np.shape(a)) for a in self.inputs],
                "params": {"platform": self.platform}, "args": [], "compare": "allclose", "devices": self.nr_devices,
                "source": f"{BACKCOMPAT_PACKAGE}.{self.name}", "limitations": []}


_SHORT_DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
                 "c64": "complex64", "c128": "complex128", "i32": "int32", "i64": "int64"}
_BACKENDS = ("lapack", "blas", "cusolver", "solver", "hipsolver", "rocsolver", "cusparse")


def primitive_of(module_name: str) -> str:
    """``cpu_eig_lapack_geev`` -> ``eig``; ``stablehlo_dynamic_top_k`` -> ``dynamic_top_k``."""
    parts = module_name.split("_")
    if parts and parts[0] in ("cpu", "cuda", "rocm", "tpu", "gpu", "stablehlo"):
        parts = parts[1:]
    for i, p in enumerate(parts):
        if p in _BACKENDS:
            parts = parts[:i]
            break
    return "_".join(parts) or module_name


def backcompat_entries() -> list[BackCompatEntry]:
    """Every data dict in JAX's back-compat test data, found by walking the package.

    Raises:
        ReplayError: this jax ships no back-compat data.
    """
    try:
        pkg = importlib.import_module(BACKCOMPAT_PACKAGE)
    except ImportError as e:
        raise ReplayError(f"this jax has no back-compat test data ({BACKCOMPAT_PACKAGE}): {e}") from None
    out: list[BackCompatEntry] = []
    seen: set[int] = set()
    for m in sorted(pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."), key=lambda m: m.name):
        if m.ispkg:
            continue
        mod = importlib.import_module(m.name)
        short = m.name[len(pkg.__name__) + 1:]
        for var, value in vars(mod).items():
            if var.startswith("_"):
                continue
            for path, d in _data_dicts(value, (short, var)):
                if id(d) not in seen:
                    seen.add(id(d))
                    out.append(_entry(".".join(path), d))
    return out


def _entry(name: str, d: dict[str, Any]) -> BackCompatEntry:
    return BackCompatEntry(
        name=name, platform=d["platform"], custom_call_targets=tuple(d.get("custom_call_targets") or ()),
        serialized_date=d["serialized_date"], inputs=tuple(np.asarray(a) for a in d["inputs"]),
        expected_outputs=tuple(np.asarray(a) for a in d["expected_outputs"]),
        module_text=d["mlir_module_text"], module_serialized=bytes(d["mlir_module_serialized"]),
        calling_convention_version=int(d["xla_call_module_version"]), nr_devices=int(d.get("nr_devices") or 1))


def _data_dicts(obj: Any, path: tuple[str, ...]) -> Iterable[tuple[tuple[str, ...], dict[str, Any]]]:
    if isinstance(obj, dict) and "testdata_version" in obj and "mlir_module_serialized" in obj:
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _data_dicts(v, path + (str(k),))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _data_dicts(v, path + (str(i),))


def io_blob(inputs: Sequence[Any], outputs: Sequence[Any]) -> tuple[str, bytes]:
    """(sha256, bytes) of the pipeline's ``io`` artifact layout (``farm.formats.iofile``)."""
    data = iofile.pack(inputs, outputs)
    return hashlib.sha256(data).hexdigest(), data


def import_backcompat(session: Session, entries: Sequence[BackCompatEntry]) -> list[StoredExport]:
    """Store each entry as an ``export`` artifact (raw StableHLO bytecode) and an ``io``
    artifact; the export's meta names its io artifact and its harness. Idempotent."""
    out = []
    for e in entries:
        io_sha, io_data = io_blob(e.inputs, e.expected_outputs)
        artifacts.put(session, io_sha, "io", io_data, jax_version=f"backcompat-{e.serialized_date}",
                      meta={"inputs": len(e.inputs), "outputs": len(e.expected_outputs), "source": e.name})
        sha = hashlib.sha256(e.module_serialized).hexdigest()
        h = e.harness()
        artifacts.put(session, sha, "export", e.module_serialized, jax_version=f"backcompat-{e.serialized_date}",
                      meta={"format": FORMAT_STABLEHLO, "platforms": [e.platform],
                            "calling_convention_version": e.calling_convention_version,
                            "serialized_date": e.serialized_date.isoformat(),
                            "custom_call_targets": list(e.custom_call_targets), "nr_devices": e.nr_devices,
                            "in_specs": poly_specs(e.module_text, e.inputs), "io": io_sha,
                            "source": f"{BACKCOMPAT_PACKAGE}.{e.name}", "harness": h})
        out.append(StoredExport(sha, h, io_sha, source_run=None))
    session.flush()
    return out


def poly_specs(module_text: str, inputs: Sequence[np.ndarray]) -> list[str] | None:
    """Shape specs of ``main``'s arguments with a fresh dimension variable for each ``?``
    (None when no argument is shape-polymorphic)."""
    m = re.search(r"func\.func public @main\((.*?)\)\s*->", module_text, re.S)
    if not m or "?" not in m.group(1):
        return None
    types = re.findall(r"tensor<((?:[0-9?]+x)*)", m.group(1))
    specs, k = [], 0
    for a, ty in zip(inputs, types):
        dims = ty.split("x")[:-1]
        spec = []
        for j, d in enumerate(dims):
            if d == "?":
                spec.append(f"d{k}")
                k += 1
            else:
                spec.append(str(np.shape(a)[j]))
        specs.append(", ".join(spec))
    return specs


# ------------------------------------------------------------------ exports earlier runs stored
def from_run(session: Session, run_ref: str) -> list[StoredExport]:
    """The export artifacts a run produced (its ``serialize`` records), with their io
    artifacts: a sweep's ``execute`` record links it; a replay run's ``serialize`` record
    names the io it replayed (``facts["io"]``)."""
    run = queries.resolve_run(session, run_ref)
    rows = session.execute(select(ResultRow.harness_id, ResultRow.artifact_sha, ArtifactRow.kind, ResultRow.facts)
                           .join(ArtifactRow, ArtifactRow.sha256 == ResultRow.artifact_sha)
                           .where(ResultRow.run_id == run.id, ResultRow.stage != "pallas_export")).all()
    exports: dict[int, str] = {}  # a Pallas kernel's per-target artifacts (TPU, GPU only) are not replayed
    ios: dict[int, str] = {}
    for hid, sha, kind, facts in rows:
        if kind == "export":
            exports.setdefault(hid, sha)
            if run.kind == "replay" and (facts or {}).get("io"):  # replaying a replay run
                ios.setdefault(hid, facts["io"])
        elif kind == "io":
            ios.setdefault(hid, sha)
    defs = dict(session.execute(select(HarnessRow.id, HarnessRow.definition)
                                .where(HarnessRow.id.in_(list(exports) or [-1]))).tuples().all())
    return [StoredExport(sha, defs[hid], ios.get(hid), run.name) for hid, sha in sorted(exports.items())]


def since(session: Session, when: dt.date) -> list[StoredExport]:
    """Every export artifact stored on or after ``when``, with the newest harness (of a run
    that is not a replay) it belongs to."""
    start = dt.datetime.combine(when, dt.time())
    shas = list(session.scalars(select(ArtifactRow.sha256).where(ArtifactRow.kind == "export",
                                                                 ArtifactRow.created_at >= start)
                                .order_by(ArtifactRow.created_at)))
    out = []
    for sha in shas:
        row = session.execute(select(ResultRow.run_id, ResultRow.harness_id, HarnessRow.definition, Run.name)
                              .join(HarnessRow, HarnessRow.id == ResultRow.harness_id)
                              .join(Run, Run.id == ResultRow.run_id)
                              .where(ResultRow.artifact_sha == sha, Run.kind != "replay",
                                     ResultRow.stage != "pallas_export")
                              .order_by(ResultRow.run_id.desc()).limit(1)).first()
        if row is not None:
            run_id, hid, definition, run_name = row
            io_sha = session.scalar(select(ResultRow.artifact_sha).join(
                ArtifactRow, ArtifactRow.sha256 == ResultRow.artifact_sha).where(
                ResultRow.run_id == run_id, ResultRow.harness_id == hid, ArtifactRow.kind == "io").limit(1))
            out.append(StoredExport(sha, definition, io_sha, run_name))
        else:
            meta = session.get(ArtifactRow, sha).meta or {}
            if meta.get("harness"):
                out.append(StoredExport(sha, meta["harness"], meta.get("io"), None))
    return out


def select_exports(exports: Iterable[StoredExport], primitive: Sequence[str] = (),
                   dtype: Sequence[str] = ()) -> list[StoredExport]:
    return [e for e in exports if (not primitive or e.harness.get("primitive") in primitive)
            and (not dtype or e.harness.get("dtype") in dtype)]


def census_custom_calls(session: Session, platform: str = "cpu") -> set[str]:
    """Custom-call targets the catalog's census found in ``platform`` lowerings (all runs)."""
    out: set[str] = set()
    for facts in session.scalars(select(ResultRow.facts).where(ResultRow.stage == "census",
                                                               ResultRow.platform == platform)):
        out |= set((facts or {}).get("custom_calls") or ())
    return out
