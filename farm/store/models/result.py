"""results: run x harness x platform x stage, with status, timings and metrics.

Two mappings of one set of rows. ``StoredResultRow`` is the table ``stored_results``:
the rows a run stored itself, the only one written. ``ResultRow`` is the view
``results`` every reader uses: a run's effective rows, its stored rows plus, for a delta
run (``runs.base_run_id``), its base run's rows for each harness it did not store (it
stores a harness's outcome and rows only where they differ from its base's; see
``farm.store.deltas``). A view row's key is (run_id, id): an inherited row keeps its
base row's id.
"""
from __future__ import annotations

from sqlalchemy import CheckConstraint, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from farm.results import STATUSES
from farm.store.models.base import Base, ViewBase, in_list


class StoredResultRow(Base):
    __tablename__ = "stored_results"
    # the names are the table's before it was renamed from ``results`` (migration 0008)
    __table_args__ = (
        UniqueConstraint("run_id", "harness_id", "platform", "stage", name="uq_results_natural"),
        CheckConstraint(in_list("status", STATUSES), name="status"),
        CheckConstraint("seconds >= 0", name="seconds"),
        Index("ix_results_comparable", "comparable"),
        Index("ix_results_harness_run", "harness_id", "run_id"),
        Index("ix_results_run_status", "run_id", "status"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE", name="fk_results_run_id_runs"))
    harness_id: Mapped[int] = mapped_column(ForeignKey("harnesses.id", name="fk_results_harness_id_harnesses"))
    platform: Mapped[str] = mapped_column(String(64))
    stage: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(24))
    seconds: Mapped[float] = mapped_column(default=0.0)
    error_type: Mapped[str | None] = mapped_column(String(200), default=None)
    error: Mapped[str | None] = mapped_column(String(1000), default=None)
    detail: Mapped[str | None] = mapped_column(Text, default=None)
    metrics: Mapped[dict] = mapped_column(default=dict)
    facts: Mapped[dict] = mapped_column(default=dict)
    artifact_sha: Mapped[str | None] = mapped_column(ForeignKey("artifacts.sha256", name="fk_results_artifact_sha_artifacts"),
                                                     default=None)
    #: harness fingerprint + platform + environment fingerprint: equal means comparable.
    comparable: Mapped[str] = mapped_column(String(64))


class ResultRow(ViewBase):
    """The view ``results``: every run's effective rows (read only)."""
    __tablename__ = "results"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(primary_key=True)
    harness_id: Mapped[int] = mapped_column()
    platform: Mapped[str] = mapped_column(String(64))
    stage: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(24))
    seconds: Mapped[float] = mapped_column()
    error_type: Mapped[str | None] = mapped_column(String(200))
    error: Mapped[str | None] = mapped_column(String(1000))
    detail: Mapped[str | None] = mapped_column(Text)
    metrics: Mapped[dict] = mapped_column()
    facts: Mapped[dict] = mapped_column()
    artifact_sha: Mapped[str | None] = mapped_column(String(64))
    comparable: Mapped[str] = mapped_column(String(64))


#: the columns a run's row carries besides its id and run (what "identical" compares)
RESULT_FIELDS = ("harness_id", "platform", "stage", "status", "seconds", "error_type", "error", "detail", "metrics",
                 "facts", "artifact_sha", "comparable")
