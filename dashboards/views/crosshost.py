"""Cross-host: a device host's run (imported bundle) as the lowered-on × run-on table,
its disagreements and its slowest harnesses (``farm.analysis.crosshost``).

The device's platform defaults to the one the run's rows show (an ``xhost`` record's
platform, else a device platform that executed natively); a run with neither, such as
a CPU-only sweep, has nothing cross-host and the page says so instead of empty tables."""
from __future__ import annotations

from typing import Any

from flask import Flask, request

from dashboards.views import one_of, store, twin
from farm.analysis.crosshost import summarize
from farm.results import LOWERING_PLATFORMS, NOT_RUN
from farm.store import queries

#: Statuses that mean a device did not run the harness itself.
_NOT_RUN = NOT_RUN


def device_platforms(rows: list[dict[str, Any]]) -> list[str]:
    """Platforms with cross-host evidence in a run: xhost records, or native execution off the CPU."""
    found = {r["platform"] for r in rows if r["stage"] == "xhost"}
    found |= {r["platform"] for r in rows
              if r["stage"] == "execute" and r["platform"] != "cpu" and r["status"] not in _NOT_RUN}
    return sorted(found, key=lambda p: (p == "cpu", p))


def context() -> dict[str, Any]:
    with store().session() as s:
        run = queries.resolve_run(s, request.args.get("run", "latest"))
        info = queries.run_dict(s, run, with_counts=False)
        rows = queries.results(s, run.id)
    found = device_platforms(rows)
    platform = one_of("platform", LOWERING_PLATFORMS, found[0] if found else "cuda")
    nothing = None if found else (
        f"Run {info['name']} has nothing cross-host: no result in it ran another host's artifact (the xhost "
        f"stage) or executed on a device other than the CPU. A device host's run has them: `farm jobs "
        f"--priors-from RUN` here, `farm worker --standalone` on the device host, `farm import` back here.")
    return {"run": info, "platform": platform, "device_platforms": found, "nothing": nothing,
            **summarize(rows, platform)}


def register(app: Flask) -> None:
    twin(app, "/crosshost", "/crosshost.json", "crosshost", "crosshost.html", context, params=("run", "platform"))
