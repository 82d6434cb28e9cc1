"""The results contract: statuses, stages, records and outcomes, and the options of a run.

Every part of the farm speaks this vocabulary (catalog, stages, pipeline, run, store,
analysis, faces) and this module imports nothing of the farm, so any of them can import
it. Each type has one typed ``to_dict``/``from_dict``: outcomes cross process
boundaries (Ray, standalone workers' bundles) as plain dicts.
"""
from __future__ import annotations

import functools
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
#: Every status, worst first (what a cell's colour follows).
WORST_FIRST = tuple(sorted(STATUSES, key=SEVERITY.__getitem__, reverse=True))
# Statuses grouped by what they say, each grouping named once here (never restated as a literal):
#: the stage ran and its result held (a stale limitation's ``unexpected_pass`` included)
PASSED = ("ok", "unexpected_pass")
#: what the catalog says it should be: a pass, or the failure a limitation describes
GOOD = ("ok", "expected_fail")
#: broken, worst first: a new one is a regression (``BAD`` less ``unexpected_pass``, which is a finding
#: about the catalog, not about JAX)
BROKEN = ("crashed", "timeout", "error", "fail")
#: the stage raised or never finished
ERRORS = ("crashed", "timeout", "error")
#: the process died or hung: about one attempt
LOST = NOT_REUSABLE
#: nothing ran: it had nothing to do or cannot run here
NOT_RUN = ("skipped", "not_runnable_here")
#: a failure ``farm repro`` makes a script of (an expected one too: it is still JAX's bug)
REPRODUCIBLE = (*BROKEN, "expected_fail")
#: nothing to triage: no failure signature
QUIET = ("ok", *NOT_RUN, "expected_fail")
#: what a ``Limitation`` may expect a stage to end with
EXPECTABLE = ("fail", "error", "not_runnable_here", "crashed")
#: ran to its end: its seconds are a timing (a raised or killed stage's are not)
TIMED = ("ok", "unexpected_pass", "fail", "expected_fail")
#: the trend plots' classes: what a reader asks first is "how many passed, how many broke"
OUTCOME_CLASS = {**dict.fromkeys(PASSED, "pass"), **dict.fromkeys(BROKEN, "fail"), "expected_fail": "expected",
                 **dict.fromkeys(NOT_RUN, "skipped")}

#: One harness in this many is made again by ``--check-determinism sample`` (drawn by fingerprint).
DETERMINISM_SAMPLE = 64


@dataclass(frozen=True, slots=True)
class Choice:
    """A check's ``farm sweep`` option that picks which harnesses it runs for: ``--flag`` alone
    means ``const``; ``values[0]`` (not given) turns it off."""

    flag: str
    field: str
    values: tuple[str, ...]
    const: str
    help: str


@dataclass(frozen=True, slots=True)
class CheckSpec:
    """What a check declares, as data every part of the farm reads without running it (the
    store, the analysis, the faces). Its code is a ``farm.pipeline.check.Check`` holding this
    spec; ``farm.pipeline.registry`` holds the checks, and every stage list below, which
    limitations carry to which stage, the options digest and the harness fingerprint are
    derived from the specs, never listed by hand."""

    name: str
    #: the record stages it produces, in display order
    stages: tuple[str, ...]
    #: its records may be an earlier run's where the downstream key (the modules, inputs and
    #: compiler) is unchanged; the others run again on every result-cache miss (upstream)
    reusable: bool = False
    #: the stages a ``Limitation`` may name for it (None: its stages)
    limit_stages: tuple[str, ...] | None = None
    #: per (stage, "is the record's platform the cpu"), the earlier stages' limitations that
    #: explain a failure here too, each (stage, platform; None: the record's own platform)
    carries: tuple[tuple[tuple[str, bool], tuple[tuple[str, str | None], ...]], ...] = ()
    #: the ``Options`` fields it owns: at their defaults they are left out of ``Options.to_dict``
    #: and the result key (a run from before the check existed keeps its options and keys) ...
    options: tuple[str, ...] = ()
    #: ... except these, keyed from the start
    keyed_at_default: tuple[str, ...] = ()
    #: the ``Harness`` field that defines what this check runs (None: nothing of its own) and the
    #: attribute of it holding code: its description and that code's source enter the fingerprint
    harness_field: str | None = None
    harness_code: str | None = None
    #: the check runs only for a harness that sets ``harness_field`` (False: for every harness,
    #: the field refining what it runs); the pipeline asks nothing else of a harness without it
    gated: bool = True
    #: facts of its records that name more platforms whose limitations judge the record too
    #: (a Pallas target's ``backend``; the platforms whose own export sank a four-platform one);
    #: a record's platform ``tpu:v5e`` (a target) is judged by ``tpu``'s as well
    platform_facts: tuple[str, ...] = ()
    #: its ``farm sweep`` option, where it is a choice of which harnesses it runs for (``--edges
    #: [representative|all]``): the sweep's parser, its checks, Bazel's FARM_<FIELD> and a
    #: version sweep read it from here
    choice: "Choice | None" = None

    @property
    def limits(self) -> tuple[str, ...]:
        return self.stages if self.limit_stages is None else self.limit_stages


