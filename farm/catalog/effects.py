"""What a harness with side effects must show when it runs: ``Effects``.

A debug print, a callback or a ``lax.platform_dependent`` branch is invisible in a
harness's outputs alone: an export that drops a print, reorders ordered callbacks or
takes another platform's branch still returns arrays. So the harness says what its
effects must be, and the ``effects_export`` stage (``farm.pipeline.effects``) records
what each exported artifact printed, received and returned for the judge to check.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: What the stage hands a harness's ``build``: ``log(tag, value)``, called by its callbacks.
Log = Callable[[str, Any], None]


def discard(tag: str, value: Any) -> None:
    """The log of the ordinary stages (trace, lower, compile, execute): nothing is kept."""


@dataclass(frozen=True, slots=True)
class Effects:
    """The effects a harness must show, on every artifact that runs.

    ``build(log)``: the harness's function, its callbacks reporting to ``log`` (the
    harness's own ``fun`` is ``build(discard)``). ``printed``: the lines ``jax.debug.print``
    writes; ``calls``: (tag, values) each callback receives; both in this order where
    ``ordered``, else as a multiset (unordered effects may run in any order).
    ``branches``: for ``lax.platform_dependent``, per platform, the flattened output its
    branch computes, so the branch an artifact took is visible.
    """

    build: Callable[[Log], Callable[..., Any]] = field(repr=False)
    printed: tuple[str, ...] = ()
    calls: tuple[tuple[str, tuple[float, ...]], ...] = ()
    ordered: bool = True
    branches: Mapping[str, tuple[float, ...]] = field(default_factory=dict)

    def describe(self) -> str:
        """The expectations as text (part of the harness's fingerprint)."""
        return repr((self.printed, self.calls, self.ordered, sorted(self.branches.items())))


def label(platforms: tuple[str, ...]) -> str:
    """An export configuration's name in records and limitations: "cpu+cuda", "tpu" (no
    comma: coverage and the CLI list platforms with commas)."""
    return "+".join(platforms)


def configurations(platforms: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """The export configurations an effects harness runs: all platforms at once, cpu with
    cuda (the pair a GPU host serves), and each platform alone; those ``platforms`` allow."""
    pair = ("cpu", "cuda")
    out = [platforms] if len(platforms) > 1 else []
    if len(platforms) > 2 and all(p in platforms for p in pair):
        out.append(pair)
    return tuple(out + [(p,) for p in platforms])
