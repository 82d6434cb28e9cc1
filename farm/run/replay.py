"""Replay: stored export artifacts re-run on the current jax through the pipeline's stages,
and compared with the outputs stored when they were made.

Replay is another source of modules for the same stages and the same judging:

* where artifacts come from (``replay_sources``): a sweep's own exports (``--from RUN``,
  ``--since DATE``), or JAX's back-compat data shipped in the wheel (``--jax-backcompat``),
  imported as artifacts first;
* the stages (``replay_stages``): ``serialize`` (the stored bytes read back), ``compile``,
  ``execute``, ``compare``, records of the contract (``farm.results``) built by the
  stages' own functions; ``--against-today`` adds an ``xhost`` record (the artifact beside
  today's jit of the same harness);
* judging (``replay_judge``): the catalog's tolerances, and the pipeline's limitation
  judge for an artifact whose harness is still in the catalog.

Each artifact's records are one ``Outcome`` in a run of kind ``replay``, so it shows in the
dashboard and in ``farm compare``. ``farm replay`` reports each artifact by the record that
decides it (``ReplayedArtifact``): how old it is, whether it is inside JAX's stated
compatibility window, which custom calls it uses and whether each is still guaranteed
stable, and how the outputs were judged (exact, within tolerance, or by an invariant).

This module is the driver and the public face: the names below are re-exported from the
modules beside it.
"""
from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from sqlalchemy.orm import Session

from farm.stages import compat
from farm.catalog import Harness, by_fingerprint, load as load_catalog
from farm.errors import FarmError
from farm.pipeline.references import upcast
from farm.pipeline.replay_judge import (  # noqa: F401  (public names)
    JUDGED, NON_UNIQUE, compare_replayed, coverage, invariant_error, judge, judge_limitations, reconstruct, tolerance,
)
from farm.pipeline.replay_load import (  # noqa: F401  (public names)
    FORMAT_JAX_EXPORT, FORMAT_STABLEHLO, FORMATS, WINDOW_DAYS, ReplayError, artifact_facts, custom_calls_of,
    load_exported,
)
from farm.run.replay_sources import (  # noqa: F401  (public names)
    BACKCOMPAT_CATALOG, BACKCOMPAT_PACKAGE, BackCompatEntry, StoredExport, backcompat_entries, census_custom_calls,
    from_run, import_backcompat, io_blob, poly_specs, primitive_of, select_exports, since,
)
from farm.pipeline.replay_stages import REPLAY_STAGES, Loaded, StoredArtifact, Target, run_stages
from farm.platforms import native_platform
from farm.results import SEVERITY, Options, Outcome, Record
from farm.stages import trace, xhost
from farm.stages.execute import to_numpy
from farm.stages.record import Timer, failure
from farm.store import artifacts, writes
from farm.store.models import ArtifactRow


@dataclass(frozen=True, slots=True)
class ReplayedArtifact:
    """One artifact's replay as ``farm replay`` reports it: the outcome that is stored, read
    through the record that decides it (the worst of the replay stages, the last of equals)."""

    outcome: Outcome
    platform: str

    @property
    def records(self) -> list[Record]:
        return [r for r in self.outcome.records if r.stage in REPLAY_STAGES]

    @property
    def verdict(self) -> Record:
        worst = max(SEVERITY[r.status] for r in self.records)
        return [r for r in self.records if SEVERITY[r.status] == worst][-1]

    @property
    def status(self) -> str:
        return self.verdict.status

    @property
    def error(self) -> str | None:
        return self.verdict.error

    @property
    def error_type(self) -> str | None:
        return self.verdict.error_type

    @property
    def metrics(self) -> Mapping[str, float]:
        return self.verdict.metrics

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.records)

    @property
    def facts(self) -> dict[str, Any]:
        """The artifact's facts (its serialize record's), how the outputs were judged and,
        when it did not replay, why."""
        by_stage = {r.stage: r for r in self.records}
        cmp = by_stage.get("compare")
        return {**{k: v for k, v in by_stage["serialize"].facts.items() if k != "reason"},
                "judged": cmp.facts.get("judged", "none") if cmp is not None else "none",
                "reason": self.verdict.facts.get("reason")}


@dataclass
class ReplayReport:
    """What ``farm replay`` prints: the run, each artifact's replay, and coverage."""

    run_id: int
    run_name: str
    items: list[tuple[StoredExport, ReplayedArtifact]]
    coverage: dict[str, Any] | None = None

    def counts(self) -> dict[str, int]:
        return dict(Counter(r.status for _, r in self.items))

    def summary(self) -> dict[str, Any]:
        """Counts by status, with failures split into real breakages (inside JAX's window)
        and artifacts outside the window, and non-unique/tolerance passes counted apart."""
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
                               "seconds": round(r.seconds, 4), "metrics": dict(r.metrics), **r.facts}
                              for it, r in self.items],
                "coverage": self.coverage}


