"""accuracy: one row per (jax, jaxlib, primitive, dtype, platform) of a measured accuracy table.

Measured by ``farm accuracy`` (``farm.accuracy``): the ULP error of a primitive's results
against a correctly rounded reference. A re-measurement of the same versions replaces
the row; ``reference_key`` says what the row was measured against (inputs, sample count,
the reference's code and libraries), so two versions' rows compare only when it matches.
"""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from farm.store.models.base import Base, utcnow


class AccuracyRow(Base):
    __tablename__ = "accuracy"
    __table_args__ = (
        UniqueConstraint("jax_version", "jaxlib_version", "primitive", "dtype", "platform", name="uq_accuracy_natural"),
        CheckConstraint("n >= 0", name="n"),
        CheckConstraint("seconds >= 0", name="seconds"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    jax_version: Mapped[str] = mapped_column(String(32), index=True)
    jaxlib_version: Mapped[str] = mapped_column(String(32))
    primitive: Mapped[str] = mapped_column(String(64))
    dtype: Mapped[str] = mapped_column(String(16))
    platform: Mapped[str] = mapped_column(String(16))
    reference_key: Mapped[str] = mapped_column(String(64))
    n: Mapped[int] = mapped_column(default=0)
    #: NULL where the primitive did not run (``error`` says why)
    max_ulp: Mapped[float | None] = mapped_column(nullable=True)
    max_ulp_normal: Mapped[float | None] = mapped_column(nullable=True)
    distribution: Mapped[dict] = mapped_column(default=dict)
    worst: Mapped[list] = mapped_column(default=list)
    special: Mapped[dict] = mapped_column(default=dict)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    seconds: Mapped[float] = mapped_column(default=0.0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
