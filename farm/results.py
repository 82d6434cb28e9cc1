"""The results contract: statuses, stages, records and outcomes, and the options of a run.

Every part of the farm speaks this vocabulary (catalog, stages, pipeline, run, store,
analysis, faces) and this module imports nothing of the farm, so any of them can import
it. Each type has one typed ``to_dict``/``from_dict``: outcomes cross process
boundaries (Ray, standalone workers' bundles) as plain dicts.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

#: Every status a record can have.
STATUSES = ("ok", "fail", "error", "expected_fail", "unexpected_pass", "skipped",
            "not_runnable_here", "crashed", "timeout")
#: Statuses that mean "something is wrong", worst first.
BAD = ("crashed", "timeout", "error", "fail", "unexpected_pass")
#: Outcomes with these statuses are never reused by the result cache: they say something
#: about one attempt, not about the code.
NOT_REUSABLE = ("crashed", "timeout")
#: How bad each status is (higher is worse): the worst status of a harness is its max.
SEVERITY = {s: i for i, s in enumerate(("ok", "skipped", "not_runnable_here", "expected_fail",
                                        "unexpected_pass", "fail", "error", "timeout", "crashed"))}

#: The one ordered list of pipeline stages (records of these stage names exist; a native
#: run on a foreign backend adds ``<stage>_run`` records for crossexec's execution).
STAGES = ("trace", "lower", "census", "sharding", "export", "serialize", "compile", "execute",
          "compare", "crossexec", "xhost", "symbolic_export", "symbolic_serialize", "symbolic_call",
          "effects_export", "export_feature", "pallas_export", "pallas_reference", "pallas_xver", "vjp", "vjp2")
#: The stages of a harness's symbolic variant (``--shapes symbolic``): its leading dimension
#: symbolic, exported, serialized and called at several sizes (``farm.pipeline.symbolic``).
SYMBOLIC_STAGES = ("symbolic_export", "symbolic_serialize", "symbolic_call")
#: The shape kinds a sweep runs each harness at: as declared, or with a symbolic dimension.
SHAPE_KINDS = ("static", "symbolic")
#: The stage of a harness with side effects (``Harness.effects``: debug prints, callbacks,
#: ``lax.platform_dependent``): one record per export configuration, what its exported,
#: deserialized and relabelled artifacts printed, received and returned on the CPU
#: (``farm.pipeline.effects``).
EFFECTS_STAGES = ("effects_export",)
#: The stage of an export-feature harness (``Harness.feature``: donation, a typed PRNG key,
#: a disabled safety check, device-count polymorphism): one record per export
#: configuration, what its artifacts did with the feature (``farm.pipeline.features``).
FEATURE_STAGES = ("export_feature",)
#: The stage of a Pallas kernel (``Harness.pallas``): one record per target (a TPU generation,
#: cuda with Mosaic GPU or Triton, rocm with Triton), the kernel lowered and exported for it,
#: the census of its custom call and the serialize round trip (``farm.pipeline.pallas``); and,
#: where the kernel ships a jnp reference of its own, the interpret-mode kernel against it;
#: in a version sweep's cross run, another jax's ``pallas_export`` artifact deserialized here
#: (``pallas_xver``, one record per target: deserialize only).
PALLAS_STAGES = ("pallas_export", "pallas_reference", "pallas_xver")
#: The stages of a harness's derivatives (``farm sweep --vjp [1|2]``): its export serialized
#: with its vjp modules, read back, and each platform's vjp taken on the CPU, at order 1
#: (``vjp``) and 2 (``vjp2``), judged against ``jax.vjp`` and finite differences of the
#: float64 reference (``farm.pipeline.gradients``, docs/gradients.md).
GRADIENT_STAGES = ("vjp", "vjp2")
#: The vjp orders a sweep can ask for (0: none).
VJP_ORDERS = (0, 1, 2)
#: Stages that run before anything is compiled: always run again on a result-cache miss.
#: Everything after them may be reused when the downstream key is unchanged.
UPSTREAM_STAGES = ("trace", "lower", "census", "sharding", "export", "serialize", *SYMBOLIC_STAGES,
                   *EFFECTS_STAGES, *FEATURE_STAGES, *PALLAS_STAGES, *GRADIENT_STAGES)
#: Stages a Limitation can name, in pipeline order. ``export`` names the platforms whose
#: part of the multi-platform export JAX refuses; ``serialize`` is the artifact's round
#: trip; ``run`` is "does not work on this device" without saying where (see RUN_STAGES).
LIMITATION_STAGES = ("trace", "lower", "census", "sharding", "export", "serialize", "compile", "execute",
                     "compare", "crossexec", "run", *SYMBOLIC_STAGES, *EFFECTS_STAGES, *FEATURE_STAGES,
                     *PALLAS_STAGES, *GRADIENT_STAGES)
#: ``stage="run"``: any of these native stages failing on the platform is the expected
#: failure; all of them passing where the platform ran natively makes it stale.
RUN_STAGES = ("lower", "compile", "execute", "compare", "xhost")
#: Platforms of a lowering (``any`` is a harness-wide record, ``export`` the artifact).
LOWERING_PLATFORMS = ("cpu", "cuda", "rocm", "tpu")
#: Device kinds a worker may natively compile and execute on, the lowering platforms each
#: can run natively, and the one it runs when nothing else says (a gpu worker reports
#: ``cuda`` or ``rocm`` from the plugin it loaded: ``farm.platforms.native_platform``).
DEVICE_KINDS = ("cpu", "gpu", "tpu")
PLATFORMS_OF_KIND = {"cpu": ("cpu",), "gpu": ("cuda", "rocm"), "tpu": ("tpu",)}
NATIVE_PLATFORM = {kind: platforms[0] for kind, platforms in PLATFORMS_OF_KIND.items()}


def worst_status(statuses: Iterable[str]) -> str:
    """The worst of some statuses by ``SEVERITY`` (``ok`` for none)."""
    return max(statuses, key=SEVERITY.__getitem__, default="ok")


@dataclass(frozen=True, slots=True)
class Record:
    """What one stage found for one harness on one platform."""

    stage: str
    platform: str
    status: str
    seconds: float = 0.0
    error_type: str | None = None
    error: str | None = None  # first line
    detail: str | None = None  # full text (traceback)
    metrics: Mapping[str, float] = field(default_factory=dict)
    facts: Mapping[str, Any] = field(default_factory=dict)
    artifact: str | None = None  # sha256 of an artifact this stage produced
    handle: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "unexpected_pass")

    def with_status(self, status: str, **kw: Any) -> "Record":
        return replace(self, status=status, **kw)

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "platform": self.platform, "status": self.status,
                "seconds": self.seconds, "error_type": self.error_type, "error": self.error,
                "detail": self.detail, "metrics": dict(self.metrics), "facts": dict(self.facts),
                "artifact": self.artifact}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Record":
        """The driver builds ~20 records a harness: their slots are set directly (the frozen
        ``__init__`` costs one ``object.__setattr__`` call a field, 1.6 against 0.9 µs a record)."""
        status = d["status"]
        if status not in _STATUS_SET:
            raise ValueError(f"unknown status {status!r}")
        g = d.get
        r = _new(cls)
        _set_stage(r, d["stage"])
        _set_platform(r, d["platform"])
        _set_status(r, status)
        _set_seconds(r, g("seconds"))
        _set_error_type(r, g("error_type"))
        _set_error(r, g("error"))
        _set_detail(r, g("detail"))
        _set_metrics(r, g("metrics") or {})
        _set_facts(r, g("facts") or {})
        _set_artifact(r, g("artifact"))
        _set_handle(r, None)
        return r


_new = object.__new__
_STATUS_SET = frozenset(STATUSES)
(_set_stage, _set_platform, _set_status, _set_seconds, _set_error_type, _set_error, _set_detail, _set_metrics,
 _set_facts, _set_artifact, _set_handle) = (getattr(Record, f).__set__ for f in (
    "stage", "platform", "status", "seconds", "error_type", "error", "detail", "metrics", "facts", "artifact",
    "handle"))


@dataclass(frozen=True, slots=True)
class Options:
    """What to run for each harness."""

    platforms: tuple[str, ...] = LOWERING_PLATFORMS
    run_on: tuple[str, ...] = ("cpu",)
    warmup: int = 1
    repeats: int = 3
    crossexec: bool = True
    roundtrip: bool = False  # also execute the deserialized artifact (costs a second compile)
    keep_modules: bool = True
    shapes: tuple[str, ...] = ("static",)  # SHAPE_KINDS: static stages, the symbolic variant's, or both
    #: the Pallas targets to export kernels for (labels "tpu:v5e", platforms "tpu", backends
    #: "triton"; ``farm.catalog.pallas``); empty: every target of the sweep's platforms
    pallas_targets: tuple[str, ...] = ()
    vjp: int = 0  # VJP_ORDERS: the export serialized with this many orders of vjp, each judged (0: none)

    def __post_init__(self) -> None:
        if self.vjp not in VJP_ORDERS:
            raise ValueError(f"vjp order must be one of {VJP_ORDERS}, got {self.vjp!r}")

    def to_dict(self) -> dict[str, Any]:
        d = {"platforms": list(self.platforms), "run_on": list(self.run_on), "warmup": self.warmup,
             "repeats": self.repeats, "crossexec": self.crossexec, "roundtrip": self.roundtrip,
             "keep_modules": self.keep_modules}
        # static alone is every run before shapes existed, no vjp every run before vjp existed,
        # no Pallas targets every run before them: their options (and result keys) stay as they were
        if self.pallas_targets:
            d["pallas_targets"] = list(self.pallas_targets)
        if self.shapes != ("static",):
            d["shapes"] = list(self.shapes)
        if self.vjp:
            d["vjp"] = self.vjp
        return d

    def key_fields(self) -> dict[str, Any]:
        """The fields that make the result cache's options digest (``farm.cache.key``): every
        field, less those at a default that older runs did not have (their keys stay as they were)."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__
                if not (k == "vjp" and not self.vjp) and not (k == "pallas_targets" and not self.pallas_targets)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Options":
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()
                      if k in cls.__dataclass_fields__})