def _carried_gradients() -> tuple[tuple[tuple[str, bool], tuple[tuple[str, str | None], ...]], ...]:
    """Every vjp module runs on the CPU backend: a known XLA CPU numerics gap shows in its
    derivatives too, and another platform's module fails there as its crossexec does."""
    return tuple(((s, cpu), (("compare", None), ("execute", None), ("run", None)) if cpu else
                  (("crossexec", None), ("compare", "cpu"), ("run", "cpu")))
                 for s in ("vjp", "vjp2") for cpu in (True, False))


#: The built-in checks, in display order (``farm.pipeline.registry`` runs them: the upstream
#: ones first, in its order, then the reusable ones).
CHECKS = (
    # a harness traced, lowered per platform, the census of each module (and, sharded, its
    # structure), the multi-platform export and its serialize round trip
    CheckSpec("lowering", ("trace", "lower", "census", "sharding", "export", "serialize")),
    # compile and execute on each run-on kind, the outputs judged; on the CPU the other
    # platforms' modules run here (crossexec), another host's artifact run here (xhost).
    # ``run`` in a Limitation: "does not work on this device" without saying where (RUN_STAGES)
    CheckSpec("native", ("compile", "execute", "compare", "crossexec", "xhost"), reusable=True,
              limit_stages=("compile", "execute", "compare", "crossexec", "run")),
    # ``--shapes symbolic``: the leading dimension symbolic, exported, serialized and called at
    # several sizes (``farm.pipeline.symbolic``). With no limitation of its own, a symbolic stage
    # is judged by the static stage's on that platform: JAX refusing to lower eig for tpu refuses
    # its symbolic variant too, and a module the CPU backend miscomputes for another platform
    # (crossexec) is miscomputed when refined from a symbolic one. Another platform's module is
    # called on the CPU backend, so where the harness cannot be lowered for the cpu (LAPACK has
    # no bf16) the CPU backend cannot run it either, and a known XLA CPU numerics gap (the cpu's
    # compare limitation) shows in it too. ``run``: JAX's catalog's "fails somewhere here".
    CheckSpec("symbolic", ("symbolic_export", "symbolic_serialize", "symbolic_call"),
              carries=((("symbolic_export", True), (("lower", None), ("export", None), ("run", None))),
                       (("symbolic_export", False), (("lower", None), ("export", None), ("run", None))),
                       (("symbolic_call", True), (("compare", None), ("execute", None), ("compile", None),
                                                  ("run", None))),
                       (("symbolic_call", False), (("crossexec", None), ("lower", "cpu"), ("compare", "cpu"),
                                                   ("run", "cpu")))),
              options=("shapes",), keyed_at_default=("shapes",), harness_field="poly", harness_code="maker",
              gated=False, platform_facts=("sunk_by",)),
    # a harness with side effects (``Harness.effects``: debug prints, callbacks,
    # ``lax.platform_dependent``): one record per export configuration, what its exported,
    # deserialized and relabelled artifacts printed, received and returned on the CPU
    CheckSpec("effects", ("effects_export",), harness_field="effects", harness_code="build"),
    # an export-feature harness (``Harness.feature``: donation, a typed PRNG key, a disabled
    # safety check, device-count polymorphism): one record per export configuration
    CheckSpec("features", ("export_feature",), harness_field="feature", harness_code="fun"),
    # a Pallas kernel (``Harness.pallas``): one record per target (a TPU generation, cuda with
    # Mosaic GPU or Triton, rocm with Triton), lowered, exported, its custom call's census and the
    # round trip; where the kernel ships a jnp reference, the interpret-mode kernel against it
    CheckSpec("pallas", ("pallas_export", "pallas_reference"), options=("pallas_targets",),
              harness_field="pallas", harness_code="build", platform_facts=("backend",)),
    # a version sweep's cross run: another jax's ``pallas_export`` artifact deserialized here
    CheckSpec("pallas_xver", ("pallas_xver",), platform_facts=("backend",)),
    # ``--vjp [1|2]``: the export serialized with its vjp modules, read back, each platform's
    # vjp taken on the CPU at order 1 (``vjp``) and 2 (``vjp2``), judged against ``jax.vjp`` and
    # finite differences of the float64 reference (docs/gradients.md)
    CheckSpec("gradients", ("vjp", "vjp2"), carries=_carried_gradients(), options=("vjp",)),
    # ``--check-determinism [sample|all]``: each platform's module and the four-platform export
    # made again in the worker (after every other check of the harness: twice in one process)
    # and in a fresh child process, against the ones the sweep kept: a difference is a fail
    # showing both module texts (docs/determinism.md)
    CheckSpec("determinism", ("determinism",), options=("determinism",),
              choice=Choice("--check-determinism", "determinism", ("off", "sample", "all"), "sample",
                            "also make each harness's modules and export again, in the worker after everything "
                            "else and in a fresh process, and fail any that differ from the kept ones "
                            f"(docs/determinism.md): sample (the default: one harness in {DETERMINISM_SAMPLE}, drawn by "
                            "fingerprint) "
                            "or all")),
    # ``--compositions [representative|all]``: the deserialized export called inside ``jit`` with
    # shardings, ``vmap``, ``grad``, ``scan``, ``cond``, a ``while`` loop, a nested export and with
    # donated arguments, one record per composition, each against the artifact's own call
    # (docs/compositions.md)
    # A composition compiles the artifact's program on the CPU backend: where the compile of that
    # program is a known gap (a reshard onto another mesh), its own call inside jit fails so too.
    CheckSpec("compositions", ("composition",), options=("compositions",),
              carries=((("composition", False), (("compile", "cpu"),)),),
              choice=Choice("--compositions", "compositions", ("off", "representative", "all"), "representative",
                            "also call each harness's deserialized export as users do: inside jit with shardings, "
                            "vmap, grad, scan, cond, a while loop, another export, with donated arguments; each "
                            "against the artifact's own call (docs/compositions.md): representative (the default: "
                            "every harness of the export-feature and sharding families, one per primitive of the "
                            "others) or all")),
    # ``--edges [representative|all]``: the function compiled for the CPU and run with each
    # operand at its dtype's edge values (NaN, ±inf, ±0, subnormals, extremes, integer limits),
    # then all together, one record per variant, against the float64 jaxpr reference
    # (docs/edges.md). A known XLA CPU numerics gap (the cpu's compare limitation) shows there too.
    CheckSpec("edges", ("edge_values",), options=("edges",),
              carries=((("edge_values", False), (("compare", "cpu"),)),),
              choice=Choice("--edges", "edges", ("off", "representative", "all"), "representative",
                            "also run each harness compiled for the CPU with each operand at its dtype's edge values "
                            "(NaN, ±inf, ±0, subnormals, extremes, integer limits), then all together, against the "
                            "float64 reference (docs/edges.md): representative (the default: one harness per "
                            "primitive) or all")),
)
_BUILT_IN = {c.name: c for c in CHECKS}
_REGISTERED: dict[str, CheckSpec] = {}  # added at run time (``farm.pipeline.registry.register``)