def replay(session: Session, items: Sequence[StoredExport], *, env: dict[str, Any], today: dt.date | None = None,
           name: str | None = None, filters: dict[str, Any] | None = None, catalog: str = "farm",
           today_lowering: bool = False, opts: Options = Options()) -> ReplayReport:
    """Replay ``items`` into a new run of kind ``replay`` (caller commits).

    ``today_lowering``: also run today's jit of each harness still in the catalog beside
    the replayed artifact (an ``xhost`` record)."""
    today = today or dt.date.today()
    platform = native_platform(jax.default_backend())
    target = Target(platform, jax.device_count(), opts)
    run = writes.create_run(session, env=env, name=name, kind="replay", catalog=catalog, filters=filters or {},
                            platforms=[platform], run_on=[platform], total=len(items))
    writer = writes.Writer(session, run, writes.harness_ids(session, [it.harness for it in items]))
    harnesses = _CatalogHarnesses()
    done: list[tuple[StoredExport, ReplayedArtifact]] = []
    for it in items:
        outcome = replay_outcome(session, it, today=today, target=target, harness=harnesses.get(it.harness),
                                 today_lowering=today_lowering)
        writer.write([outcome], worker="replay")
        done.append((it, ReplayedArtifact(outcome, platform)))
    report = ReplayReport(run.id, run.name, done)
    writes.finish_run(session, run, "finished", {"replayed": len(done), "counts": report.counts()})
    session.flush()
    return report


def replay_outcome(session: Session, item: StoredExport, *, today: dt.date, target: Target,
                   harness: Harness | None = None, today_lowering: bool = False) -> Outcome:
    """One stored export through the replay stages, judged by its catalog harness's
    limitations when it has one; records without their handles, as stored."""
    t0 = time.perf_counter()
    row = session.get(ArtifactRow, item.export_sha)
    meta = dict(row.meta or {}) if row is not None else {}
    facts = {"source": item.source_run or item.harness.get("source") or "", "export": item.export_sha,
             **artifact_facts(meta, row.jax_version if row is not None else None,
                              row.created_at if row is not None else None, today)}
    art = StoredArtifact(item.export_sha, item.io_sha or meta.get("io"), meta, facts)
    records = run_stages(lambda sha: artifacts.get(session, sha)[1], art, target,
                         primitive=str(item.harness.get("primitive", "")), dtype=item.harness.get("dtype"),
                         harness=harness)
    if today_lowering and harness is not None and any(r.stage == "execute" and r.ok for r in records):
        loaded = next(r.handle for r in records if r.stage == "serialize")
        extra = against_today(harness, loaded, target.platform)
        if extra is not None:
            records.append(extra)
    if harness is not None:
        records = judge_limitations(harness, records)
    return Outcome(item.harness["fingerprint"], item.harness["name"],
                   [r.with_status(r.status, handle=None) for r in records], (), time.perf_counter() - t0)


class _CatalogHarnesses:
    """The catalog harness of a stored harness description (by fingerprint), or None: the
    back-compat data, a catalog this farm cannot load, a harness no longer in it."""

    def __init__(self) -> None:
        self._by_catalog: dict[str, dict[str, Harness]] = {}

    def get(self, described: Mapping[str, Any]) -> Harness | None:
        name = described.get("catalog", "farm")
        if name == BACKCOMPAT_CATALOG:
            return None
        if name not in self._by_catalog:
            try:
                self._by_catalog[name] = by_fingerprint(load_catalog(name))
            except FarmError:
                self._by_catalog[name] = {}
        return self._by_catalog[name].get(described.get("fingerprint"))


def against_today(h: Harness, loaded: Loaded, platform: str) -> Record | None:
    """Today's jit of the same harness beside the stored artifact: the ``xhost`` stage (an
    artifact made by another jax, run here, compared with the outputs stored with it and
    with this jax's own lowering on the same inputs). None for raw StableHLO artifacts,
    which ``jax.export`` cannot deserialize."""
    if loaded.meta.get("format", FORMAT_JAX_EXPORT) != FORMAT_JAX_EXPORT:
        return None
    timer = Timer()
    try:
        with timer(), compat.enable_x64(h.needs_x64):
            args = h.make_args()
            tr = trace.run(h, args)
            if not tr.ok:
                return xhost.CrossHost("xhost", platform, "error", tr.seconds, error_type=tr.error_type,
                                       error=f"today's trace failed: {tr.error}", facts={"against": "today"})
            promised = tr.facts.get("outputs")
            native = to_numpy(tr.handle.jitted(*tr.handle.dyn))
            rtol, atol = h.tolerance(platform, promised[0]["dtype"] if promised else None)
            invariant = None if h.invariant is None else (lambda outs: _invariant_error(h, args, outs))
            prior = xhost.Prior(loaded.blob, loaded.inputs, loaded.expected, dict(loaded.meta))
            return xhost.run(prior, platform, tr.handle.dyn, native=native, reference=None, rtol=rtol, atol=atol,
                             exact=h.compare == "exact", promised=promised, invariant=invariant)
    except Exception as e:
        return failure(xhost.CrossHost, "xhost", platform, e, timer.seconds, facts={"against": "today"})


def _invariant_error(h: Harness, args: list[Any], outs: list[Any]) -> float:
    """The harness invariant's error for these outputs, in float64 (as the pipeline's)."""
    with np.errstate(all="ignore"):
        return float(h.invariant(*[upcast(a) for a in args], *outs))
