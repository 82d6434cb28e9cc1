"""runs: one sweep (or replay): what was selected, where, and how it ended."""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from farm.store.models.base import Base, in_list, utcnow

RUN_STATUSES = ("running", "finished", "interrupted", "failed")
RUN_KINDS = ("sweep", "replay", "import", "fuzz")


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (
        CheckConstraint(in_list("status", RUN_STATUSES), name="status"),
        CheckConstraint(in_list("kind", RUN_KINDS), name="kind"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    kind: Mapped[str] = mapped_column(String(16), default="sweep")
    status: Mapped[str] = mapped_column(String(16), default="running")
    started_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    catalog: Mapped[str] = mapped_column(String(32), default="farm")
    filters: Mapped[dict] = mapped_column(default=dict)
    platforms: Mapped[list] = mapped_column(default=list)
    run_on: Mapped[list] = mapped_column(default=list)
    total: Mapped[int] = mapped_column(default=0)
    environment_id: Mapped[int] = mapped_column(ForeignKey("environments.id"))
    stats: Mapped[dict] = mapped_column(default=dict)
    # the run's dimensions (farm.results.RunDims): which sweep of several runs, configuration,
    # jax version, exported-on version, schedule and slot; None where they do not apply
    series: Mapped[str | None] = mapped_column(String(200), default=None, index=True)
    config: Mapped[str | None] = mapped_column(String(200), default=None)
    jax_version: Mapped[str | None] = mapped_column(String(32), default=None)
    exported_on: Mapped[str | None] = mapped_column(String(32), default=None)
    schedule: Mapped[str | None] = mapped_column(String(100), default=None, index=True)
    slot: Mapped[str | None] = mapped_column(String(16), default=None)
    #: a delta run: the fully stored run whose outcome and result rows this run shares for every
    #: harness it stored none of (``farm.store.deltas``); None: every row is stored. A base
    #: cannot be deleted while a run names it (``farm db prune`` keeps or materializes it).
    base_run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"), default=None,
                                                    index=True)
