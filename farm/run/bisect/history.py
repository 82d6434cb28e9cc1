"""``farm bisect --history``: the first stored run where a harness's result went bad.

Nothing is computed: every run the database keeps between ``--good`` and ``--bad`` that
has results for the harness (by name, whatever its fingerprint in each run) is a point,
judged like a computed step (``farm.analysis.bisection``), oldest first. The answer is the
first bad run after the good one and the run before it; every run's verdict is listed.
"""
from __future__ import annotations

import time
from typing import Any

from farm.analysis.bisection import BAD, GOOD, Badness, signatures_of
from farm.errors import ConfigError, HarnessNotFound
from farm.results import SEVERITY


def runs_of(store: Any, names: tuple[str, ...], good: str, bad: str) -> list[tuple[dict[str, Any], list[dict]]]:
    """(run, its records of the harnesses) for each run from good to bad that has them."""
    from sqlalchemy import select  # deferred: sqlalchemy; farm --help needs none

    from farm.store import queries
    from farm.store.models import HarnessRow, ResultRow, Run

    with store.session() as s:
        g = queries.resolve_run(s, good)
        b = queries.resolve_run(s, bad)
        if g.id == b.id:
            raise ConfigError(f"--good and --bad are the same run ({g.name}): nothing to bisect")
        if b.id < g.id:
            raise ConfigError(f"--bad {b.name} is older than --good {g.name}: swap them")
        hids = dict(s.execute(select(HarnessRow.id, HarnessRow.primitive).where(HarnessRow.name.in_(names))).all())
        if not hids:
            raise HarnessNotFound(f"no stored results for harness {', '.join(names)}")
        q = (select(ResultRow, Run.name, HarnessRow.name).join(Run, Run.id == ResultRow.run_id)
             .join(HarnessRow, HarnessRow.id == ResultRow.harness_id)
             .where(ResultRow.harness_id.in_(list(hids)), ResultRow.run_id >= g.id, ResultRow.run_id <= b.id)
             .order_by(ResultRow.run_id, ResultRow.id))
        by_run: dict[int, tuple[dict[str, Any], list[dict]]] = {}
        for r, run_name, hname in s.execute(q):
            run, recs = by_run.setdefault(r.run_id, ({"id": r.run_id, "name": run_name}, []))
            recs.append({"harness": hname, "primitive": hids[r.harness_id], "stage": r.stage,
                         "platform": r.platform, "status": r.status, "seconds": r.seconds,
                         "error_type": r.error_type, "error": r.error, "metrics": r.metrics or {},
                         "facts": r.facts or {}})
        for ref, run in (("--good", g), ("--bad", b)):
            if run.id not in by_run:
                raise ConfigError(f"{ref} {run.name}: that run has no results for {', '.join(names)}")
    return [by_run[k] for k in sorted(by_run)]


def bisect_history(store: Any, label: str, names: tuple[str, ...], good: str, bad: str,
                   badness: Badness | None) -> dict[str, Any]:
    """The first stored run between good and bad where the harness is bad (see the module)."""
    t0 = time.monotonic()
    points = runs_of(store, names, good, bad)
    g_recs, b_recs = points[0][1], points[-1][1]
    if badness is None:
        keys = signatures_of(b_recs)
        if not keys:
            raise ConfigError(f"--bad {points[-1][0]['name']}: nothing fails there; say what is bad with --when")
        badness = Badness(signatures=frozenset(keys))
    verdicts = [badness.judge(recs, g_recs) for _, recs in points]
    if verdicts[0] == BAD:
        raise ConfigError(f"--good {points[0][0]['name']} and --bad {points[-1][0]['name']} agree: both are bad "
                          f"({badness.describe()})")
    if verdicts[-1] == GOOD:
        raise ConfigError(f"--good {points[0][0]['name']} and --bad {points[-1][0]['name']} agree: both are good "
                          f"({badness.describe()})")
    first = verdicts.index(BAD)
    steps = [{"point": f"run {run['id']} {run['name']}", "verdict": v, "seconds": 0.0, "cached": True,
              "status": max((r["status"] for r in recs), key=SEVERITY.__getitem__, default="")}
             for (run, recs), v in zip(points, verdicts)]
    later_good = [p[0]["name"] for p, v in zip(points[first:], verdicts[first:]) if v == GOOD]
    return {"mode": "history", "target": label, "bad_means": badness.describe(), "points": len(points),
            "last_good": {"label": f"run {points[first - 1][0]['id']} {points[first - 1][0]['name']}",
                          **points[first - 1][0]},
            "first_bad": {"label": f"run {points[first][0]['id']} {points[first][0]['name']}", **points[first][0]},
            "ambiguous": [], "steps": steps, "seconds": time.monotonic() - t0, "ran": 0,
            "note": (f"good again later in {', '.join(later_good)} (flaky, or fixed and broken again)"
                     if later_good else ""), "then": None}
