"""Replay: stored export artifacts re-run on the current jax, compared with the outputs
stored when they were made.

Three sources of stored exports feed one replay path:

* a sweep's own artifacts (``--from RUN`` / ``--since DATE``): ``jax.export.serialize``
  bytes, inputs and CPU outputs in the harness's ``io`` artifact;
* JAX's own back-compat data shipped in the wheel (``--jax-backcompat``): raw StableHLO
  bytecode with a calling-convention version, imported here as artifacts first.

Each replay is one ``Replayed`` record (stage ``replay``, platform ``cpu``) in a run of
kind ``replay``, so it shows in the dashboard and in ``farm compare``. The record's
facts say how old the artifact is, whether it is inside JAX's stated compatibility
window, which custom calls it uses and whether each is still guaranteed stable, and how
the outputs were judged (exact, within tolerance, or by an invariant for results that
are not unique: eigenvectors, Schur vectors, signs).

The judging functions at the bottom (``judge``, ``reconstruct``, ``coverage``) are pure.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from farm.errors import ArtifactCorrupt, ArtifactNotFound, FarmError, UnknownFormatVersion
from farm.stages.compare import compare_outputs
from farm.stages.export import run_exported
from farm.results import Record

#: JAX promises that a serialized artifact keeps running for about six months.
WINDOW_DAYS = 183
BACKCOMPAT_CATALOG = "jax-backcompat"
BACKCOMPAT_PACKAGE = "jax._src.internal_test_util.export_back_compat_test_data"
#: Artifact meta ``format`` values replay can read.
FORMAT_JAX_EXPORT = "jax.export.serialize"
FORMAT_STABLEHLO = "stablehlo-bytecode"
FORMATS = (FORMAT_JAX_EXPORT, FORMAT_STABLEHLO)

#: (rtol, atol) for outputs that are not bitwise equal: made by another jax, another
#: LAPACK build or another compiler, so a few ULPs are normal.
REPLAY_TOL: dict[str, tuple[float, float]] = {
    "bfloat16": (2e-2, 1e-2), "float16": (4e-3, 1e-3),
    "float32": (1e-4, 1e-5), "complex64": (1e-4, 1e-5),
    "float64": (1e-10, 1e-12), "complex128": (1e-10, 1e-12),
}
#: Primitives whose outputs are not unique (any phase/sign per vector, any basis of a
#: degenerate eigenspace, any ordering of a Schur form): judged by an invariant.
NON_UNIQUE = ("eig", "eigh", "schur", "svd", "qr")

#: How the outputs were judged (``facts["judged"]``).
JUDGED = ("exact", "tolerance", "invariant", "none")


class ReplayError(FarmError):
    """A stored export that cannot be replayed as stored (unknown format, missing inputs)."""


# ------------------------------------------------------------------ what is replayed
@dataclass(frozen=True, slots=True)
class StoredExport:
    """An export artifact and what replay needs around it (plain data, no bytes)."""

    export_sha: str
    harness: dict[str, Any]  # a describe() dict: fingerprint, name, primitive, dtype, ...
    io_sha: str | None = None
    source_run: str | None = None


@dataclass(frozen=True, slots=True)
class Replayed(Record):
    """facts: source, format, platforms, calling_convention_version, cc_supported,
    serialized_date, age_days, outside_window, custom_calls [{target, guaranteed}],
    judged, reason; metrics: max errors against the stored outputs."""


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
    """Every data dict in JAX's back-compat test data, found by walking the package."""
    import importlib
    import pkgutil

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
                if id(d) in seen:
                    continue
                seen.add(id(d))
                out.append(BackCompatEntry(
                    name=".".join(path), platform=d["platform"],
                    custom_call_targets=tuple(d.get("custom_call_targets") or ()),
                    serialized_date=d["serialized_date"],
                    inputs=tuple(np.asarray(a) for a in d["inputs"]),
                    expected_outputs=tuple(np.asarray(a) for a in d["expected_outputs"]),
                    module_text=d["mlir_module_text"], module_serialized=bytes(d["mlir_module_serialized"]),
                    calling_convention_version=int(d["xla_call_module_version"]),
                    nr_devices=int(d.get("nr_devices") or 1)))
    return out


