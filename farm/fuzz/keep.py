"""After the sweep: each failure signature shrunk (hypothesis, candidates in a ``Probe``)
and written as a ``found`` harness definition (``farm.fuzz.found``), with hypothesis's
example database beside them (``DIR/.hypothesis``)."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from farm.fuzz import found
from farm.fuzz.probe import Probe
from farm.fuzz.shrink import shrink
from farm.fuzz.worker_catalog import define
from farm.results import Outcome


def shrink_and_write(plan: Any, drawn: Any, outcomes: dict[str, Outcome], sigs: list[dict[str, Any]],
                     directory: str, run_name: str, log: Callable[[str], None]) -> list[str]:
    """One file per signature; shrinking stops at ``plan.shrink_s`` (the rest are written unshrunk)."""
    import jax
    from hypothesis.database import DirectoryBasedExampleDatabase

    db = DirectoryBasedExampleDatabase(f"{directory}/.hypothesis")
    known = dict(outcomes)
    probe = Probe(plan.options)
    t_end = time.monotonic() + plan.shrink_s
    paths = []
    try:
        for e in sigs:
            first = min(e["cases"], key=lambda fp: drawn.round_of[fp])
            original, r = drawn.cases[first], drawn.round_of[first]
            case, runs = original, 0
            if time.monotonic() < t_end:
                t0 = time.monotonic()
                res = shrink(plan.strategy(r), plan.seed, r, plan.per_round, e["key"], known,
                             lambda c: probe.run(c, define(c).name, define(c).fingerprint),
                             lambda c: define(c).fingerprint, max_runs=plan.shrink_runs, database=db)
                runs = res.runs
                if res.case is not None:
                    case = res.case
                log(f"shrank {e['key']} in {time.monotonic() - t0:.1f}s ({res.runs} candidates run, {res.tried} "
                    f"drawn): {define(original).name} -> {define(case).name}"
                    + ("" if res.case is not None else " (replay did not reproduce it: kept as drawn)"))
            campaign = {**plan.to_dict(), "round": r, "family": plan.family_of_round(r), "run": run_name}
            paths.append(found.write(directory, found.entry(case, e["signature"], platforms=sorted(e["platforms"]),
                                                            original=original, campaign=campaign,
                                                            jax_version=jax.__version__, runs=runs)))
    finally:
        probe.close()
    return paths
