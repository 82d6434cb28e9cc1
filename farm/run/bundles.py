"""Results bundles: what a standalone worker writes and ``farm import`` loads.

A gzip'd JSON document with a format name and version; bytes are base64. A bundle of
an unknown version is refused with a clear error.
"""
from __future__ import annotations

import base64
import gzip
import json
from typing import Any

from farm.errors import FarmError, UnknownFormatVersion
from farm.results import Outcome

FORMAT = "lowering-farm-bundle"
VERSION = 1


def write(path: str, *, environment: dict[str, Any], run: dict[str, Any], harnesses: list[dict[str, Any]],
          outcomes: list[Outcome]) -> None:
    def enc(o: Outcome) -> dict[str, Any]:
        d = o.to_dict()
        for a in d["artifacts"]:
            a["data"] = base64.b64encode(a["data"]).decode()
        return d

    doc = {"format": FORMAT, "version": VERSION, "environment": environment, "run": run,
           "harnesses": harnesses, "outcomes": [enc(o) for o in outcomes]}
    with gzip.open(path, "wt") as f:
        json.dump(doc, f, default=str)


def read(path: str) -> dict[str, Any]:
    try:
        with gzip.open(path, "rt") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise FarmError(f"cannot read bundle {path!r}: {e}") from None
    if doc.get("format") != FORMAT:
        raise FarmError(f"{path!r} is not a Lowering Farm results bundle")
    if doc.get("version") != VERSION:
        raise UnknownFormatVersion(f"bundle {path!r} has version {doc.get('version')}; this farm reads {VERSION}")
    for o in doc["outcomes"]:
        for a in o["artifacts"]:
            a["data"] = base64.b64decode(a["data"])
    return doc


def import_bundle(store: Any, paths: str | list[str], name: str | None = None) -> tuple[int, str, int]:
    """Load one bundle, or the parts of one split bundle, as one run of kind "import"."""
    from farm.store import writes

    docs = [read(p) for p in ([paths] if isinstance(paths, str) else paths)]
    doc = docs[0]
    for other in docs[1:]:
        if other["environment"] != doc["environment"] or other["run"].get("catalog") != doc["run"].get("catalog"):
            raise FarmError("these bundles come from different workers or catalogs; import them one by one")
    outcomes = [Outcome.from_dict(o) for d in docs for o in d["outcomes"]]
    harnesses = [h for d in docs for h in d["harnesses"]]
    r = doc["run"]
    with store.session() as s:
        run = writes.create_run(s, env=doc["environment"], name=name or r.get("name"), kind="import",
                                catalog=r.get("catalog", "farm"), filters=r.get("filters", {}),
                                platforms=r.get("platforms", []), run_on=r.get("run_on", []),
                                total=len(harnesses))
        hids = writes.harness_ids(s, harnesses)
        writes.Writer(s, run, hids).write(outcomes, worker="bundle")
        writes.finish_run(s, run, "finished", {"imported_from": paths, **(r.get("stats") or {})})
        return run.id, run.name, len(outcomes)


def keep_only(outcomes: list[Outcome], kinds: set[str]) -> list[Outcome]:
    """The outcomes without artifacts of other kinds (and the records' references to
    them), to make a bundle smaller."""
    out = []
    for o in outcomes:
        dropped = {a.sha256 for a in o.artifacts if a.kind not in kinds}
        if dropped:
            o = o.replace(artifacts=[a for a in o.artifacts if a.kind in kinds],
                          records=[r.with_status(r.status, artifact=None) if r.artifact in dropped else r
                                   for r in o.records])
        out.append(o)
    return out


def write_parts(path: str, *, per_part: int, harnesses: list[dict[str, Any]], outcomes: list[Outcome],
                **kw: Any) -> list[str]:
    """``path`` itself, or ``NAME-1.json.gz``, ``NAME-2.json.gz``... of at most ``per_part`` outcomes."""
    if len(outcomes) <= per_part:
        write(path, harnesses=harnesses, outcomes=outcomes, **kw)
        return [path]
    stem = path[:-len(".json.gz")] if path.endswith(".json.gz") else path
    by_fp = {h["fingerprint"]: h for h in harnesses}
    paths = []
    for k, i in enumerate(range(0, len(outcomes), per_part), 1):
        chunk = outcomes[i:i + per_part]
        paths.append(f"{stem}-{k}.json.gz")
        write(paths[-1], harnesses=[by_fp[o.fingerprint] for o in chunk], outcomes=chunk, **kw)
    return paths


def priors(store: Any, run_ref: str, fingerprints: list[str],
           names: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """For each job the run exported and executed on CPU: its serialized export, inputs
    and CPU outputs (``xhost.Prior`` as JSON), keyed by the job's fingerprint, for a device
    host's jobs file. A stored harness matches by fingerprint, else by name."""
    from sqlalchemy import select

    from farm.stages.xhost import Prior
    from farm.store import artifacts, queries
    from farm.store.models import HarnessRow, ResultRow

    wanted = set(fingerprints)
    by_name = {n: fp for fp, n in zip(fingerprints, names or [])}
    out: dict[str, dict[str, Any]] = {}
    with store.session() as s:
        run = queries.resolve_run(s, run_ref)
        rows = s.execute(
            select(HarnessRow.fingerprint, HarnessRow.name, ResultRow.stage, ResultRow.artifact_sha)
            .join(HarnessRow, HarnessRow.id == ResultRow.harness_id)
            .where(ResultRow.run_id == run.id, ResultRow.artifact_sha.is_not(None),
                   ((ResultRow.stage == "serialize") | ((ResultRow.stage == "execute") & (ResultRow.platform == "cpu"))))
        ).all()
        shas: dict[str, dict[str, str]] = {}
        for fp, name, stage, sha in rows:
            job = fp if fp in wanted else by_name.get(name)
            if job is not None:
                shas.setdefault(job, {})[stage] = sha
        for fp, d in shas.items():
            if "serialize" not in d or "execute" not in d:
                continue
            row, blob = artifacts.get(s, d["serialize"])
            _, io_npz = artifacts.get(s, d["execute"])
            meta = {"jax_version": row.jax_version, "platforms": (row.meta or {}).get("platforms"),
                    "run": run.name, "sha256": d["serialize"]}
            out[fp] = _typed(Prior.from_blobs(blob, io_npz, meta)).to_json()
    return out


def _typed(prior: Any) -> Any:
    """io blobs written before dtype names were kept hold bfloat16 as raw ``|V2``: take the
    dtypes from the export's avals instead."""
    if not any(a.dtype.kind == "V" for a in prior.inputs + prior.outputs):
        return prior
    import dataclasses

    import jax

    exp = jax.export.deserialize(bytearray(prior.export))

    def fix(arrays: list[Any], avals: Any) -> list[Any]:
        return [a.view(av.dtype) if a.dtype.kind == "V" else a for a, av in zip(arrays, avals)]

    return dataclasses.replace(prior, inputs=fix(prior.inputs, exp.in_avals), outputs=fix(prior.outputs, exp.out_avals))
