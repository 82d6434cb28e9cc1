"""code_deps: what of jax's code a harness ran (``farm.cache.units``), content-addressed.

Two kinds of row, both zlib-compressed canonical JSON addressed by the sha256 of that
JSON: a *part* (``{"units": {file: [unit, ...]}}``: the units one file contributed, or a
worker process's global set) and a *set* (``{"parts": [address, ...]}``: one harness's
parts). An outcome names its set (``stored_outcomes.deps_sha``); most parts are shared by
many sets, and a set by every run of its harness in which it ran the same code.
"""
from __future__ import annotations

from sqlalchemy import LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from farm.store.models.base import Base


class CodeDepsRow(Base):
    __tablename__ = "code_deps"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    body: Mapped[bytes] = mapped_column(LargeBinary)
