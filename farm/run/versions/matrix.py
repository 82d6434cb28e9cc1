"""JAX versions as a sweep dimension, and the cross-version export matrix.

``farm sweep --jax 0.8.3,0.9.2,0.10.2`` runs the selection once per jax version, each in
its own virtual environment provisioned from the package index and cached
(``$FARM_CACHE_DIR/jax-envs/jax-V``, default ``~/.cache/lowering-farm``): the farm's
pipeline runs there through the standalone worker (``python -m farm worker
--standalone``, this checkout on ``PYTHONPATH``; it needs only jax, numpy and scipy), on
that version's *own* catalog (the jobs carry the filters, not harness names: JAX's
catalog differs between versions), one run per version named ``NAME@jax=V``.

Then every ordered pair (A, B) of versions: the serialized exports A made (with the
inputs A ran and the outputs A got) are deserialized and run by B, and compared with the
reference, with A's outputs and with B's own lowering of the same harness (the ``xhost``
stage), one run per pair named ``NAME@xver=A>B``. A Pallas kernel's per-target artifacts
(``pallas_export``: TPU generations, cuda, rocm) travel too and are deserialized only by B
(``pallas_xver``: no TPU or GPU here), checked against what A saw. Old artifacts on a newer jax is JAX's
backward-compatibility promise; new artifacts on an older jax is forward compatibility.
``farm versions NAME`` prints the exported-on × run-on table.

Ray's ``runtime_env`` (pip) would do the same for Ray workers; a venv per version serves the
standalone worker, which every version can run without Ray or SQLAlchemy installed. The
venvs themselves are ``farm.run.versions.venvs``; this module is the matrix and its runs in the store.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
import dataclasses
from dataclasses import dataclass
from typing import Any

from farm.errors import FarmError
from farm.results import RunDims, owned_options

from farm.run.versions.venvs import JaxEnv, Log, _stderr, cache_root, provision, requirements, run_jobs


def native_jobs(filters: dict[str, Any], options: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Jobs that sweep the version's own catalog (``select``) and keep the exports and io
    files the cross-version pairs need."""
    return {"catalog": filters.get("catalog", "farm"), "modules": list(filters.get("modules") or []),
            "filters": filters, "select": filters, "fingerprints": [], "names": [], "timeout_s": timeout_s,
            "options": options, "keep_artifacts": ["export", "io"]}


def cross_jobs(store: Any, exported_on: str, filters: dict[str, Any], options: dict[str, Any],
               timeout_s: float) -> dict[str, Any]:
    """Jobs carrying every artifact run ``exported_on`` made (matched by fingerprint, else by
    name on the other version's catalog); records only come back."""
    from farm.run.bundles import priors  # deferred: farm.run.bundles imports jax export

    fps, names = run_harnesses(store, exported_on)
    # the other version's own lowering is needed on cpu only (xhost compares with it)
    # the artifacts carried are the static exports: no derivative or symbolic variant of its own here
    here = {**{k: v for k, v in options.items() if k not in owned_options() or k == "pallas_targets"},
            "platforms": ["cpu"], "run_on": ["cpu"], "crossexec": False, "keep_modules": False}
    return {"catalog": filters.get("catalog", "farm"), "modules": list(filters.get("modules") or []),
            "filters": filters, "fingerprints": fps, "names": names, "timeout_s": timeout_s,
            "options": here, "keep_artifacts": [], "priors": priors(store, exported_on, fps, names)}


def run_harnesses(store: Any, run_name: str) -> tuple[list[str], list[str]]:
    from sqlalchemy import select  # deferred: sqlalchemy; farm --help needs none

    from farm.store import queries
    from farm.store.models import HarnessRow, OutcomeRow

    with store.session() as s:
        run = queries.resolve_run(s, run_name)
        rows = s.execute(select(HarnessRow.fingerprint, HarnessRow.name)
                         .join(OutcomeRow, OutcomeRow.harness_id == HarnessRow.id)
                         .where(OutcomeRow.run_id == run.id).order_by(HarnessRow.name)).all()
    return [r[0] for r in rows], [r[1] for r in rows]


def native_name(base: str, version: str) -> str:
    return f"{base}@jax={version}"


def cross_name(base: str, exported_on: str, run_on: str) -> str:
    return f"{base}@xver={exported_on}>{run_on}"


def identity(version: str, filters: dict[str, Any], options: dict[str, Any], exported_on: str | None = None) -> str:
    """What a kept run must have been made with: the selection, the options, the version's
    requirements, the artifacts' version and the farm's own code (any change: run again)."""
    from farm.cache.key import farm_code  # deferred: hashes the farm's sources

    doc = [version, filters, options, requirements(version), exported_on, farm_code()]
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def kept(store: Any, name: str, ident: str) -> bool:
    """Whether a finished run ``name`` made with exactly ``ident`` exists (then it is not
    redone); a run of that name made otherwise is an error, never silently reused."""
    from farm.store import queries

    with store.session() as s:
        try:
            run = queries.resolve_run(s, name)
        except FarmError:
            return False
        if (run.stats or {}).get("version_sweep") == ident and run.status == "finished":
            return True
    raise FarmError(f"run {name} exists but was made with another selection, options, jax requirements or "
                    "farm code (or did not finish): give this version sweep another --name")


