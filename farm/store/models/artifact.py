"""artifacts: content-addressed blobs (serialized exports, module text, inputs/outputs)."""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from farm.store.models.base import Base, in_list, utcnow

ARTIFACT_KINDS = ("export", "module", "io")


class ArtifactRow(Base):
    __tablename__ = "artifacts"
    __table_args__ = (
        CheckConstraint(in_list("kind", ARTIFACT_KINDS), name="kind"),
        CheckConstraint("size >= 0", name="size"),
    )

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    size: Mapped[int] = mapped_column()
    format_version: Mapped[int] = mapped_column(default=1)
    jax_version: Mapped[str] = mapped_column(String(32))
    meta: Mapped[dict] = mapped_column(default=dict)
    data: Mapped[bytes | None] = mapped_column(LargeBinary, default=None)  # zlib; None if on disk
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    #: set by ``farm db check --repair``: why the stored bytes are lost (None: intact when last checked)
    damaged: Mapped[str | None] = mapped_column(String(200), default=None)