def check_spec(name: str) -> CheckSpec:
    """A check's spec by name (built in or registered)."""
    return _REGISTERED.get(name) or _BUILT_IN[name]


@functools.cache
def check_specs() -> tuple[CheckSpec, ...]:
    """Every check's spec: the built-in ones, then those registered at run time."""
    return CHECKS + tuple(_REGISTERED.values())


def register_spec(spec: CheckSpec) -> None:
    """Declare a check added at run time (``farm.pipeline.registry.register`` calls this)."""
    if spec.name in _BUILT_IN or spec.name in _REGISTERED:
        raise ValueError(f"a check named {spec.name!r} exists")
    taken = {s for c in check_specs() for s in c.stages}
    if clash := taken.intersection(spec.stages):
        raise ValueError(f"stages {sorted(clash)} belong to another check")
    _REGISTERED[spec.name] = spec
    _derived_changed()


def unregister_spec(name: str) -> None:
    _REGISTERED.pop(name, None)
    _derived_changed()


def _derived_changed() -> None:
    """What is derived from the specs is memoized (the judge asks per record): recompute it."""
    for f in (check_specs, stages, upstream_stages, limitation_stages, carried, check_of, _owned_options):
        f.cache_clear()


@functools.cache
def stages() -> tuple[str, ...]:
    """Every check's stages, in display order."""
    return tuple(s for c in check_specs() for s in c.stages)