@dataclass
class VersionSweep:
    """What ``sweep`` did: the environments, and the runs it made or found (each step's wall
    time is printed as it finishes)."""

    envs: list[JaxEnv]
    runs: dict[str, str]  # run name -> "ran" or "kept" (finished earlier: an interrupted sweep resumed)


def sweep(store: Any, versions: list[str], base: str, filters: dict[str, Any], options: dict[str, Any], *,
          workers: int = 2, timeout_s: float = 120.0, cross: bool = True, dims: RunDims = RunDims(),
          log: Log = _stderr) -> VersionSweep:
    """One run per version on its own catalog, then one per ordered pair (A, B), A ≠ B.

    A run already finished under its name is kept, not redone: re-running the same command
    after an interruption continues where it stopped."""
    from farm.run.bundles import import_bundle  # deferred: farm.run.bundles imports jax export

    envs = [provision(v, log) for v in versions]
    for e in envs:
        log(f"farm: jax {e.version}: {e.how} ({e.seconds:.1f} s) {e.python}")
    workdir = cache_root() / "version-sweeps" / re.sub(r"[^\w.@=-]", "_", base)
    done: dict[str, str] = {}

    def step(name: str, env: JaxEnv, ident: str, jobs: Callable[[], dict[str, Any]], exported_on: str | None = None) -> None:
        if kept(store, name, ident):
            done[name] = "kept"
            return
        label = f"{exported_on}-to-{env.version}" if exported_on else f"jax={env.version}"
        paths = run_jobs(env, jobs(), workdir, label, workers, log)
        run_id, _, _ = import_bundle(store, paths, name=name, dims=dataclasses.replace(
            dims, series=base, jax_version=env.version, exported_on=exported_on))
        _mark(store, run_id, ident)
        for p in paths:
            os.remove(p)
        done[name] = "ran"

    for env in envs:
        step(native_name(base, env.version), env, identity(env.version, filters, options),
             lambda: native_jobs(filters, options, timeout_s))
    if cross:
        for a in envs:
            for b in envs:
                if a.version != b.version:
                    step(cross_name(base, a.version, b.version), b, identity(b.version, filters, options, a.version),
                         lambda a=a: cross_jobs(store, native_name(base, a.version), filters, options, timeout_s),
                         exported_on=a.version)
    return VersionSweep(envs, done)


def _mark(store: Any, run_id: int, ident: str) -> None:
    from farm.store.models import Run

    with store.session() as s:
        run = s.get(Run, run_id)
        run.stats = {**(run.stats or {}), "version_sweep": ident}


def sweeps(store: Any) -> list[str]:
    """Names of the version sweeps in ``store``, newest first (series with runs on a jax version)."""
    from sqlalchemy import select  # deferred: sqlalchemy; farm --help needs none

    from farm.store.models import Run

    with store.session() as s:
        names = s.scalars(select(Run.series).where(Run.jax_version.is_not(None), Run.series.is_not(None))
                          .order_by(Run.id.desc())).all()
    return list(dict.fromkeys(names))


def series_of(store: Any, ref: str) -> str:
    """The version sweep ``ref`` names: a version sweep's own name, or any run reference
    (``latest``, ``previous``, a name or an id) to one of its runs."""
    from farm.store import queries

    if ref in sweeps(store):
        return ref
    with store.session() as s:
        run = queries.resolve_run(s, ref)
        if run.series is None or run.jax_version is None:
            raise FarmError(f"run {run.name} is not part of a version sweep: run farm sweep --jax V1,V2 --name NAME")
        return run.series


def load(store: Any, base: str) -> tuple[dict[str, list[dict[str, Any]]], dict[tuple[str, str], list[dict[str, Any]]],
                                         dict[tuple[str, str], dict[str, Any]]]:
    """The rows of a version sweep's runs: native by version, cross by (exported on, run on),
    and the cross runs' stats (how many artifacts the other version's catalog lacked)."""
    from farm.store import queries, series

    native: dict[str, list[dict[str, Any]]] = {}
    cross: dict[tuple[str, str], list[dict[str, Any]]] = {}
    stats: dict[tuple[str, str], dict[str, Any]] = {}
    with store.session() as s:
        for r in series.series_runs(s, base):
            if r.jax_version and not r.exported_on:  # what the table reads of a version's own run
                native[r.jax_version] = queries.results(s, r.id, stage="trace,compare,export,census")
            elif r.jax_version and r.exported_on:
                cross[(r.exported_on, r.jax_version)] = queries.results(s, r.id, stage="xhost,pallas_xver")
                stats[(r.exported_on, r.jax_version)] = dict(r.stats or {})
    if not native:
        raise FarmError(f"no version sweep named {base!r} (runs {base}@jax=V): run farm sweep --jax V1,V2 --name {base}")
    return native, cross, stats
