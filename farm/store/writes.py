"""Batched, idempotent writes: runs, harness rows, results and artifacts.

Every write is keyed by a natural key and skips what is already there, so a sweep
killed at any point and resumed never duplicates or loses a finished result.
"""
from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, literal, select, update
from sqlalchemy.orm import Session

from farm.catalog import Harness
from farm.errors import ConfigError
from farm.results import NOT_REUSABLE, UPSTREAM_STAGES, Outcome, RunDims
from farm.store import artifacts, codedeps, deltas
from farm.store.environments import fingerprint as env_fingerprint
from farm.store.environments import get_or_create
from farm.store.inserts import bulk_insert_skipping, insert_skipping
from farm.store.models import Environment, HarnessRow, OutcomeRow, ResultRow, Run, StoredOutcomeRow, StoredResultRow
from farm.store.models.base import utcnow


def _insert_ignore(session: Session, model: type, rows: list[dict[str, Any]], keys: list[str]) -> None:
    """Core bulk insert on the table, not the ORM's bulk insert: the ORM splits rows into groups
    by which columns are None and sends each group row by row to PostgreSQL (~700 rows/s)."""
    if rows:
        session.flush()
        bulk_insert_skipping(session, model.__table__, rows, keys)  # type: ignore[attr-defined]


def _insert_select(session: Session, model: type, cols: list[str], query: Any, keys: list[str]) -> None:
    """INSERT INTO model (cols) SELECT ..., skipping rows whose natural key exists."""
    session.execute(insert_skipping(session, model, keys).from_select(cols, query))


def unique_name(session: Session, base: str) -> str:
    """``base``, or ``base-2``, ``base-3`` ... : the first no run of this database has."""
    taken = set(session.scalars(select(Run.name).where(Run.name.like(f"{base}%"))))
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


def generated_name(kind: str) -> str:
    """A run's name when none is given: kind, local time to the second, six random hex digits
    (``sweep-20261127-030243-4be1f0``). The time keeps it readable; the digits keep two runs
    created in the same second apart, in two processes or on two hosts, where neither can see
    the other's uncommitted row (before them both took ``sweep-20261127-030243`` and the second
    failed on the unique name). Two such runs collide once in 16.7 million."""
    return f"{kind}-{datetime.now():%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def create_run(session: Session, *, env: dict[str, Any], name: str | None = None, kind: str = "sweep",
               catalog: str = "farm", filters: dict[str, Any] | None = None, platforms: Iterable[str] = (),
               run_on: Iterable[str] = (), total: int = 0, dims: RunDims | None = None) -> Run:
    env_row = get_or_create(session, env)
    if name and re.fullmatch(r"\d+|latest|previous", name):

        raise ConfigError(f"run name {name!r} is reserved (numbers, 'latest' and 'previous' refer to runs)")
    if name and session.scalar(select(Run.id).where(Run.name == name)) is not None:

        raise ConfigError(f"a run named {name!r} already exists; use --resume {name} to continue it")
    run = Run(name=name or unique_name(session, generated_name(kind)), kind=kind,
              catalog=catalog, filters=filters or {}, platforms=list(platforms), run_on=list(run_on),
              total=total, environment_id=env_row.id, status="running", **(dims or RunDims()).to_dict())
    session.add(run)
    session.flush()
    return run


def harness_ids(session: Session, harnesses: Iterable[Harness | dict[str, Any]]) -> dict[str, int]:
    """fingerprint -> harnesses.id, inserting rows for new fingerprints.

    Accepts Harness objects or their ``describe()`` dicts (bundles from other hosts)."""
    descs = [h if isinstance(h, dict) else h.describe() for h in harnesses]
    hs = {d["fingerprint"]: d for d in descs}
    fps = list(hs)
    have: dict[str, int] = {}
    for i in range(0, len(fps), 500):
        have.update(session.execute(select(HarnessRow.fingerprint, HarnessRow.id)
                                    .where(HarnessRow.fingerprint.in_(fps[i:i + 500]))).tuples().all())
    new = [hs[fp] for fp in fps if fp not in have]
    if new:
        rows = []
        for d in new:
            rows.append({"fingerprint": d["fingerprint"], "name": d["name"], "catalog": d["catalog"],
                         "family": d["family"], "primitive": d["primitive"], "grp": d["group"], "dtype": d["dtype"],
                         "shapes": d["shapes"], "params": d["params"], "definition": d})
        _insert_ignore(session, HarnessRow, rows, ["fingerprint"])
        for i in range(0, len(fps), 500):
            have.update(session.execute(select(HarnessRow.fingerprint, HarnessRow.id)
                                        .where(HarnessRow.fingerprint.in_(fps[i:i + 500]))).tuples().all())
    return have


