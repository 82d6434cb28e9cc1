"""``farm bisect``: since which jax release, and which jax commit, is a harness bad?

Three lines of points (``docs/bisect.md``):

- **releases**: jax versions from the package index between ``--good`` and ``--bad``, each
  in its provisioned venv (``farm.run.versions.venvs``: ``--jaxlib paired``), or each release's
  jax wheel over this environment's jaxlib (``--jaxlib fixed``);
- **commits** of a jax checkout (``--jax-repo``) over one jaxlib: each commit's ``jax/`` on
  ``PYTHONPATH`` (``farm.run.bisect.jaxgit``); a commit whose jax does not import is skipped. A
  release bisection given ``--jax-repo`` goes on inside the commits between the last good
  and the first bad release, over the last good release's jaxlib (jax's own rule: a jax
  commit must work with the minimum jaxlib, which is the last release for most of a range);
- **history**: the farm's stored runs (``farm.run.bisect.history``; nothing is computed).

Each step runs in its own process through the normal pipeline and the result cache
(``farm.run.bisect.steps``); the search is ``farm.analysis.bisection.search``.
"""
from __future__ import annotations

import sys
import time
from importlib import metadata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from farm.analysis.bisection import BAD, GOOD, SKIP, Badness, Probe, search
from farm.errors import ConfigError, FarmError
from farm.run.bisect import jaxgit
from farm.run.bisect.releases import index_versions, is_release, release_commit, release_line, release_points, wheel_hash
from farm.run.bisect.steps import Point, Prepared, Step, Stepper, commit_identity, environment_digest
from farm.run.versions import venvs

Log = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class Answer:
    """What a bisection found (``to_dict`` is ``--format json``)."""

    mode: str
    target: str
    bad_means: str
    points: int
    last_good: dict[str, Any]
    first_bad: dict[str, Any]
    ambiguous: list[str]
    steps: list[dict[str, Any]]
    seconds: float
    ran: int = 0
    note: str = ""
    then: "Answer | None" = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "then"}
        d["then"] = self.then.to_dict() if self.then else None
        return d


class Agree(ConfigError):
    """Good and bad ends that agree (``both``: "good" or "bad")."""

    def __init__(self, both: str, msg: str) -> None:
        super().__init__(msg)
        self.both = both


class Bisector:
    """Judges points of one line with one stepper, and searches it."""

    def __init__(self, stepper: Stepper, badness: Badness | None, primitives: tuple[str, ...], log: Log) -> None:
        self.stepper = stepper
        self.badness = badness
        self.primitives = primitives
        self.log = log
        self.baseline: tuple[dict[str, Any], ...] = ()

    def step(self, p: Point, what: str, judge: bool = True) -> Step:
        """Run one point and say so; ``judge``: with its verdict (an end is shown by its status:
        the good end is what relative conditions compare with, so it is judged after both ran)."""
        s = self.stepper.run(p.label, p.prepare)
        how = "cached" if s.cached else f"{s.seconds:.1f} s"
        self.log(f"farm bisect: {what} {p.label}{' ' + p.subject[:60] if p.subject else ''}: "
                 f"{self.verdict(s) if judge and self.badness else _summary(s)} ({how})")
        return s

    def verdict(self, s: Step) -> str:
        if s.skipped:
            return SKIP
        assert self.badness is not None
        return self.badness.judge(s.records, self.baseline)

    def ends(self, points: list[Point], assume_bad: bool = False) -> tuple[Step, Step]:
        """Run and check both ends: each must run, good must be good and bad bad. With
        ``assume_bad`` (a release bisection going on into commits) a bad end that does not
        import with this jaxlib is taken as bad: the release step judged it."""
        good, bad = points[0], points[-1]
        g = self.step(good, "good end", judge=False)
        b = self.step(bad, "bad end", judge=False)
        if g.skipped and b.skipped:
            raise ConfigError(f"nothing in {good.label}..{bad.label} imports here: {g.import_error}")
        if g.skipped:
            raise ConfigError(f"--good {good.label}: jax does not import here: {g.import_error}")
        if b.skipped and not assume_bad:
            raise ConfigError(f"--bad {bad.label}: jax does not import here: {b.import_error}")
        self.baseline = g.records
        if self.badness is None:
            keys = _failing_signatures(b, self.primitives)
            if not keys:
                raise ConfigError(f"--bad {bad.label}: nothing fails there ({_summary(b)}); say what is bad "
                                  "with --when, e.g. --when status=fail or --when 'lower.module_sha256!=good'")
            self.badness = Badness(signatures=frozenset(keys), primitives=self.primitives)
        if self.verdict(g) == BAD:
            raise Agree(BAD, f"--good {good.label} and --bad {bad.label} agree: both are bad "
                              f"({self.badness.describe()})")
        if not b.skipped and self.verdict(b) == GOOD:
            raise Agree(GOOD, f"--good {good.label} and --bad {bad.label} agree: both are good "
                              f"({self.badness.describe()}; at {bad.label}: {_summary(b)})")
        return g, b

    def run(self, mode: str, target: str, points: list[Point], *, assume_bad: bool = False,
            describe: Callable[[Point], dict[str, Any]] | None = None, refuse: frozenset[int] = frozenset()) -> Answer:
        """Check the ends, then search; ``refuse``: points known not to import (jax's own jaxlib
        version check, read from git): skipped without a process, and counted."""
        t0 = time.monotonic()
        ran0 = self.stepper.ran
        g, b = self.ends(points, assume_bad)
        rows = [_row(points[0], g, GOOD), _row(points[-1], b, BAD if not b.skipped else "skip (taken as bad)")]
        n = len(points)
        self.log(f"farm bisect: {n - 2} points between the ends: about {max(0, (n - 2 - len(refuse))).bit_length()} "
                 f"steps" + (f" ({len(refuse)} refuse this jaxlib by jax's version check: skipped, not run)"
                             if refuse else ""))

        def probe(i: int) -> Probe:
            s = self.step(points[i], f"step {len(rows) - 1}:")
            v = self.verdict(s)
            rows.append(_row(points[i], s, v))
            return Probe(i, v, s.seconds)

        found = search(n, probe, refuse)
        info = describe or (lambda p: {"label": p.label})
        last, first = points[found.last_good], points[found.first_bad]
        note = ""
        if found.ambiguous:
            note = (f"{len(found.ambiguous)} points between the last good and the first bad could not be judged "
                    "(they do not import here): the first bad is one of them or the first bad shown")
        if assume_bad and b.skipped and found.first_bad == n - 1:
            note = (f"every point that imports here up to {last.label} is good; the bad end does not import "
                    "here (taken as bad from its release): the change came with the jaxlib, or with the "
                    "points that do not import")
        return Answer(mode, target, self.badness.describe() if self.badness else "", n, info(last), info(first),
                      [points[i].label for i in found.ambiguous], rows, time.monotonic() - t0,
                      self.stepper.ran - ran0, note, extra={"refuse_jaxlib": len(refuse)} if refuse else {})