@dataclass(frozen=True, slots=True)
class Artifact:
    """A content-addressed blob produced by a stage (bytes are zlib-compressed on store)."""

    sha256: str
    kind: str  # export | module | io
    data: bytes
    meta: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "kind": self.kind, "data": self.data, "meta": dict(self.meta)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Artifact":
        return cls(d["sha256"], d["kind"], d["data"], d.get("meta") or {})


@dataclass(frozen=True, slots=True)
class Outcome:
    """Everything one harness produced: its records and artifacts."""

    fingerprint: str
    name: str
    records: tuple[Record, ...]
    artifacts: tuple[Artifact, ...] = ()
    seconds: float = 0.0
    worker: str = ""  # where it ran: "ray:<node id>:<pid>", "standalone:<host>:<pid>"
    #: the result cache's keys (``farm.pipeline.digest``); None: never reuse this outcome
    result_key: str | None = None
    downstream_key: str | None = None
    #: the result key narrowed to the jax code this harness ran (``farm.cache.units``),
    #: and what the store keeps to recompute it: {"set": address, "rows": {address: body}}
    deps_key: str | None = None
    deps: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "records", tuple(self.records))
        object.__setattr__(self, "artifacts", tuple(self.artifacts))

    def replace(self, **kw: Any) -> "Outcome":
        return replace(self, **kw)

    def to_dict(self) -> dict[str, Any]:
        return {"fingerprint": self.fingerprint, "name": self.name, "seconds": self.seconds, "worker": self.worker,
                "result_key": self.result_key, "downstream_key": self.downstream_key,
                "deps_key": self.deps_key, "deps": self.deps,
                "records": [r.to_dict() for r in self.records],
                "artifacts": [a.to_dict() for a in self.artifacts]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Outcome":
        return cls(d["fingerprint"], d["name"], tuple(Record.from_dict(r) for r in d["records"]),
                   tuple(Artifact.from_dict(a) for a in d["artifacts"]), d.get("seconds", 0.0),
                   d.get("worker", ""), d.get("result_key"), d.get("downstream_key"), d.get("deps_key"),
                   d.get("deps"))

    @classmethod
    def failed(cls, fingerprint: str, name: str, status: str, message: str, *, stage: str = "execute",
               error_type: str | None = None) -> "Outcome":
        """An outcome for a harness that never ran through the pipeline (its worker died,
        hung, or does not know it)."""
        return cls(fingerprint, name, (Record(stage, "any", status, error_type=error_type or status.capitalize(),
                                              error=message),))

    @property
    def worst(self) -> str:
        return worst_status(r.status for r in self.records)


@dataclass(frozen=True, slots=True)
class RunDims:
    """Where a run sits among its sweep's runs: stored as columns of the run, never parsed
    back out of its name (a name is a label)."""

    series: str | None = None  # the sweep that made several runs: configurations, versions or one slot
    config: str | None = None  # configuration label, e.g. "x64=on,shardy=off"
    jax_version: str | None = None  # a version sweep's run: the jax it ran on
    exported_on: str | None = None  # a cross-version run: the jax whose exports it ran
    schedule: str | None = None  # the farm.toml sweep that scheduled it
    slot: str | None = None  # its cron slot, YYYYMMDDTHHMMZ (UTC)

    def to_dict(self) -> dict[str, str | None]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "RunDims":
        return cls(**{f: (d or {}).get(f) for f in cls.__dataclass_fields__})


@dataclass(frozen=True, slots=True)
class Reuse:
    """An earlier outcome's downstream records, offered to a re-run of the same harness:
    used only if its downstream key equals the one computed now."""

    key: str
    run: int  # the run that computed them
    records: tuple[Mapping[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "run": self.run, "records": list(self.records)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Reuse":
        return cls(d["key"], int(d["run"]), tuple(d["records"]))


#: The kinds of independent numeric verdict a harness gets (a compare record's ``facts.against``
#: says which: the jaxpr or the harness's reference, an invariant, or none).
VERDICT_KINDS = ("reference", "invariant", "none")


def verdict_table(rows: Iterable[tuple[str, str, str | None]]) -> dict[str, Any]:
    """``(group, kind, reason)`` per harness → per group and in total how many harnesses
    get each verdict kind, and why those with ``none`` get none (most common first).

    One table for what a catalog will get (``farm.reference.coverage``) and what a run got
    (``farm.analysis.verdicts``): ``{"total", "reference", "invariant", "none",
    "reasons": {reason: n}, "groups": {group: {the same keys}}}``."""
    groups: dict[str, dict[str, Any]] = {}
    for group, kind, reason in rows:
        g = groups.setdefault(group, {"total": 0, **dict.fromkeys(VERDICT_KINDS, 0), "reasons": Counter()})
        g["total"] += 1
        g[kind] += 1
        if kind == "none":
            g["reasons"][reason] += 1
    total: dict[str, Any] = {"total": 0, **dict.fromkeys(VERDICT_KINDS, 0), "reasons": Counter()}
    for g in groups.values():
        for key in ("total", *VERDICT_KINDS):
            total[key] += g[key]
        total["reasons"].update(g["reasons"])
        g["reasons"] = dict(g["reasons"].most_common())
    total["reasons"] = dict(total["reasons"].most_common())
    return {**total, "groups": dict(sorted(groups.items()))}