@functools.cache
def upstream_stages() -> tuple[str, ...]:
    """Stages that run before anything is compiled: always run again on a result-cache miss."""
    return tuple(s for c in check_specs() if not c.reusable for s in c.stages)


@functools.cache
def limitation_stages() -> tuple[str, ...]:
    """Stages a ``Limitation`` can name, in pipeline order."""
    return tuple(s for c in check_specs() for s in c.limits)


@functools.cache
def check_of(stage: str) -> CheckSpec | None:
    """The check a stage belongs to (None: a stage no check declares)."""
    return next((c for c in check_specs() if stage in c.stages), None)


@functools.cache
def carried(stage: str, on_cpu: bool) -> tuple[tuple[str, str | None], ...]:
    """The earlier stages' limitations that explain a failure of ``stage`` too (``CheckSpec.carries``)."""
    for c in check_specs():
        for key, via in c.carries:
            if key == (stage, on_cpu):
                return via
    return ()


#: The built-in checks' stages in display order (records of these names exist; a native run
#: on a foreign backend adds ``<stage>_run`` records for crossexec's execution); each
#: feature's stages; the stages before anything compiles (never reused); the stages a
#: Limitation can name. Derived from ``CHECKS``; ``stages()`` and its siblings also see the
#: checks registered at run time.
STAGES = stages()
SYMBOLIC_STAGES = check_spec("symbolic").stages
EFFECTS_STAGES = check_spec("effects").stages
FEATURE_STAGES = check_spec("features").stages
PALLAS_STAGES = (*check_spec("pallas").stages, *check_spec("pallas_xver").stages)
GRADIENT_STAGES = check_spec("gradients").stages
UPSTREAM_STAGES = upstream_stages()
LIMITATION_STAGES = limitation_stages()
#: The shape kinds a sweep runs each harness at: as declared, or with a symbolic dimension.
SHAPE_KINDS = ("static", "symbolic")
#: The vjp orders a sweep can ask for (0: none).
VJP_ORDERS = (0, 1, 2)
#: Which harnesses the determinism check makes again (``Options.determinism``): none, a sample
#: drawn by fingerprint (``DETERMINISM_SAMPLE``: one in that many), or every one.
DETERMINISM = check_spec("determinism").choice.values
#: Which harnesses the compositions check calls inside larger programs (``Options.compositions``):
#: none, every harness of the export-feature and sharding families and one per primitive of the
#: others, or every one.
COMPOSITIONS = check_spec("compositions").choice.values
#: Which harnesses the edge-values check runs (``Options.edges``): none, one per primitive of
#: the catalog, or every one.
EDGES = check_spec("edges").choice.values
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
        return self.status in PASSED

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
    determinism: str = "off"  # DETERMINISM: which harnesses are made again, in the worker and in a fresh process
    compositions: str = "off"  # COMPOSITIONS: which harnesses' artifacts are called inside larger programs
    edges: str = "off"  # EDGES: which harnesses run with their operands at edge values

    def __post_init__(self) -> None:
        if self.vjp not in VJP_ORDERS:
            raise ValueError(f"vjp order must be one of {VJP_ORDERS}, got {self.vjp!r}")
        if self.determinism not in DETERMINISM:
            raise ValueError(f"determinism must be one of {DETERMINISM}, got {self.determinism!r}")
        if self.compositions not in COMPOSITIONS:
            raise ValueError(f"compositions must be one of {COMPOSITIONS}, got {self.compositions!r}")
        if self.edges not in EDGES:
            raise ValueError(f"edges must be one of {EDGES}, got {self.edges!r}")

    def to_dict(self) -> dict[str, Any]:
        """Every field, less a check's at its default (``CheckSpec.options``): the options of a
        run from before that check existed stay as they were."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self._fields(keyed=False)}

    def key_fields(self) -> dict[str, Any]:
        """The fields that make the result cache's options digest (``farm.cache.key``): every
        field, less a check's at its default (unless ``CheckSpec.keyed_at_default``): older
        runs' keys stay as they were."""
        return dict(self._fields(keyed=True))

    def _fields(self, keyed: bool) -> list[tuple[str, Any]]:
        owned, keyed_anyway = _owned_options()
        always = keyed_anyway if keyed else frozenset()
        fields = self.__dataclass_fields__
        return [(k, getattr(self, k)) for k in fields
                if k not in owned or k in always or getattr(self, k) != fields[k].default]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Options":
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()
                      if k in cls.__dataclass_fields__})


