"""Bisection: what "bad" means for one step, and the search for the first bad point.

A step's result is the list of records one harness produced at one point (a jax release, a
jax commit, a stored run). Whether the step is *bad* is decided here, from data only:

- by default, the **failure's signature** (``farm.analysis.signatures``): the step is bad
  when one of its records has a signature the bad end had;
- or by ``--when`` conditions, all of which must hold (``status=fail``, ``ulp>4``,
  ``execute_s>2x``, ``error~does not accept``, ``census.composites~chlo.acos``,
  ``lower.module_sha256!=good``). A ``STAGE.`` prefix restricts a condition to that
  stage's records; ``Nx`` and ``good`` compare with the value measured at the good end.

``search`` is ``git bisect`` over an ordered list of points whose first is good and last
is bad, with ``skip`` for points that cannot be judged (a jax that does not import with
the jaxlib at hand): it probes the untested point nearest the middle of what is left, so
it takes about log2(n) probes plus the skips.

Pure: no store, Ray, jax or processes; the probe is a callable the caller supplies.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from farm.analysis.signatures import signature
from farm.errors import ConfigError
from farm.results import SEVERITY, STATUSES

GOOD, BAD, SKIP = "good", "bad", "skip"
#: Short names for metrics people type.
ALIASES = {"ulp": "max_ulp_err", "abs": "max_abs_err", "rel": "max_rel_err"}
_COND = re.compile(r"^\s*(?:(?P<stage>[a-z_]+)\.)?(?P<field>[A-Za-z_][\w]*)\s*"
                   r"(?P<op>!=|!~|>=|<=|=|~|>|<)\s*(?P<value>.*?)\s*$")

Records = Sequence[Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Condition:
    """One ``--when`` condition: ``[stage.]field op value``."""

    text: str
    field: str
    op: str
    value: str
    stage: str | None = None

    @property
    def relative(self) -> bool:
        """Whether the value is measured against the good end (``2x``, ``good``)."""
        return self.value == "good" or bool(re.fullmatch(r"[0-9.]+x", self.value))

    def measure(self, records: Records) -> Any:
        """The value this condition reads from a step's records (None: absent)."""
        recs = [r for r in records if self.stage is None or r.get("stage") == self.stage]
        if self.field == "status":
            return max((str(r.get("status")) for r in recs), key=SEVERITY.__getitem__, default=None)
        if self.op in ("~", "!~"):
            return " | ".join(_text(r, self.field) for r in recs if _text(r, self.field))
        name = ALIASES.get(self.field, self.field)
        vals = [v for r in recs for v in (_field(r, name),) if v is not None]
        if not vals:
            return None
        nums = [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
        return max(nums) if len(nums) == len(vals) else vals[0]

    def holds(self, records: Records, baseline: Records | None = None) -> bool:
        got = self.measure(records)
        if self.op in ("~", "!~"):
            found = re.search(self.value, got or "") is not None
            return found if self.op == "~" else not found
        if self.field == "status":
            wanted = {s.strip() for s in self.value.split(",")}
            return (got in wanted) if self.op == "=" else (got is not None and got not in wanted)
        want: Any = self.value
        if self.relative:
            base = self.measure(baseline or [])
            if base is None:
                raise ConfigError(f"--when {self.text}: the good end has no {self.field} to compare with")
            want = base if self.value == "good" else float(self.value[:-1]) * float(base)
        if got is None:
            return False
        if self.op in ("=", "!="):
            same = _same(got, want)
            return same if self.op == "=" else not same
        try:
            a, b = float(got), float(want)
        except (TypeError, ValueError):
            raise ConfigError(f"--when {self.text}: {self.field} is {got!r}, not a number") from None
        return {">": a > b, ">=": a >= b, "<": a < b, "<=": a <= b}[self.op]


def _field(r: Mapping[str, Any], name: str) -> Any:
    if name in ("error", "error_type", "stage", "platform", "seconds"):
        return r.get(name)
    for bag in ("metrics", "facts"):
        d = r.get(bag) or {}
        if name in d:
            return d[name]
    return None


def _text(r: Mapping[str, Any], name: str) -> str:
    v = _field(r, ALIASES.get(name, name))
    if v is None:
        return ""
    return " ".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)