def _row(p: Point, s: Step, verdict: str) -> dict[str, Any]:
    return {"point": p.label, "commit": p.commit, "subject": p.subject, "verdict": verdict,
            "seconds": round(s.seconds, 3), "cached": s.cached, "status": _summary(s), "jax": s.jax}


def _summary(s: Step) -> str:
    if s.skipped:
        return f"does not import: {s.import_error}"
    from farm.results import SEVERITY

    worst = max((r["status"] for r in s.records), key=SEVERITY.__getitem__, default="no records")
    bad = next((r for r in s.records if r["status"] == worst and worst not in ("ok", "skipped")), None)
    return worst + (f" at {bad['stage']}: {(bad.get('error') or '')[:120]}" if bad else "")


def _failing_signatures(s: Step, primitives: tuple[str, ...]) -> set[str]:
    from farm.analysis.bisection import signatures_of

    return signatures_of(s.records, primitives)


# --------------------------------------------------------------------------- commits
def commit_points(repo: str | Path, good: str, bad: str, python: str, env: dict[str, Any] | None = None,
                  trees: Path | None = None) -> list[Point]:
    """The commits from merge-base(good, bad) to bad, each a tree over ``python``'s jaxlib."""
    repo = jaxgit.check_repo(repo)
    g = jaxgit.resolve(repo, good, "--good")
    b = jaxgit.resolve(repo, bad, "--bad")
    commits = jaxgit.line(repo, g, b)
    trees = trees or venvs.cache_root() / "jax-trees"
    env_box: list[dict[str, Any]] = [env] if env else []

    def prepare(sha: str) -> Callable[[], Prepared]:
        def go() -> Prepared:
            if not env_box:
                env_box.append(environment_digest(python))
            tid = jaxgit.tree_id(repo, sha) or "none"
            return Prepared(python, lambda: str(jaxgit.materialize(repo, sha, trees)), commit_identity(tid, env_box[0]))
        return go

    return [Point(c.short, prepare(c.sha), c.sha, c.subject) for c in commits]


def describe_commit(repo: str | Path) -> Callable[[Point], dict[str, Any]]:
    def go(p: Point) -> dict[str, Any]:
        return {"label": p.label, "commit": p.commit, "subject": p.subject,
                "files": jaxgit.touched(repo, p.commit) if p.commit else []}
    return go


# --------------------------------------------------------------------------- the command's entry
@dataclass(frozen=True)
class Target:
    """What runs at each point: harness names of one catalog, the options, and what bad means."""

    label: str
    names: tuple[str, ...]
    catalog: str
    options: dict[str, Any]
    primitives: tuple[str, ...] = ()
    badness: Badness | None = None
    modules: tuple[str, ...] = ()


