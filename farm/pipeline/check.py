"""The one interface every check implements, and what a harness's run hands each check.

A check is a ``farm.results.CheckSpec`` (data: its stages, whether the cache may reuse its
records, the limitations it carries, the options and harness fields it owns) and two
methods: whether it applies to this run, and running it. ``farm.pipeline.registry`` holds
the checks; ``run_harness`` (``farm.pipeline.harness``) is one loop over them.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from farm.catalog import Harness
from farm.results import Artifact, CheckSpec, Options, Record
from farm.stages import export, lower, trace, xhost
from farm.stages.record import failure

#: What a check's ``run`` returns: its judged records (by its own judge; the harness's
#: limitations are applied to every record afterwards) and the artifacts it keeps.
Produced = tuple[list[Record], list[Artifact]]


@dataclass
class Run:
    """One harness's run as the checks see it: what was asked, the traced harness, and what
    the lowering check leaves for the others (``lowered``, ``serialized``, ``exported``,
    ``downstream_key``)."""

    h: Harness
    opts: Options
    prior: xhost.Prior | None  # another host's (another jax's) artifacts of this harness
    options_digest: str
    #: the harness's mesh is larger than this host: trace, lower, export and the structural
    #: checks only, nothing compiles or runs
    abstract: bool
    args: list[Any]
    traced: trace.Traced
    devices_here: int = 1  # devices of this process's default backend
    lowered: dict[str, lower.Lowered] = field(default_factory=dict)
    serialized: export.Serialized | None = None  # the artifact, where its round trip held
    exported: Any = None  # the live jax.export.Exported, where the export succeeded
    downstream_key: str | None = None  # what a reusable check's records are reused by
    #: the harness traced and its static shapes were asked for: the static path runs
    static: bool = field(init=False)
    dyn: list[Any] = field(init=False)  # the traced harness's dynamic arguments
    #: another host's export to run here (None where it carried Pallas artifacts only)
    xhost_prior: xhost.Prior | None = field(init=False)

    def __post_init__(self) -> None:
        self.static = self.traced.ok and "static" in self.opts.shapes
        self.dyn = self.traced.handle.dyn if self.traced.handle is not None else []
        self.xhost_prior = self.prior if self.prior is not None and self.prior.export else None

    def asks(self, check: "Check") -> bool:
        """Whether ``check`` runs: a gated check only for a harness that sets its field, then its ``applies``."""
        return concerns(check, self.h) and check.applies(self)


class Check(Protocol):
    """A check: its spec, whether it applies, and running it."""

    spec: CheckSpec

    def lacking(self, h: Harness) -> str | None:
        """What this jax lacks that ``h`` needs of this check (then the harness is ``skipped``
        with that reason, before anything is traced), else None."""
        ...

    def applies(self, run: Run) -> bool:
        ...

    def run(self, run: Run) -> Produced:
        """Never raises: the harness's other records must survive (``per_config``)."""
        ...


def concerns(check: Check, h: Harness) -> bool:
    """Whether ``check`` has anything to do with ``h``: a gated check only with a harness that
    sets its field (``CheckSpec.gated``); the pipeline asks nothing more of it otherwise."""
    spec = check.spec
    return not (spec.gated and spec.harness_field and getattr(h, spec.harness_field) is None)


class Base:
    """Defaults of the interface: nothing lacking; a check declares ``spec``, ``applies`` and ``run``."""

    spec: CheckSpec

    def lacking(self, h: Harness) -> str | None:
        return None


C = TypeVar("C")


def per_config(stage: str, configs: Iterable[C], label: Callable[[C], str], run: Callable[[C], Record],
               judge: Callable[[Record], Record]) -> list[Record]:
    """One judged record per configuration of a check that runs its stage several ways (export
    configurations, Pallas targets): a configuration that raises is the farm's own ``error``
    record, never a pass, and never takes the other configurations' records with it."""
    out: list[Record] = []
    for c in configs:
        try:
            rec = run(c)
        except Exception as e:  # the farm's own bug: an error record, never a pass
            rec = failure(Record, stage, label(c), e, 0.0)
        out.append(judge(rec))
    return out