def finished(session: Session, run_id: int) -> set[int]:
    """harness ids that already have a complete outcome in this run."""
    return set(session.scalars(select(OutcomeRow.harness_id).where(OutcomeRow.run_id == run_id)))


def comparable_key(fp: str, platform: str, env_fp: str) -> str:

    return hashlib.sha256(f"{fp}|{platform}|{env_fp}".encode()).hexdigest()[:32]


class Writer:
    """Writes outcomes for one run; keeps a cache of known artifact hashes."""

    def __init__(self, session: Session, run: Run, hids: dict[str, int]) -> None:
        self.session = session
        self.run = run
        self.hids = hids
        env = session.get(Environment, run.environment_id)
        self.env_fp = env.fingerprint
        self.env_id = env.id
        self.jax_version = env.jax_version
        self.known_artifacts: set[str] = set()

    def write(self, outcomes: list[Outcome], worker: str = "") -> None:
        """Write a batch (caller commits). Outcomes already in the run are skipped."""
        if not outcomes:
            return
        ids = [self.hids[o.fingerprint] for o in outcomes]
        done = set(self.session.scalars(select(OutcomeRow.harness_id).where(
            OutcomeRow.run_id == self.run.id, OutcomeRow.harness_id.in_(ids))))
        shas = list(dict.fromkeys(a.sha256 for o in outcomes for a in o.artifacts if a.sha256 not in self.known_artifacts))
        have = artifacts.stored(self.session, shas) if shas else {}
        self.known_artifacts |= {sha for sha, intact in have.items() if intact}
        absent = set(shas) - set(have)
        results: list[dict[str, Any]] = []
        marks: list[dict[str, Any]] = []
        deps_rows = {sha: body for o in outcomes if o.deps for sha, body in o.deps.get("rows", {}).items()}
        if deps_rows:
            codedeps.put(self.session, deps_rows)
        new: list[tuple[str, str, bytes, str, dict]] = []
        for o, hid in zip(outcomes, ids):
            if hid in done:
                continue
            done.add(hid)
            for a in o.artifacts:
                version = a.meta.get("jax_version", self.jax_version)
                if a.sha256 in absent:
                    new.append((a.sha256, a.kind, a.data, version, a.meta))
                else:
                    artifacts.put(self.session, a.sha256, a.kind, a.data, jax_version=version, meta=a.meta,
                                  existing=self.known_artifacts)
            seen: set[tuple[str, str]] = set()
            for r in o.records:
                if (r.platform, r.stage) in seen:
                    continue
                seen.add((r.platform, r.stage))
                results.append({"run_id": self.run.id, "harness_id": hid, "platform": r.platform, "stage": r.stage,
                                "status": r.status, "seconds": max(0.0, float(r.seconds or 0.0)),
                                "error_type": (r.error_type or None) and r.error_type[:200],
                                "error": (r.error or None) and r.error[:1000], "detail": r.detail,
                                "metrics": _finite(r.metrics), "facts": dict(r.facts), "artifact_sha": r.artifact,
                                "comparable": comparable_key(o.fingerprint, r.platform, self.env_fp)})
            reusable = o.worst not in NOT_REUSABLE
            marks.append({"run_id": self.run.id, "harness_id": hid, "environment_id": self.env_id,
                          "worst": o.worst, "seconds": o.seconds, "worker": (o.worker or worker)[:128],
                          "result_key": o.result_key if reusable else None,
                          "downstream_key": o.downstream_key if reusable else None,
                          "deps_sha": o.deps.get("set") if reusable and o.deps and o.deps_key else None,
                          "deps_key": o.deps_key if reusable and o.deps else None})
        artifacts.put_new(self.session, new)
        self.known_artifacts |= {b[0] for b in new}
        self.session.flush()
        _insert_ignore(self.session, StoredResultRow, results, ["run_id", "harness_id", "platform", "stage"])
        _insert_ignore(self.session, StoredOutcomeRow, marks, ["run_id", "harness_id"])


