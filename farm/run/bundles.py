"""Results bundles in the store: ``farm import`` of a standalone worker's bundles, and the
CPU host's artifacts (priors) a device host's jobs file carries. The file format is
``farm.formats.bundles`` (a device host writes it without the store)."""
from __future__ import annotations

import base64
import dataclasses
from typing import Any

from farm.stages import compat
from farm.errors import FarmError
from farm.results import RunDims
from farm.formats.outcomes import from_json
from farm.formats.bundles import FORMAT, VERSION, keep_only, read, write, write_parts  # noqa: F401  (public)
from farm.stages.xhost import Prior


def import_bundle(store: Any, paths: str | list[str], name: str | None = None,
                  dims: RunDims | None = None) -> tuple[int, str, int]:
    """Load one bundle, or the parts of one split bundle, as one run of kind "import".

    A standalone worker's journal (``OUT.journal.jsonl``, left by a worker killed mid-run)
    loads as a partial bundle: every harness that finished, as an ``interrupted`` run.

    Every part is read and validated (``farm.formats.bundle_schema``) before anything is
    stored, and the run is written in one transaction: a refused bundle, or one the
    database refuses, stores no run and no blob (``FarmError``, one line)."""
    return import_docs(store, load(paths), paths, name, dims)


def load(paths: str | list[str]) -> list[dict[str, Any]]:
    """Read and validate every part (before a database is opened: a refused bundle creates nothing)."""
    from farm.formats import journal

    docs = [journal.read(p) if p.endswith(".jsonl") else read(p) for p in ([paths] if isinstance(paths, str) else paths)]
    doc = docs[0]
    for other in docs[1:]:
        if other["environment"] != doc["environment"] or other["run"].get("catalog") != doc["run"].get("catalog"):
            raise FarmError("these bundles come from different workers or catalogs; import them one by one")
    return docs


def import_docs(store: Any, docs: list[dict[str, Any]], paths: str | list[str], name: str | None,
                dims: RunDims | None = None) -> tuple[int, str, int]:
    """``load``'s documents as one run, in one transaction."""
    from sqlalchemy.exc import SQLAlchemyError  # deferred: sqlalchemy; bundle reading/writing needs no store

    try:
        return _store(store, docs, paths, name, dims)
    except SQLAlchemyError as e:
        first = str(getattr(e, "orig", None) or e).strip().splitlines()[0][:200]
        raise FarmError(f"the database refused the bundle ({type(e).__name__}: {first}); nothing was stored") from None


def _store(store: Any, docs: list[dict[str, Any]], paths: str | list[str], name: str | None,
           dims: RunDims | None) -> tuple[int, str, int]:
    from farm.store import writes  # deferred: farm.store.writes (sqlalchemy); bundle reading/writing needs no store

    doc = docs[0]
    outcomes = [from_json(o) for d in docs for o in d["outcomes"]]
    harnesses = [h for d in docs for h in d["harnesses"]]
    r = doc["run"]
    with store.session() as s:
        run = writes.create_run(s, env=doc["environment"], name=name or r.get("name"), kind="import",
                                catalog=r.get("catalog", "farm"), filters=r.get("filters", {}),
                                platforms=r.get("platforms", []), run_on=r.get("run_on", []),
                                total=len(harnesses), dims=dims)
        hids = writes.harness_ids(s, harnesses)
        writes.Writer(s, run, hids).write(outcomes, worker="bundle")
        partial = any((d["run"].get("stats") or {}).get("partial") for d in docs)
        # one standalone worker's environment, under each label its outcomes name (a child
        # process per slot, replaced after a crash; "bundle" for outcomes its parent wrote)
        envs = {label: doc["environment"] for label in sorted({o.worker or "bundle" for o in outcomes})}
        writes.finish_run(s, run, "interrupted" if partial else "finished",
                          {"imported_from": paths, **(r.get("stats") or {}), "worker_environments": envs})
        return run.id, run.name, len(outcomes)


def priors(store: Any, run_ref: str, fingerprints: list[str],
           names: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """For each job the run exported and executed on CPU: its serialized export, inputs
    and CPU outputs (``xhost.Prior`` as JSON), keyed by the job's fingerprint, for a device
    host's jobs file. A stored harness matches by fingerprint, else by name. A Pallas
    harness's kernel artifacts (its ``pallas_export`` records', one per target) come too,
    under ``"pallas"`` (with or without the ordinary export)."""
    from sqlalchemy import select  # deferred: sqlalchemy; bundle reading/writing needs no store

    from farm.store import artifacts, queries  # deferred: farm.store (sqlalchemy); bundle reading/writing needs no store
    from farm.store.models import HarnessRow, ResultRow  # deferred: farm.store.models (sqlalchemy); bundle reading/writing needs no store

    wanted = set(fingerprints)
    by_name = {n: fp for fp, n in zip(fingerprints, names or [])}
    out: dict[str, dict[str, Any]] = {}
    with store.session() as s:
        run = queries.resolve_run(s, run_ref)
        rows = s.execute(
            select(HarnessRow.fingerprint, HarnessRow.name, ResultRow.stage, ResultRow.artifact_sha)
            .join(HarnessRow, HarnessRow.id == ResultRow.harness_id)
            .where(ResultRow.run_id == run.id, ResultRow.artifact_sha.is_not(None),
                   ((ResultRow.stage == "serialize") | ((ResultRow.stage == "execute") & (ResultRow.platform == "cpu"))
                    | (ResultRow.stage == "pallas_export")))
            .add_columns(ResultRow.platform)
        ).all()
        shas: dict[str, dict[str, str]] = {}
        kernels: dict[str, dict[str, str]] = {}  # job -> {target label: sha}
        for fp, name, stage, sha, platform in rows:
            job = fp if fp in wanted else by_name.get(name)
            if job is not None and stage == "pallas_export":
                kernels.setdefault(job, {})[platform] = sha
            elif job is not None:
                shas.setdefault(job, {})[stage] = sha
        for fp, labels in kernels.items():
            kept = {}
            for label, sha in labels.items():
                row, blob = artifacts.get(s, sha)
                kept[label] = {"export": base64.b64encode(blob).decode(), "meta": {**(row.meta or {}), "target": label}}
            out[fp] = {"meta": {"jax_version": run.jax_version, "run": run.name}, "pallas": kept}
        for fp, d in shas.items():
            if "serialize" not in d or "execute" not in d:
                continue
            row, blob = artifacts.get(s, d["serialize"])
            _, io_npz = artifacts.get(s, d["execute"])
            meta = {"jax_version": row.jax_version, "platforms": (row.meta or {}).get("platforms"),
                    "run": run.name, "sha256": d["serialize"]}
            out[fp] = {**_typed(Prior.from_blobs(blob, io_npz, meta)).to_json(),
                       **({"pallas": out[fp]["pallas"]} if fp in out else {})}
    return out


def _typed(prior: Any) -> Any:
    """io blobs written before dtype names were kept hold bfloat16 as raw ``|V2``: take the
    dtypes from the export's avals instead."""
    if not any(a.dtype.kind == "V" for a in prior.inputs + prior.outputs):
        return prior

    import jax  # deferred: jax; only old |V2 blobs need it

    exp = compat.jax_export().deserialize(bytearray(prior.export))

    def fix(arrays: list[Any], avals: Any) -> list[Any]:
        return [a.view(av.dtype) if a.dtype.kind == "V" else a for a, av in zip(arrays, avals)]

    return dataclasses.replace(prior, inputs=fix(prior.inputs, exp.in_avals), outputs=fix(prior.outputs, exp.out_avals))
