"""acknowledgements: a failure cluster someone has looked at: a note, a link, what it covered.

A cluster is named by its signature key (``farm.analysis.signatures.Signature.key``), so
an acknowledgement outlives the runs it was made from. An acknowledged cluster does not
fail ``farm compare``'s gate; a change in it (more harnesses or platforms than the
``harnesses`` and ``platforms`` it covered when acknowledged, or gone) is still reported.
"""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from farm.store.models.base import Base, utcnow


class AcknowledgementRow(Base):
    __tablename__ = "acknowledgements"
    __table_args__ = (CheckConstraint("length(cluster) = 12", name="cluster"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    #: the signature key (12 hex digits): one acknowledgement per cluster
    cluster: Mapped[str] = mapped_column(String(12), unique=True)
    note: Mapped[str] = mapped_column(Text, default="")
    url: Mapped[str | None] = mapped_column(String(1000), default=None)
    #: the signature's fields (``Signature.to_dict``), so the cluster reads the same without runs
    signature: Mapped[dict] = mapped_column(default=dict)
    #: the harnesses and platforms the cluster covered when acknowledged
    harnesses: Mapped[list] = mapped_column(default=list)
    platforms: Mapped[list] = mapped_column(default=list)
    #: the run it was acknowledged from (kept if that run is deleted)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"), default=None)
    #: when acknowledged, or last re-acknowledged (a new note or link)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