def _data_dicts(obj: Any, path: tuple[str, ...]) -> Iterable[tuple[tuple[str, ...], dict[str, Any]]]:
    if isinstance(obj, dict) and "testdata_version" in obj and "mlir_module_serialized" in obj:
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _data_dicts(v, path + (str(k),))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _data_dicts(v, path + (str(i),))


# ------------------------------------------------------------------ storing
def io_blob(inputs: Sequence[Any], outputs: Sequence[Any]) -> tuple[str, bytes]:
    """The pipeline's ``io`` artifact layout (``farm.pipeline.iofile``)."""
    from farm.pipeline import iofile

    data = iofile.pack(inputs, outputs)
    return hashlib.sha256(data).hexdigest(), data


def read_io(data: bytes) -> tuple[list[np.ndarray], list[np.ndarray]]:
    from farm.pipeline import iofile

    return iofile.unpack(data)


def import_backcompat(session: Session, entries: Sequence[BackCompatEntry]) -> list[StoredExport]:
    """Store each entry as an ``export`` artifact (raw StableHLO bytecode) and an ``io``
    artifact; the export's meta names its io artifact and its harness. Idempotent."""
    from farm.store import artifacts

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


# ------------------------------------------------------------------ finding stored exports
def from_run(session: Session, run_ref: str) -> list[StoredExport]:
    """The export artifacts a run produced (stage ``serialize``), with their io artifacts."""
    from farm.store import queries
    from farm.store.models import ArtifactRow, HarnessRow, ResultRow

    run = queries.resolve_run(session, run_ref)
    rows = session.execute(select(ResultRow.harness_id, ResultRow.stage, ResultRow.artifact_sha, ArtifactRow.kind,
                                  ResultRow.facts)
                           .join(ArtifactRow, ArtifactRow.sha256 == ResultRow.artifact_sha)
                           .where(ResultRow.run_id == run.id)).all()
    exports: dict[int, str] = {}
    ios: dict[int, str] = {}
    for hid, stage, sha, kind, facts in rows:
        if kind == "export" and (run.kind != "replay" or stage == "replay"):
            exports.setdefault(hid, sha)
            if run.kind == "replay" and (facts or {}).get("io"):  # replaying a replay run
                ios.setdefault(hid, facts["io"])
        elif kind == "io":
            ios.setdefault(hid, sha)
    defs = dict(session.execute(select(HarnessRow.id, HarnessRow.definition)
                                .where(HarnessRow.id.in_(list(exports) or [-1]))).tuples().all())
    return [StoredExport(sha, defs[hid], ios.get(hid), run.name) for hid, sha in sorted(exports.items())]


