"""environments: where results were measured (versions, host, devices, flags)."""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from farm.store.models.base import Base, utcnow


class Environment(Base):
    __tablename__ = "environments"

    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    jax_version: Mapped[str] = mapped_column(String(32))
    jaxlib_version: Mapped[str] = mapped_column(String(32))
    python: Mapped[str] = mapped_column(String(32))
    host: Mapped[str] = mapped_column(String(255))
    device_kinds: Mapped[list] = mapped_column()
    xla_flags: Mapped[str] = mapped_column(String(1000), default="")
    farm_commit: Mapped[str] = mapped_column(String(64), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
