"""harnesses: catalog entries as seen by a run (key, fingerprint, family, dtype, shapes)."""
from __future__ import annotations

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from farm.store.models.base import Base


class HarnessRow(Base):
    __tablename__ = "harnesses"

    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(500), index=True)
    catalog: Mapped[str] = mapped_column(String(32))
    family: Mapped[str] = mapped_column(String(64))
    primitive: Mapped[str] = mapped_column(String(128), index=True)
    grp: Mapped[str] = mapped_column(String(128))
    dtype: Mapped[str] = mapped_column(String(16))
    shapes: Mapped[list] = mapped_column()
    params: Mapped[dict] = mapped_column()
    definition: Mapped[dict] = mapped_column()