def _finite(metrics: dict[str, float]) -> dict[str, float | str]:
    """JSON cannot hold inf/nan portably: keep them as strings."""
    out: dict[str, float | str] = {}
    for k, v in metrics.items():
        v = float(v)
        out[k] = v if v == v and v not in (float("inf"), float("-inf")) else str(v)
    return out


def copy_cached(session: Session, run: Run, keys: dict[int, str]) -> dict[int, int]:
    """Result cache, level 1: for each harness id, copy the newest earlier outcome with
    the same result key (``farm.cache.key.result_key``: harness definition, installation
    content, farm code, options) into ``run``. Outcomes without a key (crashed, timed
    out, a farm error) are never copied. Returns harness id -> the run that computed it."""
    if not keys:
        return {}
    by_key: dict[str, list[int]] = {}
    for hid, key in keys.items():
        by_key.setdefault(key, []).append(hid)
    source: dict[int, tuple[int, int]] = {}  # harness id -> (source run, origin run)
    key_list = list(by_key)
    for i in range(0, len(key_list), 500):
        rows = session.execute(
            select(OutcomeRow.harness_id, OutcomeRow.run_id, OutcomeRow.cached_from, OutcomeRow.result_key)
            .where(OutcomeRow.result_key.in_(key_list[i:i + 500]), OutcomeRow.run_id != run.id,
                   OutcomeRow.worst.not_in(NOT_REUSABLE))
            .order_by(OutcomeRow.run_id.desc())).tuples().all()
        for hid, src, origin, key in rows:
            if hid in keys and keys[hid] == key and hid not in source:
                source[hid] = (src, origin or src)
    copy_outcomes(session, run, source)
    return {hid: origin for hid, (_, origin) in source.items()}


def copy_outcomes(session: Session, run: Run, source: dict[int, tuple[int, int]],
                  result_keys: dict[int, str] | None = None) -> None:
    """Copy each harness's outcome and results from its source run (harness id -> (source
    run, origin run)) into ``run``. ``result_keys``: the result key each copy is filed
    under instead of its source's (a copy found by ``deps_key``: the key of today's tree,
    so that the next unchanged sweep finds it by the whole key)."""
    by_src: dict[int, list[int]] = {}
    for hid, (src, _) in source.items():
        by_src.setdefault(src, []).append(hid)
    cols = ["harness_id", "platform", "stage", "status", "seconds", "error_type", "error", "detail", "metrics",
            "facts", "artifact_sha", "comparable"]
    ocols = ["harness_id", "worst", "seconds", "result_key", "downstream_key", "deps_sha", "deps_key"]
    for src, ids in by_src.items():
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            # one INSERT ... SELECT per chunk in the database: no row makes a round trip through Python
            _insert_select(session, StoredResultRow, ["run_id", *cols],
                           select(literal(run.id), *[getattr(ResultRow, c) for c in cols])
                           .where(ResultRow.run_id == src, ResultRow.harness_id.in_(chunk)),
                           ["run_id", "harness_id", "platform", "stage"])
            _insert_select(session, StoredOutcomeRow, ["run_id", "environment_id", "worker", "cached_from", *ocols],
                           select(literal(run.id), literal(run.environment_id), literal("cache"),
                                  func.coalesce(OutcomeRow.cached_from, OutcomeRow.run_id),
                                  *[getattr(OutcomeRow, c) for c in ocols])
                           .where(OutcomeRow.run_id == src, OutcomeRow.harness_id.in_(chunk)),
                           ["run_id", "harness_id"])
    if result_keys:
        stmt = (update(StoredOutcomeRow).where(StoredOutcomeRow.run_id == run.id,
                                               StoredOutcomeRow.harness_id == bindparam("hid"))
                .values(result_key=bindparam("key")))
        session.connection().execute(stmt, [{"hid": h, "key": k} for h, k in result_keys.items() if h in source])


