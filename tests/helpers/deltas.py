"""Hand-written runs for the delta-run tests: N harnesses, outcomes, runs written delta-stored or
in full, each field class a change can touch, and a run's effective rows."""
from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

from sqlalchemy import func, select

from farm.results import Artifact, Outcome, Record
from farm.store import deltas, open_store, queries, writes
from farm.store.models import Run, StoredOutcomeRow, StoredResultRow

ENV = {"jax_version": "0.10.2", "jaxlib_version": "0.10.2", "python": "3.11.7", "host": "test",
       "device_kinds": ["cpu"], "xla_flags": "", "farm_commit": "abc"}
OTHER_ENV = {**ENV, "xla_flags": "--xla_cpu_enable_fast_math=true"}
N = 40
PRIMS = ("sin", "cos", "add", "dot_general")


def harness_desc(i: int) -> dict[str, Any]:
    p = PRIMS[i % len(PRIMS)]
    return {"fingerprint": f"fp{i:04d}", "name": f"{p}_{i}", "catalog": "farm", "family": "fam", "primitive": p,
            "group": p, "dtype": ("float32", "bfloat16")[i % 2], "shapes": [[3, i % 5 + 1]], "params": {}}


def outcome(i: int) -> Outcome:
    """A varied outcome: several platforms and stages, failures with errors, metrics, facts, artifacts."""
    blob = f"module {i}".encode()
    sha = hashlib.sha256(blob).hexdigest()
    status = ("ok", "fail", "error", "expected_fail", "ok", "ok")[i % 6]
    err = {"error_type": "RuntimeError", "error": f"boom {i}", "detail": f"Traceback\nboom {i}"} if status == "error" else {}
    recs = [Record("trace", "any", "ok", 0.001 * i, facts={"n_eqns": i % 7}),
            Record("lower", "cpu", "ok", 0.002, facts={"module_sha256": sha}),
            Record("serialize", "export", "ok", artifact=sha),
            Record("execute", "cpu", "ok" if status != "error" else "error", 0.01 + i / 1000,
                   metrics={"execute_s": 0.01 + i / 1000, "execute_min_s": 0.009}, **err),
            Record("compare", "cpu", "ok" if status == "error" else status, 0.0,
                   metrics={"max_abs_err": float("inf") if status == "fail" else 1e-7 * i, "max_ulp": i % 3},
                   facts={"verdict": "reference"}),
            Record("lower", "cuda", "not_runnable_here" if i % 3 else "ok", 0.0)]
    return Outcome(f"fp{i:04d}", harness_desc(i)["name"], tuple(recs), (Artifact(sha, "export", blob, {"jax_version": "0.10.2"}),),
                   seconds=0.5 + i / 100, worker="ray:n1:42", result_key=f"rk{i}", downstream_key=f"dk{i}")


def write_run(store: Any, name: str, outcomes: list[Outcome], *, delta: bool = True, env: dict[str, Any] = ENV,
              max_fraction: float = deltas.MAX_FRACTION, n: int = N) -> int:
    with store.session() as s:
        run = writes.create_run(s, env=env, name=name, platforms=["cpu", "cuda"], run_on=["cpu"], total=n)
        hids = writes.harness_ids(s, [harness_desc(i) for i in range(n)])
        writes.Writer(s, run, hids).write(outcomes)
        writes.finish_run(s, run, "finished", {"counts": {}}, delta=delta, max_fraction=max_fraction)
        return run.id


def stored(store: Any, run_id: int) -> tuple[int, int]:
    with store.session() as s:
        return (s.scalar(select(func.count()).select_from(StoredOutcomeRow).where(StoredOutcomeRow.run_id == run_id)),
                s.scalar(select(func.count()).select_from(StoredResultRow).where(StoredResultRow.run_id == run_id)))


def base_of(store: Any, run_id: int) -> int | None:
    with store.session() as s:
        return s.get(Run, run_id).base_run_id


def effective(store: Any, run_id: int) -> list[dict[str, Any]]:
    with store.session() as s:
        return queries.results(s, run_id, detail=True)


CHANGED = 6  # the harness the head run changes (ok before, fails after)
CHANGED_FP = f"fp{CHANGED:04d}"


def build(url: str, *, delta: bool) -> dict[str, int]:
    """base (full), same (identical to base), changed (one harness differs), again (identical to changed)."""
    store = open_store(url)
    base = [outcome(i) for i in range(N)]
    changed = list(base)
    changed[CHANGED] = mutate_record(changed[CHANGED], 4, status="fail", metrics={"max_abs_err": 1.0, "max_ulp": 9})
    ids = {"base": write_run(store, "base", base, delta=delta),
           "same": write_run(store, "same", base, delta=delta),
           "changed": write_run(store, "changed", changed, delta=delta, max_fraction=0.05),
           "again": write_run(store, "again", changed, delta=delta, max_fraction=0.05)}
    store.dispose()
    return ids


def mutate_record(o: Outcome, idx: int, **kw: Any) -> Outcome:
    recs = list(o.records)
    recs[idx] = dataclasses.replace(recs[idx], **kw)
    return o.replace(records=tuple(recs))


RECORD_CHANGES = {
    "status": (4, {"status": "fail"}),
    "seconds": (3, {"seconds": 0.0123456}),
    "error_type": (3, {"error_type": "ValueError"}),
    "error": (3, {"error": "a different message"}),
    "detail": (3, {"detail": "another traceback"}),
    "metrics_value": (4, {"metrics": {"max_abs_err": 1e-7 * 5 + 1e-16, "max_ulp": 5 % 3}}),
    "metrics_key": (4, {"metrics": {"max_abs_err": 1e-7 * 5, "max_ulp": 5 % 3, "extra": 1.0}}),
    "facts": (0, {"facts": {"n_eqns": 99}}),
    "artifact": (2, {"artifact": hashlib.sha256(b"other").hexdigest()}),
    "platform_status": (5, {"status": "skipped"}),
}


def _outcomes_with(change: str) -> list[Outcome]:
    outs = [outcome(i) for i in range(N)]
    i = 5
    if change in RECORD_CHANGES:
        idx, kw = RECORD_CHANGES[change]
        o = mutate_record(outs[i], idx, **kw)
        if change == "artifact":
            o = o.replace(artifacts=o.artifacts + (Artifact(kw["artifact"], "export", b"other", {}),))
        outs[i] = o
    elif change == "missing_stage":
        outs[i] = outs[i].replace(records=outs[i].records[:-1])
    elif change == "extra_stage":
        outs[i] = outs[i].replace(records=outs[i].records + (Record("compile", "cpu", "ok", 0.1),))
    elif change in ("worst_seconds", "worker", "result_key", "downstream_key"):
        attr = {"worst_seconds": "seconds"}.get(change, change)
        outs[i] = outs[i].replace(**{attr: 7.5 if attr == "seconds" else "changed"})
    else:
        raise AssertionError(change)
    return outs
