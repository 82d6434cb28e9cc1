"""results: run x harness x platform x stage, with status, timings and metrics."""
from __future__ import annotations

from sqlalchemy import CheckConstraint, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from farm.results import STATUSES
from farm.store.models.base import Base, in_list


class ResultRow(Base):
    __tablename__ = "results"
    __table_args__ = (
        UniqueConstraint("run_id", "harness_id", "platform", "stage", name="uq_results_natural"),
        CheckConstraint(in_list("status", STATUSES), name="status"),
        CheckConstraint("seconds >= 0", name="seconds"),
        Index("ix_results_comparable", "comparable"),
        Index("ix_results_harness_run", "harness_id", "run_id"),
        Index("ix_results_run_status", "run_id", "status"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    harness_id: Mapped[int] = mapped_column(ForeignKey("harnesses.id"))
    platform: Mapped[str] = mapped_column(String(64))
    stage: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(24))
    seconds: Mapped[float] = mapped_column(default=0.0)
    error_type: Mapped[str | None] = mapped_column(String(200), default=None)
    error: Mapped[str | None] = mapped_column(String(1000), default=None)
    detail: Mapped[str | None] = mapped_column(Text, default=None)
    metrics: Mapped[dict] = mapped_column(default=dict)
    facts: Mapped[dict] = mapped_column(default=dict)
    artifact_sha: Mapped[str | None] = mapped_column(ForeignKey("artifacts.sha256"), default=None)
    #: harness fingerprint + platform + environment fingerprint: equal means comparable.
    comparable: Mapped[str] = mapped_column(String(64))