def bisect(target: Target, good: str, bad: str, *, jax_repo: str | None = None, jaxlib: str = "paired",
           index_url: str | None = None, timeout_s: float = 600.0, use_cache: bool = True,
           log: Log = _stderr) -> Answer:
    """Find the first bad point between ``good`` and ``bad`` (releases, or commits of ``jax_repo``)."""
    stepper = Stepper(list(target.names), target.catalog, target.options, modules=list(target.modules),
                      timeout_s=timeout_s, use_cache=use_cache)
    first = Bisector(stepper, target.badness, target.primitives, log)
    if is_release(good) and is_release(bad):
        line = release_line(good, bad, index_versions(index_url))
        ans = first.run("releases", target.label, release_points(line, jaxlib, log, index_url))
        if jax_repo and not ans.ambiguous:
            ans.then = _into_commits(ans, first, stepper, target, jax_repo, jaxlib, log)
        return ans
    if not jax_repo:
        ref = good if not is_release(good) else bad
        raise ConfigError(f"{ref!r} is not a jax release (e.g. 0.9.2): to bisect jax commits give --jax-repo PATH")
    python = sys.executable if jaxlib in ("paired", "fixed") else venvs.provision(jaxlib, log).python
    points = commit_points(jax_repo, good, bad, python)
    lib = metadata.version("jaxlib") if jaxlib in ("paired", "fixed") else jaxlib
    ok = jaxgit.imports_with(jax_repo, [p.commit or "" for p in points], lib)
    refuse = frozenset(i for i, x in enumerate(ok) if not x and 0 < i < len(points) - 1)
    return first.run("commits", target.label, points, describe=describe_commit(jax_repo), refuse=refuse)


def _into_commits(ans: Answer, first: Bisector, stepper: Stepper, target: Target, repo: str, jaxlib: str,
                  log: Log) -> Answer | None:
    """Go on inside the jax commits between the last good and the first bad release, over the
    jaxlib (of those two releases') that more of them import with, judged from each commit's
    ``jax/version.py`` (jax's own check); the search runs from the first to the last commit
    that imports. A failure to do so is a note on the release answer."""
    a, b = ans.last_good["label"], ans.first_bad["label"]
    try:
        jaxgit.check_repo(repo)
        ca, cb = release_commit(repo, a, jaxlib, log), release_commit(repo, b, jaxlib, log)
        if not ca or not cb:
            missing = a if not ca else b
            ans.note = (f"the jax repository has no commit for release {missing} (neither the commit its wheel "
                        f"names, {wheel_hash(missing, jaxlib) or '?'}, nor the tag jax-v{missing}; a newer "
                        "checkout may): no commit bisection")
            return None
        shas = [c.sha for c in jaxgit.line(repo, ca, cb)]
        libs = [b, a] if jaxlib == "paired" else [metadata.version("jaxlib")]
        fits = {v: jaxgit.imports_with(repo, shas, v) for v in libs}
        notes, agreed = [], {}
        for lib in sorted(libs, key=lambda v: -sum(fits[v])):  # the jaxlib more commits import with first
            ok = fits[lib]
            if not any(ok):
                notes.append(f"no commit imports with jaxlib {lib}")
                continue
            lo, hi = ok.index(True), len(ok) - 1 - ok[::-1].index(True)
            python = venvs.provision(lib, log).python if jaxlib == "paired" else sys.executable
            points = commit_points(repo, shas[0], cb, python)[lo:hi + 1]
            log(f"farm bisect: {a} is good and {b} bad: going on inside the jax commits {ca[:10]}..{cb[:10]} over "
                f"jaxlib {lib}: {points[0].label}..{points[-1].label} import with it ({sum(ok)} of {len(ok)})")
            inner = Bisector(stepper, first.badness, target.primitives, log)
            refuse = frozenset(i - lo for i in range(lo, hi + 1) if not ok[i])
            try:
                out = inner.run("commits", target.label, points, assume_bad=hi == len(ok) - 1,
                                describe=describe_commit(repo), refuse=refuse)
            except Agree as e:
                agreed[lib] = e.both
                notes.append(f"over jaxlib {lib} (commits {points[0].label}..{points[-1].label}): {e}")
                continue
            out.extra.update(jaxlib=lib, imports=f"{sum(ok)} of {len(ok)}")
            return out
        if agreed.get(a) == GOOD and agreed.get(b) == BAD:
            notes.append(f"the same jax commits are good over jaxlib {a} and bad over jaxlib {b}: the change came "
                         "with the jaxlib, not with jax's Python")
        ans.note = "no commit bisection: " + "; ".join(notes)
        return None
    except FarmError as e:
        ans.note = f"no commit bisection between {a} and {b}: {e}"
        return None
