"""Runs by their dimensions (``farm.results.RunDims``, columns of ``runs``): the runs of one
sweep of several runs, and one configuration of it. Names are labels: nothing here parses one."""
from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from farm.errors import ConfigError, RunNotFound
from farm.results import RunDims
from farm.store.models import Run


def run_dims(run: Run) -> RunDims:
    """A run's dimensions, from its columns."""
    return RunDims.from_dict({f: getattr(run, f) for f in RunDims.__dataclass_fields__})


def series_runs(session: Session, series: str) -> list[Run]:
    """The runs one sweep of several runs made (configurations, versions, a slot), oldest first."""
    return list(session.scalars(select(Run).where(Run.series == series).order_by(Run.id)))


def settings(label: str | None) -> dict[str, str]:
    """A configuration label (``x64=on,shardy=off``) as {key: value}."""
    return dict(item.split("=", 1) for item in (label or "").split(",") if "=" in item)


def config_pair(session: Session, series: str, key: str, a: str, b: str) -> tuple[Run, Run]:
    """The two runs of configuration sweep ``series`` that differ only in ``key`` (``a`` then ``b``)."""
    runs = [r for r in series_runs(session, series) if r.config]
    if not runs:
        raise RunNotFound(f"no configuration sweep named {series!r} (farm sweep --config KEY=A,B --name {series})")
    pairs = []
    for ra in runs:
        sa = settings(ra.config)
        if sa.get(key) != a:
            continue
        for rb in runs:
            sb = settings(rb.config)
            if sb.get(key) == b and {k: v for k, v in sa.items() if k != key} == {k: v for k, v in sb.items() if k != key}:
                pairs.append((ra, rb))
    if len(pairs) != 1:
        have = ", ".join(sorted(r.config for r in runs))
        what = "no two runs" if not pairs else f"{len(pairs)} pairs of runs"
        raise ConfigError(f"configuration sweep {series!r} has {what} that differ only in {key}={a} vs {key}={b} "
                          f"(its configurations: {have})")
    return pairs[0]