def since(session: Session, when: dt.date) -> list[StoredExport]:
    """Every export artifact stored on or after ``when``, with the newest harness it belongs to."""
    from farm.store.models import ArtifactRow, HarnessRow, ResultRow, Run

    start = dt.datetime.combine(when, dt.time())
    shas = list(session.scalars(select(ArtifactRow.sha256).where(ArtifactRow.kind == "export",
                                                                 ArtifactRow.created_at >= start)
                                .order_by(ArtifactRow.created_at)))
    out = []
    for sha in shas:
        row = session.execute(select(ResultRow.run_id, ResultRow.harness_id, HarnessRow.definition, Run.name)
                              .join(HarnessRow, HarnessRow.id == ResultRow.harness_id)
                              .join(Run, Run.id == ResultRow.run_id)
                              .where(ResultRow.artifact_sha == sha, ResultRow.stage != "replay")
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


# ------------------------------------------------------------------ replaying one
def replay_one(session: Session, item: StoredExport, *, today: dt.date, platform: str = "cpu",
               n_devices: int = 1) -> Replayed:
    """Replay one stored export; every failure becomes a record, never an exception."""
    return _replay_one(session, item, today=today, platform=platform, n_devices=n_devices)[0]


def _replay_one(session: Session, item: StoredExport, *, today: dt.date, platform: str,
                n_devices: int) -> tuple[Replayed, list[np.ndarray] | None]:
    import time

    from farm.store.models import ArtifactRow

    t0 = time.perf_counter()
    facts: dict[str, Any] = {"source": item.source_run or item.harness.get("source") or "", "export": item.export_sha}
    row = session.get(ArtifactRow, item.export_sha)
    meta = dict(row.meta or {}) if row is not None else {}
    facts.update(_static_facts(meta, row.jax_version if row is not None else None,
                               row.created_at if row is not None else None, today))

    def done(status: str, *, error: str | None = None, error_type: str | None = None, reason: str | None = None,
             judged: str = "none", metrics: dict[str, float] | None = None, detail: str | None = None) -> Replayed:
        return Replayed("replay", platform, status, time.perf_counter() - t0, error_type=error_type,
                        error=error and error[:1000], detail=detail, metrics=metrics or {},
                        facts={**facts, "judged": judged, "reason": reason}, artifact=item.export_sha)

    def stop(*a: Any, **kw: Any) -> tuple[Replayed, None]:
        return done(*a, **kw), None

    try:
        _, blob = _get(session, item.export_sha)
        platforms = tuple(meta.get("platforms") or ())
        if platforms and platform not in platforms:
            return stop("not_runnable_here", reason="platform",
                        error=f"exported for {platforms}, this host runs {platform}")
        if int(meta.get("nr_devices") or 1) > n_devices:
            return stop("not_runnable_here", reason="devices",
                        error=f"needs {meta.get('nr_devices')} devices, this host has {n_devices}")
        io_sha = item.io_sha or meta.get("io")
        facts["io"] = io_sha
        if not io_sha:
            return stop("skipped", reason="no_io", error="no stored inputs/outputs for this export "
                        "(the sweep did not link its io artifact)")
        _, io_data = _get(session, io_sha)
        inputs, expected = read_io(io_data)
        exported = load_exported(blob, meta, inputs, expected)
        facts["calling_convention_version"] = exported.calling_convention_version
        facts["cc_supported"] = _cc_supported(exported.calling_convention_version)
        if not meta.get("custom_call_targets"):
            facts["custom_calls"] = _custom_call_facts(custom_calls_of(exported))
        actual = run_exported(exported, inputs)
    except (ArtifactCorrupt, ArtifactNotFound, UnknownFormatVersion, ReplayError) as e:
        return stop("error", error=str(e), error_type=type(e).__name__, reason=_reason_of(e))
    except Exception as e:  # the artifact does not run on this jax: that is the finding
        import traceback

        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return stop("error", error=first, error_type=type(e).__name__, reason=_reason_of(e),
                    detail="".join(traceback.format_exception(type(e), e, e.__traceback__))[-20000:])
    status, judged, reason, err, metrics = judge(actual, expected, str(item.harness.get("primitive", "")))
    return done(status, error=err, error_type="Mismatch" if status == "fail" else None, reason=reason,
                judged=judged, metrics=metrics), actual


def against_today(harness: dict[str, Any], replayed: list[np.ndarray], platform: str = "cpu") -> Replayed | None:
    """Today's jit of the same harness (if the catalog still has its fingerprint), run on
    the same inputs, against the replayed outputs: stage ``replay_today``."""
    import time

    import jax

    from farm import catalog
    from farm.stages import trace
    from farm.stages.record import failure

    try:
        h = next((h for h in catalog.load(harness.get("catalog", "farm"))
                  if h.fingerprint == harness.get("fingerprint")), None)
    except FarmError:
        h = None
    if h is None:
        return None
    t0 = time.perf_counter()
    try:
        with jax.enable_x64(h.needs_x64):
            tr = trace.run(h, h.make_args())
            if not tr.ok:
                return Replayed("replay_today", platform, "error", error_type=tr.error_type,
                                error=f"today's trace failed: {tr.error}", facts={"against": "today"})
            _, jf, dyn = tr.handle
            today = [np.asarray(x) for x in jax.tree_util.tree_leaves(jf(*dyn))]
    except Exception as e:
        return failure(Replayed, "replay_today", platform, e, time.perf_counter() - t0, facts={"against": "today"})
    status, judged, reason, err, metrics = judge(replayed, today, str(harness.get("primitive", "")))
    return Replayed("replay_today", platform, status, time.perf_counter() - t0, error=err,
                    error_type="Mismatch" if status == "fail" else None, metrics=metrics,
                    facts={"against": "today", "judged": judged, "reason": reason})


def _get(session: Session, sha: str) -> tuple[Any, bytes]:
    from farm.store import artifacts

    return artifacts.get(session, sha)


def _cc_supported(version: int) -> bool:
    from jax._src.export import _export

    return (_export.minimum_supported_calling_convention_version <= version
            <= _export.maximum_supported_calling_convention_version)


def _static_facts(meta: dict[str, Any], jax_version: str | None, created: dt.datetime | None,
                  today: dt.date) -> dict[str, Any]:
    """What replay reports about an artifact without running it (age, window, custom calls)."""

    date = meta.get("serialized_date") or (created.date().isoformat() if created else None)
    made = dt.date.fromisoformat(date) if date else None
    age = (today - made).days if made else None
    cc = meta.get("calling_convention_version")
    return {"format": meta.get("format", FORMAT_JAX_EXPORT), "platforms": list(meta.get("platforms") or []),
            "jax_version": meta.get("jax_version", jax_version), "calling_convention_version": cc,
            "cc_supported": _cc_supported(int(cc)) if isinstance(cc, int) else None,
            "serialized_date": date, "age_days": age,
            "outside_window": bool(age is not None and age > WINDOW_DAYS),
            "custom_calls": _custom_call_facts(meta.get("custom_call_targets") or [])}


def _custom_call_facts(targets: Iterable[str]) -> list[dict[str, Any]]:
    from farm.stages.census import guaranteed_targets

    guaranteed = guaranteed_targets()
    return [{"target": t, "guaranteed": t in guaranteed} for t in sorted(set(targets))]


def custom_calls_of(exported: Any) -> list[str]:
    """Custom-call targets in an Exported's module (as JAX's back-compat tests find them)."""
    return sorted(set(re.findall(r"stablehlo\.custom_call\s*@([^\(\s]+)\(", str(exported.mlir_module()))))


def _reason_of(e: BaseException) -> str:
    msg = str(e)
    if isinstance(e, ArtifactCorrupt):
        return "corrupt"
    if isinstance(e, ArtifactNotFound):
        return "missing"
    if isinstance(e, UnknownFormatVersion) or "calling convention" in msg.lower():
        return "calling_convention"
    if "custom call" in msg.lower() or "custom_call" in msg.lower():
        return "custom_call"
    if "x64" in msg or "64-bit" in msg:
        return "x64"
    return "runtime"


def load_exported(blob: bytes, meta: dict[str, Any], inputs: Sequence[np.ndarray],
                  expected: Sequence[np.ndarray]) -> Any:
    """An ``Exported`` from stored bytes: a ``jax.export`` serialization, or raw StableHLO
    bytecode with its calling-convention version (how JAX's back-compat tests build one)."""
    fmt = meta.get("format", FORMAT_JAX_EXPORT)
    cc = meta.get("calling_convention_version")
    if fmt not in FORMATS:
        raise UnknownFormatVersion(f"export artifact format {fmt!r} is unknown (this farm reads {', '.join(FORMATS)})")
    # jax checks the version only when exporting; deserialize and call accept any number.
    # A version newer than this jax knows is refused here; an older one is run and flagged
    # (cc_supported false: outside the compatibility promise).
    if isinstance(cc, int) and cc > _max_cc():
        raise UnknownFormatVersion(_cc_message(cc))
    if fmt == FORMAT_JAX_EXPORT:
        import jax

        try:
            exp = jax.export.deserialize(bytearray(blob))
        except Exception as e:
            raise UnknownFormatVersion(f"cannot deserialize export artifact: "
                                       f"{(str(e).strip().splitlines() or [type(e).__name__])[0]}") from None
        if exp.calling_convention_version > _max_cc():
            raise UnknownFormatVersion(_cc_message(exp.calling_convention_version))
        return exp
    return _exported_from_bytecode(blob, meta, inputs, expected)


def _max_cc() -> int:
    from jax._src.export import _export

    return _export.maximum_supported_calling_convention_version


def _cc_message(cc: int) -> str:
    from jax._src.export import _export

    import jax

    return (f"calling-convention version {cc} is newer than jax {jax.__version__} reads "
            f"({_export.minimum_supported_calling_convention_version}.."
            f"{_export.maximum_supported_calling_convention_version})")


def _exported_from_bytecode(blob: bytes, meta: dict[str, Any], inputs: Sequence[np.ndarray],
                            expected: Sequence[np.ndarray]) -> Any:
    import jax
    from jax._src import core, tree_util
    from jax._src.export import _export

    cc = meta.get("calling_convention_version")
    if not isinstance(cc, int):
        raise UnknownFormatVersion("raw StableHLO artifact has no calling-convention version in its meta")
    specs = meta.get("in_specs")
    scope = jax.export.SymbolicScope()
    in_avals = []
    for i, a in enumerate(inputs):
        shape = (jax.export.symbolic_shape(specs[i], scope=scope) if specs and specs[i] else a.shape)
        in_avals.append(core.ShapedArray(shape, a.dtype))
    out_avals = [core.ShapedArray(np.shape(a), np.asarray(a).dtype) for a in expected]
    _, in_tree = tree_util.tree_flatten((tuple(in_avals), {}))
    _, out_tree = tree_util.tree_flatten(tuple(out_avals))
    n_in, n_out = len(in_avals), len(out_avals)
    return _export.Exported(
        fun_name="replay", in_tree=in_tree, in_avals=tuple(in_avals), out_tree=out_tree,
        out_avals=tuple(out_avals), _has_named_shardings=True, _in_named_shardings=(None,) * n_in,
        _out_named_shardings=(None,) * n_out, in_shardings_hlo=(None,) * n_in, out_shardings_hlo=(None,) * n_out,
        platforms=tuple(meta.get("platforms") or ("cpu",)), ordered_effects=(), unordered_effects=(),
        disabled_safety_checks=(), mlir_module_serialized=bytes(blob), calling_convention_version=cc,
        nr_devices=int(meta.get("nr_devices") or 1), module_kept_var_idx=tuple(range(n_in)),
        uses_global_constants=any(not core.is_constant_shape(a.shape) for a in in_avals), _get_vjp=None)


# ------------------------------------------------------------------ judging (pure)
def tolerance(outputs: Sequence[np.ndarray]) -> tuple[float, float]:
    tols = [REPLAY_TOL.get(np.asarray(o).dtype.name, (0.0, 0.0)) for o in outputs]
    return (max(t[0] for t in tols), max(t[1] for t in tols)) if tols else (0.0, 0.0)


def judge(actual: Sequence[np.ndarray], expected: Sequence[np.ndarray],
          primitive: str) -> tuple[str, str, str | None, str | None, dict[str, float]]:
    """(status, judged, reason, error, metrics) of replayed outputs against stored ones."""
    promised = [{"dtype": str(np.asarray(e).dtype), "shape": list(np.shape(e))} for e in expected]
    status, err, metrics = compare_outputs(list(actual), list(expected), 0.0, 0.0, exact=True, promised=promised)
    if status == "ok":
        return "ok", "exact", None, None, metrics
    if len(actual) != len(expected) or any(np.shape(a) != np.shape(e) or np.asarray(a).dtype != np.asarray(e).dtype
                                           for a, e in zip(actual, expected)):
        return "fail", "exact", "signature", err, metrics
    rtol, atol = tolerance(expected)
    status, err, metrics = compare_outputs(list(actual), list(expected), rtol, atol, exact=False)
    if status == "ok":
        return "ok", "tolerance", "within_tolerance", None, metrics
    if primitive in NON_UNIQUE:
        inv = invariant_error(primitive, actual, expected)
        if inv is None:
            return "fail", "tolerance", "non_unique_no_invariant", err, metrics
        bound = 100 * max(rtol, np.finfo(np.float32).eps if rtol >= 1e-6 else np.finfo(np.float64).eps)
        metrics = {**metrics, "invariant_err": inv}
        if inv <= bound:
            return "ok", "invariant", "non_unique", None, metrics
        return ("fail", "invariant", "non_unique_mismatch",
                f"{primitive}: invariant error {inv:.3g} > {bound:.3g} (outputs also differ: {err})", metrics)
    return "fail", "tolerance", "mismatch", err, metrics


def reconstruct(primitive: str, outs: Sequence[np.ndarray]) -> np.ndarray | None:
    """The operand a decomposition's outputs describe, or None when the layout is unknown.

    Layouts are those of ``lax.linalg``: eigh (v, w), eig (w, vl, vr), schur (t, q),
    svd (u, s, vh) in any order of the 1-D output, qr (q, r)."""
    o = [np.asarray(x).astype(np.complex128) for x in outs]
    try:
        if primitive == "eigh" and len(o) == 2 and o[1].ndim == o[0].ndim - 1:
            v, w = o
            return (v * w[..., None, :]) @ np.conj(np.swapaxes(v, -1, -2))
        if primitive == "eig" and len(o) >= 2 and o[0].ndim == o[-1].ndim - 1:
            w, vr = o[0], o[-1]
            return (vr * w[..., None, :]) @ np.linalg.inv(vr)
        if primitive == "schur" and len(o) == 2 and o[0].ndim == 2 and o[1].ndim == 2:
            t, q = o
            return q @ t @ np.conj(q.T)
        if primitive == "svd" and len(o) == 3:
            one = [i for i, x in enumerate(o) if x.ndim == o[0].ndim - 1 or x.ndim == 1]
            if len(one) != 1:
                return None
            s = o[one[0]]
            u, vh = [x for i, x in enumerate(o) if i != one[0]]
            k = s.shape[-1]
            return (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :]
        if primitive == "qr" and len(o) == 2:
            return o[0] @ o[1]
    except (np.linalg.LinAlgError, ValueError):
        return None
    return None


def invariant_error(primitive: str, actual: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> float | None:
    """Relative distance between the operands both output sets describe (plus, for
    eigen-decompositions, between the sorted eigenvalues). None: no invariant known."""
    a, e = reconstruct(primitive, actual), reconstruct(primitive, expected)
    if a is None or e is None or a.shape != e.shape:
        return None
    scale = max(float(np.linalg.norm(e)), 1e-30)
    err = float(np.linalg.norm(a - e)) / scale
    values = {"eigh": 1, "eig": 0}.get(primitive)
    if values is not None:
        wa = np.sort_complex(np.asarray(actual[values]).astype(np.complex128).ravel())
        we = np.sort_complex(np.asarray(expected[values]).astype(np.complex128).ravel())
        err = max(err, float(np.linalg.norm(wa - we)) / max(float(np.linalg.norm(we)), 1e-30))
    return err


# ------------------------------------------------------------------ coverage (pure)
def coverage(seen: Iterable[str], replayed: Iterable[tuple[Sequence[str], str]]) -> dict[str, Any]:
    """Which custom-call targets seen in the catalog's cpu exports are exercised by at
    least one back-compat artifact that replayed ``ok`` here.

    ``replayed``: (custom_call_targets, status) per back-compat artifact."""
    seen = set(seen)
    covered: set[str] = set()
    tested: set[str] = set()
    for targets, status in replayed:
        tested |= set(targets)
        if status == "ok":
            covered |= set(targets)
    return {"seen": sorted(seen), "covered": sorted(seen & covered),
            "uncovered": sorted(seen - covered),
            "uncovered_but_tested": sorted((seen - covered) & tested)}


def census_custom_calls(session: Session, platform: str = "cpu") -> set[str]:
    """Custom-call targets the catalog's census found in ``platform`` lowerings (all runs)."""
    from farm.store.models import ResultRow

    out: set[str] = set()
    for facts in session.scalars(select(ResultRow.facts).where(ResultRow.stage == "census",
                                                               ResultRow.platform == platform)):
        out |= set((facts or {}).get("custom_calls") or ())
    return out


# ------------------------------------------------------------------ the replay run
@dataclass
class ReplayReport:
    """What ``farm replay`` prints: the run, one record per artifact, and coverage."""

    run_id: int
    run_name: str
    items: list[tuple[StoredExport, Replayed]]
    coverage: dict[str, Any] | None = None

    def counts(self) -> dict[str, int]:
        from collections import Counter

        return dict(Counter(r.status for _, r in self.items))

    def summary(self) -> dict[str, Any]:
        """Counts by status, with failures split into real breakages (inside JAX's window)
        and artifacts outside the window, and non-unique/tolerance passes counted apart."""
        from collections import Counter

        s: Counter[str] = Counter()
        for _, r in self.items:
            f = r.facts
            if r.status == "ok":
                s[f"ok_{f.get('judged')}"] += 1
            elif r.status in ("fail", "error"):
                outside = f.get("outside_window") or f.get("cc_supported") is False
                s[f"{r.status}_{'outside_window' if outside else 'breakage'}"] += 1
            else:
                s[r.status] += 1
        return dict(sorted(s.items()))

    def to_dict(self) -> dict[str, Any]:
        return {"run": {"id": self.run_id, "name": self.run_name}, "counts": self.counts(),
                "summary": self.summary(),
                "artifacts": [{"harness": it.harness.get("name"), "primitive": it.harness.get("primitive"),
                               "dtype": it.harness.get("dtype"), "export": it.export_sha, "io": it.io_sha,
                               "status": r.status, "error_type": r.error_type, "error": r.error,
                               "seconds": round(r.seconds, 4), "metrics": dict(r.metrics), **dict(r.facts)}
                              for it, r in self.items],
                "coverage": self.coverage}


def replay(session: Session, items: Sequence[StoredExport], *, env: dict[str, Any], today: dt.date | None = None,
           name: str | None = None, filters: dict[str, Any] | None = None, catalog: str = "farm",
           today_lowering: bool = False) -> ReplayReport:
    """Replay ``items`` into a new run of kind ``replay`` (caller commits).

    ``today_lowering``: also run today's jit of each harness still in the catalog and
    compare it with the replayed outputs (a ``replay_today`` record)."""
    import jax

    from farm.results import Outcome
    from farm.store import writes

    today = today or dt.date.today()
    platform = jax.default_backend()
    platform = {"gpu": "cuda"}.get(platform, platform)
    n_devices = jax.device_count()
    run = writes.create_run(session, env=env, name=name, kind="replay", catalog=catalog, filters=filters or {},
                            platforms=[platform], run_on=[platform], total=len(items))
    hids = writes.harness_ids(session, [it.harness for it in items])
    writer = writes.Writer(session, run, hids)
    done: list[tuple[StoredExport, Replayed]] = []
    for it in items:
        rec, actual = _replay_one(session, it, today=today, platform=platform, n_devices=n_devices)
        done.append((it, rec))
        records: list[Record] = [rec]
        if today_lowering and actual is not None:
            extra = against_today(it.harness, actual, platform)
            if extra is not None:
                records.append(extra)
        writer.write([Outcome(it.harness["fingerprint"], it.harness["name"], records, [],
                              sum(r.seconds for r in records))], worker="replay")
    stats = {"replayed": len(done), "counts": ReplayReport(run.id, run.name, done).counts()}
    writes.finish_run(session, run, "finished", stats)
    session.flush()
    return ReplayReport(run.id, run.name, done)
