"""harness_outcomes: one row per finished harness in a run (resume and result cache).

As with results (``farm.store.models.result``): ``StoredOutcomeRow`` is the table
``stored_outcomes``, written; ``OutcomeRow`` is the view ``harness_outcomes``, read: a
delta run's stored outcomes plus its base run's for the harnesses it did not store.
"""
from __future__ import annotations

from sqlalchemy import CheckConstraint, ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from farm.results import STATUSES
from farm.store.models.base import Base, ViewBase, in_list


class StoredOutcomeRow(Base):
    __tablename__ = "stored_outcomes"
    # the names are the table's before it was renamed from ``harness_outcomes`` (migration 0008)
    __table_args__ = (
        UniqueConstraint("run_id", "harness_id", name="uq_harness_outcomes_natural"),
        CheckConstraint(in_list("worst", STATUSES), name="worst"),
        Index("ix_harness_outcomes_result_key", "result_key"),
        Index("ix_harness_outcomes_harness_downstream", "harness_id", "downstream_key"),
        Index("ix_harness_outcomes_run_id", "run_id"),
        Index("ix_harness_outcomes_harness_id", "harness_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE", name="fk_harness_outcomes_run_id_runs"))
    harness_id: Mapped[int] = mapped_column(ForeignKey("harnesses.id", name="fk_harness_outcomes_harness_id_harnesses"))
    environment_id: Mapped[int] = mapped_column(ForeignKey("environments.id",
                                                           name="fk_harness_outcomes_environment_id_environments"))
    worst: Mapped[str] = mapped_column(String(24))
    seconds: Mapped[float] = mapped_column(default=0.0)
    worker: Mapped[str] = mapped_column(String(128), default="")
    #: the run whose result this is a copy of (the result cache); None: computed in this run
    cached_from: Mapped[int | None] = mapped_column(default=None)
    #: digest of everything that shapes the outcome (``farm.cache.key.result_key``); None for
    #: outcomes that must never be reused (crashed, timed out, a farm error)
    result_key: Mapped[str | None] = mapped_column(String(64), default=None)
    #: digest of what compile/execute/compare/crossexec depend on (``farm.cache.key.downstream_key``)
    downstream_key: Mapped[str | None] = mapped_column(String(64), default=None)
    #: the jax code the harness ran (``code_deps``) and the result key narrowed to it
    #: (``farm.cache.key.deps_key``); None where the worker recorded none
    deps_sha: Mapped[str | None] = mapped_column(String(64), default=None)
    deps_key: Mapped[str | None] = mapped_column(String(64), default=None)


class OutcomeRow(ViewBase):
    """The view ``harness_outcomes``: every run's effective outcomes (read only)."""
    __tablename__ = "harness_outcomes"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(primary_key=True)
    harness_id: Mapped[int] = mapped_column()
    environment_id: Mapped[int] = mapped_column()
    worst: Mapped[str] = mapped_column(String(24))
    seconds: Mapped[float] = mapped_column()
    worker: Mapped[str] = mapped_column(String(128))
    cached_from: Mapped[int | None] = mapped_column()
    result_key: Mapped[str | None] = mapped_column(String(64))
    downstream_key: Mapped[str | None] = mapped_column(String(64))
    deps_sha: Mapped[str | None] = mapped_column(String(64))
    deps_key: Mapped[str | None] = mapped_column(String(64))


OUTCOME_FIELDS = ("harness_id", "environment_id", "worst", "seconds", "worker", "cached_from", "result_key",
                  "downstream_key", "deps_sha", "deps_key")
