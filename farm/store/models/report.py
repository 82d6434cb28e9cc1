"""reports: a stored comparison of a head run with a base run (``farm.analysis.report``).

A report is derived data, kept so the dashboard and ``farm compare`` need not recompute
it: one row per (base, head, settings). It is trusted only while its format version is
current and the runs it read are unchanged (``runs_stamp``); otherwise it is recomputed
and the row overwritten (see ``farm.store.reports``). A run's trend summary is kept
the same way, as its report against itself under ``farm.store.trends.SUMMARY_KEY``.
"""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from farm.store.models.base import Base, utcnow


class ReportRow(Base):
    __tablename__ = "reports"
    __table_args__ = (
        UniqueConstraint("base_run_id", "head_run_id", "settings_key", name="uq_reports_natural"),
        CheckConstraint("format_version >= 1", name="format_version"),
        CheckConstraint("seconds >= 0", name="seconds"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    base_run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    head_run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    #: sha256 of ``settings``: the analysis options the report was computed with.
    settings_key: Mapped[str] = mapped_column(String(64))
    settings: Mapped[dict] = mapped_column(default=dict)
    #: ``farm.analysis.FORMAT_VERSION`` of ``content`` (also inside it).
    format_version: Mapped[int] = mapped_column()
    #: sha256 of what the report read of each run (id, status, finished_at, status counts).
    runs_stamp: Mapped[str] = mapped_column(String(64))
    #: the report as JSON text, and the sha256 of that text.
    content: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(String(64))
    seconds: Mapped[float] = mapped_column(default=0.0)  # time to compute it
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
