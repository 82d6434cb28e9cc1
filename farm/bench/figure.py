"""One figure of ``farm bench``: a value, its unit and goal; and the Markdown table of figures."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Figure:
    name: str
    value: float
    unit: str
    goal: float | None = None
    better: str = "lower"  # lower | higher
    spread: str = ""

    @property
    def ratio(self) -> float | None:
        if self.goal is None or not self.goal:
            return None
        return self.value / self.goal if self.better == "lower" else self.goal / self.value if self.value else None

    @property
    def met(self) -> bool | None:
        r = self.ratio
        return None if r is None else r <= 1.0


def table(figs: list[Figure]) -> str:
    lines = [f"| figure | value | goal | ratio to goal | |", "|---|---|---|---|---|"]
    for f in figs:
        goal = "" if f.goal is None else f"{'≤' if f.better == 'lower' else '≥'} {f.goal:.3g} {f.unit}"
        ratio = "" if f.ratio is None else f"{f.ratio:.2f}"
        mark = "" if f.met is None else ("met" if f.met else "MISSED")
        lines.append(f"| {f.name} | {f.value:.3g} {f.unit} {('(' + f.spread + ')') if f.spread else ''} | {goal} | "
                     f"{ratio} | {mark} |")
    return "\n".join(lines)
