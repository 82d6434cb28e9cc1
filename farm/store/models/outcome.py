"""harness_outcomes: one row per finished harness in a run (resume and result cache)."""
from __future__ import annotations

from sqlalchemy import CheckConstraint, ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from farm.results import STATUSES
from farm.store.models.base import Base, in_list


class OutcomeRow(Base):
    __tablename__ = "harness_outcomes"
    __table_args__ = (
        UniqueConstraint("run_id", "harness_id", name="uq_harness_outcomes_natural"),
        CheckConstraint(in_list("worst", STATUSES), name="worst"),
        Index("ix_harness_outcomes_result_key", "result_key"),
        Index("ix_harness_outcomes_harness_downstream", "harness_id", "downstream_key"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    harness_id: Mapped[int] = mapped_column(ForeignKey("harnesses.id"), index=True)
    environment_id: Mapped[int] = mapped_column(ForeignKey("environments.id"))
    worst: Mapped[str] = mapped_column(String(24))
    seconds: Mapped[float] = mapped_column(default=0.0)
    worker: Mapped[str] = mapped_column(String(128), default="")
    #: the run whose result this is a copy of (the result cache); None: computed in this run
    cached_from: Mapped[int | None] = mapped_column(default=None)
    #: digest of everything that shapes the outcome (``farm.pipeline.cachekey.result_key``); None for
    #: outcomes that must never be reused (crashed, timed out, a farm error)
    result_key: Mapped[str | None] = mapped_column(String(64), default=None)
    #: digest of what compile/execute/compare/crossexec depend on (``farm.pipeline.cachekey.downstream_key``)
    downstream_key: Mapped[str | None] = mapped_column(String(64), default=None)