def _same(a: Any, b: Any) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


def parse_when(texts: Iterable[str]) -> tuple[Condition, ...]:
    """``--when`` texts → conditions, checked (operator, stage, status names, regular expressions)."""
    from farm.results import STAGES

    out = []
    for text in texts:
        m = _COND.match(text)
        if not m or not m.group("value"):
            raise ConfigError(f"--when {text!r}: write FIELD OP VALUE, e.g. status=fail, ulp>4, execute_s>2x, "
                              "error~'does not accept'")
        c = Condition(text.strip(), m.group("field"), m.group("op"), m.group("value"), m.group("stage"))
        if c.stage and c.stage not in STAGES:
            raise ConfigError(f"--when {text!r}: unknown stage {c.stage!r} (stages: {', '.join(STAGES)})")
        if c.field == "status":
            bad = [s for s in c.value.split(",") if s.strip() not in STATUSES]
            if c.op not in ("=", "!=") or bad:
                raise ConfigError(f"--when {text!r}: status takes = or != and statuses of {', '.join(STATUSES)}")
        if c.op in ("~", "!~"):
            try:
                re.compile(c.value)
            except re.error as e:
                raise ConfigError(f"--when {text!r}: not a regular expression ({e})") from None
        if c.op in (">", ">=", "<", "<=") and not c.relative:
            try:
                float(c.value)
            except ValueError:
                raise ConfigError(f"--when {text!r}: {c.op} needs a number or Nx, not {c.value!r}") from None
        out.append(c)
    return tuple(out)


def signatures_of(records: Records, primitives: Iterable[str] = ()) -> set[str]:
    """The signature keys of a step's failing records."""
    prims = list(primitives)
    keys = set()
    for r in records:
        s = signature(r, primitives=prims or None)
        if s is not None:
            keys.add(s.key)
    return keys


@dataclass(frozen=True, slots=True)
class Badness:
    """What makes a step bad: conditions (all must hold), else any of these signature keys."""

    conditions: tuple[Condition, ...] = ()
    signatures: frozenset[str] = frozenset()
    primitives: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.conditions:
            return " and ".join(c.text for c in self.conditions)
        return "signature " + ",".join(sorted(self.signatures))

    def judge(self, records: Records, baseline: Records | None = None) -> str:
        if self.conditions:
            return BAD if all(c.holds(records, baseline) for c in self.conditions) else GOOD
        return BAD if signatures_of(records, self.primitives) & self.signatures else GOOD


# --------------------------------------------------------------------------- the search
@dataclass(frozen=True, slots=True)
class Probe:
    """One step of a search: which point, its verdict, and what the caller wants shown."""

    index: int
    verdict: str
    seconds: float = 0.0
    info: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Search:
    """Where a search ended: ``last_good`` < ``first_bad`` (indices into the points); the
    points strictly between them were skipped (``ambiguous``: any of them could be first bad)."""

    last_good: int
    first_bad: int
    probes: tuple[Probe, ...]

    @property
    def ambiguous(self) -> tuple[int, ...]:
        return tuple(range(self.last_good + 1, self.first_bad))


def search(n: int, probe: Callable[[int], Probe], skip: Iterable[int] = ()) -> Search:
    """Bisect points 0..n-1, where 0 is good and n-1 is bad (the caller checked both).

    ``probe(i)`` judges point i (good, bad or skip). Each round probes the untested point
    nearest the middle of the open range; a skipped point stays out of later rounds, and so
    do the points of ``skip`` (known beforehand not to be judgeable: never probed)."""
    if n < 2:
        raise ValueError("a search needs a good and a bad point")
    lo, hi = 0, n - 1
    skipped: set[int] = set(skip)
    probes: list[Probe] = []
    while True:
        mid = (lo + hi) / 2
        cands = [i for i in range(lo + 1, hi) if i not in skipped]
        if not cands:
            return Search(lo, hi, tuple(probes))
        pick = min(cands, key=lambda i: (abs(i - mid), i))
        p = probe(pick)
        probes.append(p)
        if p.verdict == GOOD:
            lo = pick
        elif p.verdict == BAD:
            hi = pick
        else:
            skipped.add(pick)
