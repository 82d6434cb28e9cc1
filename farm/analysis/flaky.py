"""Flaky results: a status that changes back and forth between runs in the same environment.

A single change that stays (ok, ok, fail, fail) is a regression, not flakiness; a result
is flaky when, among runs with the same environment fingerprint, its status changed at
least twice. Its flaky rate is the share of those runs whose status is not the most
common one.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from farm.analysis.rows import Key, Row, env_fingerprint, key


def status_series(runs: Sequence[tuple[Mapping[str, Any], Sequence[Row]]]) -> dict[tuple[Key, str], list[tuple[int, str]]]:
    """(result key, environment fingerprint) -> [(run id, status)] in run order."""
    out: dict[tuple[Key, str], list[tuple[int, str]]] = defaultdict(list)
    for run, rows in sorted(runs, key=lambda rr: rr[0]["id"]):
        env = env_fingerprint(run) or ""
        for r in rows:
            out[(key(r), env)].append((run["id"], r["status"]))
    return out


def flaky(runs: Sequence[tuple[Mapping[str, Any], Sequence[Row]]], *, min_runs: int = 3,
          min_transitions: int = 2) -> dict[Key, dict]:
    """Flaky results over ``runs`` ((run dict, rows) pairs), by result key.

    >>> run = lambda i: {"id": i, "environment": {"fingerprint": "e"}}
    >>> row = lambda s: {"fingerprint": "h", "platform": "cpu", "stage": "execute", "status": s}
    >>> f = flaky([(run(i), [row(s)]) for i, s in enumerate(["ok", "error", "ok", "ok"])])
    >>> f[("h", "cpu", "execute")]["rate"]
    0.25
    """
    out: dict[Key, dict] = {}
    if len(runs) < min_runs:  # no series can be long enough: skip indexing every row (~0.5 s on 2 full runs)
        return out
    for (k, env), series in status_series(runs).items():
        if len(series) < min_runs:
            continue
        statuses = [s for _, s in series]
        transitions = sum(a != b for a, b in zip(statuses, statuses[1:]))
        if transitions < min_transitions:
            continue
        counts = Counter(statuses)
        modal, n_modal = counts.most_common(1)[0]
        rate = round(1 - n_modal / len(statuses), 4)
        prev = out.get(k)
        if prev is None or rate > prev["rate"]:
            out[k] = {"rate": rate, "runs": len(statuses), "transitions": transitions, "usual": modal,
                      "statuses": dict(counts), "environment": env, "run_ids": [i for i, _ in series]}
    return out