def choices() -> tuple[Choice, ...]:
    """Every check's which-harnesses option (``CheckSpec.choice``), in the checks' order."""
    return tuple(c.choice for c in check_specs() if c.choice is not None)


def owned_options() -> frozenset[str]:
    """The ``Options`` fields the checks own (what ``farm sweep`` asks beside the static stages,
    kept with a run for ``--resume``)."""
    return _owned_options()[0]


@functools.cache
def _owned_options() -> tuple[frozenset[str], frozenset[str]]:
    """(the Options fields checks own, those of them keyed at their defaults)."""
    return (frozenset(f for c in check_specs() for f in c.options),
            frozenset(f for c in check_specs() for f in c.keyed_at_default))


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
class Stamp:
    """Where a worker ran an outcome, for the driver only (never stored with the outcome): the
    process, its resident memory after the job (the driver recycles a worker past its budget),
    and, on a worker's first outcome, the environment it measures in (``farm.host.describe``),
    which the driver keeps under the worker's label."""

    pid: int
    rss: int = 0
    environment: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "rss": self.rss, "environment": None if self.environment is None
                else dict(self.environment)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Stamp":
        return cls(int(d["pid"]), int(d.get("rss") or 0), d.get("environment"))


@dataclass(frozen=True, slots=True)
class Outcome:
    """Everything one harness produced: its records and artifacts. The one form an outcome has
    from the worker that makes it to the store that writes it (``farm.formats.outcomes``: the
    codec of Ray's chunks, child processes' pipes, journals and bundles)."""

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
    #: the worker's process and memory (``Stamp``), for the driver; no store column, journal or bundle keeps it
    stamp: Stamp | None = None

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
                "artifacts": [a.to_dict() for a in self.artifacts],
                **({"stamp": self.stamp.to_dict()} if self.stamp is not None else {})}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Outcome":
        stamp = d.get("stamp")
        return cls(d["fingerprint"], d["name"], tuple(Record.from_dict(r) for r in d["records"]),
                   tuple(Artifact.from_dict(a) for a in d["artifacts"]), d.get("seconds", 0.0),
                   d.get("worker", ""), d.get("result_key"), d.get("downstream_key"), d.get("deps_key"),
                   d.get("deps"), Stamp.from_dict(stamp) if stamp else None)

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
