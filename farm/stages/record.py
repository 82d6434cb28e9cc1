"""The record every stage returns, and the status vocabulary."""
from __future__ import annotations

import time
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

STATUSES = ("ok", "fail", "error", "expected_fail", "unexpected_pass", "skipped",
            "not_runnable_here", "crashed", "timeout")
#: Statuses that mean "something is wrong", worst first.
BAD = ("crashed", "timeout", "error", "fail", "unexpected_pass")
SEVERITY = {s: i for i, s in enumerate(("ok", "skipped", "not_runnable_here", "expected_fail",
                                        "unexpected_pass", "fail", "error", "timeout", "crashed"))}

STAGES = ("trace", "lower", "census", "export", "serialize", "compile", "execute",
          "compare", "crossexec")


@dataclass(frozen=True, slots=True)
class Record:
    """What one stage found for one harness on one platform."""

    stage: str
    platform: str
    status: str
    seconds: float = 0.0
    error_type: str | None = None
    error: str | None = None  # first line
    detail: str | None = None  # full text (traceback)
    metrics: Mapping[str, float] = field(default_factory=dict)
    facts: Mapping[str, Any] = field(default_factory=dict)
    artifact: str | None = None  # sha256 of an artifact this stage produced
    handle: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "unexpected_pass")

    def with_status(self, status: str, **kw: Any) -> "Record":
        return replace(self, status=status, **kw)

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "platform": self.platform, "status": self.status,
                "seconds": self.seconds, "error_type": self.error_type, "error": self.error,
                "detail": self.detail, "metrics": dict(self.metrics), "facts": dict(self.facts),
                "artifact": self.artifact}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Record":
        return cls(**{k: d.get(k) for k in ("stage", "platform", "status", "seconds", "error_type",
                                           "error", "detail", "artifact")},
                   metrics=d.get("metrics") or {}, facts=d.get("facts") or {})


def failure(cls: type[Record], stage: str, platform: str, exc: BaseException, seconds: float,
            **kw: Any) -> Record:
    """A record for a stage that raised: type, first line, and the full text."""
    msg = str(exc).strip()
    first = msg.splitlines()[0][:500] if msg else type(exc).__name__
    detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-20000:]
    return cls(stage=stage, platform=platform, status="error", seconds=seconds,
               error_type=type(exc).__name__, error=first, detail=detail, **kw)


class Timer:
    """Wall time of a block, in seconds."""

    def __init__(self) -> None:
        self.seconds = 0.0

    @contextmanager
    def __call__(self) -> Iterator["Timer"]:
        t0 = time.perf_counter()
        try:
            yield self
        finally:
            self.seconds = time.perf_counter() - t0