def deps_candidates(session: Session, run: Run, harness_ids_: list[int]) -> dict[int, list[tuple[int, int, str, str]]]:
    """Result cache by jax code (``farm.cache.units``): for each harness, the earlier
    reusable outcomes that recorded the jax code they ran, newest first, one per distinct
    code set: (run, origin run, set address, deps key). The caller recomputes each key on
    today's tree; an outcome whose key is unchanged is copied (``copy_outcomes``)."""
    out: dict[int, list[tuple[int, int, str, str]]] = {}
    seen: set[tuple[int, str, str]] = set()
    for i in range(0, len(harness_ids_), 500):
        rows = session.execute(
            select(OutcomeRow.harness_id, OutcomeRow.run_id, OutcomeRow.cached_from, OutcomeRow.deps_sha,
                   OutcomeRow.deps_key)
            .where(OutcomeRow.harness_id.in_(harness_ids_[i:i + 500]), OutcomeRow.run_id != run.id,
                   OutcomeRow.deps_key.is_not(None), OutcomeRow.deps_sha.is_not(None),
                   OutcomeRow.worst.not_in(NOT_REUSABLE))
            .order_by(OutcomeRow.run_id.desc())).tuples().all()
        for hid, rid, origin, sha, key in rows:
            if (hid, sha, key) not in seen:
                seen.add((hid, sha, key))
                out.setdefault(hid, []).append((rid, origin or rid, sha, key))
    return out


def downstream_priors(session: Session, run: Run, harness_ids_: list[int]) -> dict[int, dict[str, Any]]:
    """Result cache, level 2: for each harness, the newest earlier reusable outcome's
    downstream key and records (``pipeline.Reuse`` as a dict). The worker takes them only
    if the key it computes after lowering is the same."""

    newest: dict[int, tuple[int, int, str]] = {}  # harness -> (run id, origin run, key)
    for i in range(0, len(harness_ids_), 500):
        rows = session.execute(
            select(OutcomeRow.harness_id, OutcomeRow.run_id, OutcomeRow.cached_from, OutcomeRow.downstream_key)
            .where(OutcomeRow.harness_id.in_(harness_ids_[i:i + 500]), OutcomeRow.run_id != run.id,
                   OutcomeRow.downstream_key.is_not(None), OutcomeRow.worst.not_in(NOT_REUSABLE))
            .order_by(OutcomeRow.run_id.desc())).tuples().all()
        for hid, rid, origin, key in rows:
            newest.setdefault(hid, (rid, origin or rid, key))
    by_run: dict[int, list[int]] = {}
    for hid, (rid, _, _) in newest.items():
        by_run.setdefault(rid, []).append(hid)
    records: dict[int, list[dict[str, Any]]] = {}
    fields = ("stage", "platform", "status", "seconds", "error_type", "error", "detail", "metrics", "facts")
    for rid, ids in by_run.items():
        for i in range(0, len(ids), 500):
            q = select(ResultRow.harness_id, ResultRow.artifact_sha, *[getattr(ResultRow, f) for f in fields]).where(
                ResultRow.run_id == rid, ResultRow.harness_id.in_(ids[i:i + 500]),
                ResultRow.stage.not_in(UPSTREAM_STAGES))
            for row in session.execute(q).tuples():
                records.setdefault(row[0], []).append({**dict(zip(fields, row[2:])), "artifact": row[1]})
    return {hid: {"key": key, "run": origin, "records": records.get(hid, [])}
            for hid, (_, origin, key) in newest.items()}


def finish_run(session: Session, run: Run, status: str, stats: dict[str, Any] | None = None, *,
               delta: bool = True, max_fraction: float = deltas.MAX_FRACTION) -> deltas.Delta | None:
    """End a run. A finished run is compacted into a delta of an earlier identical run where
    that stores at most ``max_fraction`` of its harnesses (``farm.store.deltas``); readers
    cannot tell the difference. Returns what compaction did (None: not attempted)."""
    session.flush()
    d = deltas.compact(session, run, max_fraction=max_fraction) if delta and status == "finished" else None
    run.status = status
    run.finished_at = utcnow()
    if d is not None and d.base is not None:
        stats = {**(stats or {}), "delta": d.to_dict()}
    if stats:
        run.stats = {**(run.stats or {}), **stats}
    return d


__all__ = ["Writer", "copy_cached", "copy_outcomes", "deps_candidates", "create_run", "downstream_priors", "env_fingerprint", "finish_run", "finished", "harness_ids"]
