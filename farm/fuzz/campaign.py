"""The fuzz campaign: draw cases from a seed, run them as a run of kind ``fuzz`` on the
normal scheduler, shrink each new failure signature, write the findings, summarize.

Rounds: round ``r`` draws ``per_round`` cases of family ``families[r % n]`` with hypothesis
seed ``round_seed(seed, r)`` (``farm.fuzz.generate``), so every family gets its share and
the same seed gives the same cases. The sweep stops handing out cases when the budget is
spent (``SweepConfig.budget_s``, counted from the first outcome, once the workers are up);
what is running finishes. Each case is a harness of the
``fuzz`` catalog that the workers rebuild from the cases file (``farm.fuzz.worker_catalog``),
so a crash or a hang is an outcome like any sweep's (the scheduler's isolation).
"""
from __future__ import annotations

import itertools
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from farm.catalog.cases import Case
from farm.catalog.harness import Harness
from farm.errors import ConfigError, UnknownName
from farm.fuzz import generate, strategies, worker_catalog
from farm.fuzz.worker_catalog import CATALOG, ENV
from farm.results import BAD, Options, Outcome

#: Cases drawn per second of budget and worker before the campaign starts (generous: a
#: campaign that runs out of cases ends early; drawing costs ~10 ms a case).
DRAW_RATE = 2.5


@dataclass(frozen=True)
class Plan:
    """What a campaign fuzzes, with what seed and budget."""

    families: tuple[str, ...]
    dtypes: tuple[str, ...]
    primitives: tuple[str, ...] = ()
    seed: int = 0
    budget_s: float = 60.0
    workers: int = 2
    per_round: int = 25
    cases: int | None = None  # how many to draw (None: from the budget, DRAW_RATE)
    shrink_runs: int = 40  # candidates run per shrunk signature
    shrink_s: float = 120.0  # time for shrinking all signatures together
    options: Options = field(default_factory=lambda: Options(repeats=1))

    @classmethod
    def parse(cls, families: str | None, dtypes: str | None, primitives: str | None, **kw: Any) -> "Plan":
        split = lambda s: tuple(x.strip() for x in (s or "").split(",") if x.strip())  # noqa: E731
        prims = split(primitives)
        fams = split(families) or tuple(strategies.FAMILIES)
        for f in fams:
            if f not in strategies.FAMILIES:
                raise UnknownName("fuzz family", f, strategies.FAMILIES)
        known = {p for f in fams for p in strategies.primitives_of(f)}
        for p in prims:
            if p not in known:
                raise UnknownName("fuzzable primitive", p, known)
        if prims:  # only the families that have one of them
            fams = tuple(f for f in fams if set(strategies.primitives_of(f)) & set(prims))
        dts = split(dtypes) or strategies.DEFAULT_DTYPES
        fuzzable = ("bool",) + strategies.INTEGER + strategies.FLOAT
        for d in dts:
            if d not in fuzzable:
                raise UnknownName("fuzzable dtype", d, fuzzable)
        plan = cls(fams, dts, prims, **kw)
        if not plan.rounds_families():
            raise ConfigError(f"nothing to fuzz: no primitive of {','.join(fams)} in {','.join(dts)}")
        return plan

    def rounds_families(self) -> tuple[str, ...]:
        """The families that have a case to draw for these dtypes and primitives."""
        return tuple(f for f in self.families
                     if not strategies.cases([f], self.dtypes, self.primitives).is_empty)

    def family_of_round(self, r: int) -> str:
        fams = self.rounds_families()
        return fams[r % len(fams)]

    def strategy(self, r: int) -> Any:
        return strategies.cases([self.family_of_round(r)], self.dtypes, self.primitives)

    def to_dict(self) -> dict[str, Any]:
        return {"families": list(self.families), "dtypes": list(self.dtypes), "primitives": list(self.primitives),
                "seed": self.seed, "budget_s": self.budget_s, "per_round": self.per_round}


@dataclass
class Drawn:
    """The campaign's harnesses, in the order they run, and the round each was first drawn in."""

    harnesses: list[Harness] = field(default_factory=list)
    cases: dict[str, Case] = field(default_factory=dict)  # fingerprint -> case
    round_of: dict[str, int] = field(default_factory=dict)  # fingerprint -> round
    seconds: float = 0.0


def draw(plan: Plan, log: Callable[[str], None] = lambda s: None) -> Drawn:
    """Round after round until there are enough distinct cases (duplicates are dropped)."""
    t0 = time.perf_counter()
    want = plan.cases or max(plan.per_round, int(plan.budget_s * DRAW_RATE * max(1, plan.workers)))
    out = Drawn()
    r = 0
    while len(out.harnesses) < want and r < 10 * (want // max(1, plan.per_round) + 1):
        for c in generate.draw_round(plan.strategy(r), plan.seed, r, plan.per_round):
            h = worker_catalog.define(c)
            if h.fingerprint not in out.cases:
                out.harnesses.append(h)
                out.cases[h.fingerprint] = c
                out.round_of[h.fingerprint] = r
        r += 1
    # interleaved, one case of each round in turn: every family is reached early in a short budget
    by_round: dict[int, list[Harness]] = {}
    for h in out.harnesses[:want]:
        by_round.setdefault(out.round_of[h.fingerprint], []).append(h)
    out.harnesses = [h for group in itertools.zip_longest(*by_round.values()) for h in group if h is not None]
    out.seconds = time.perf_counter() - t0
    log(f"drew {len(out.harnesses)} cases in {r} rounds ({out.seconds:.1f}s)")
    return out


@dataclass
class Result:
    """What a campaign did: its run, counts, where the time went, its signatures."""

    run_id: int
    run_name: str
    cases: int  # run
    drawn: int
    bad: int
    per_stage: dict[str, int]  # stage -> cases with a bad record there
    stage_seconds: dict[str, float]  # stage -> seconds summed over cases and platforms
    timings: dict[str, float]  # drawing, sweep (cluster start + running), shrinking, total
    signatures: list[dict[str, Any]] = field(default_factory=list)  # one per cause, with its cases
    found: list[str] = field(default_factory=list)  # files written

    @property
    def rate(self) -> float:
        return self.cases / self.timings["sweep"] if self.timings.get("sweep") else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"run": {"id": self.run_id, "name": self.run_name}, "cases": self.cases, "drawn": self.drawn,
                "bad": self.bad, "cases_per_s": round(self.rate, 3), "per_stage": self.per_stage,
                "stage_seconds": {k: round(v, 3) for k, v in self.stage_seconds.items()},
                "timings": {k: round(v, 3) for k, v in self.timings.items()}, "signatures": self.signatures,
                "found": self.found}


def run_campaign(store: Any, plan: Plan, *, name: str | None = None, found_dir: str | None = None,
                 progress: bool | None = None, log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)
                 ) -> Result:
    """Draw, sweep as a ``fuzz`` run, shrink the failures, write them to ``found_dir``."""
    from farm.run.sweep import SweepConfig, sweep

    t0 = time.perf_counter()
    drawn = draw(plan, log)
    fd, path = tempfile.mkstemp(prefix="farm-fuzz-", suffix=".jsonl")
    os.close(fd)
    try:
        worker_catalog.write_cases(path, [drawn.cases[h.fingerprint] for h in drawn.harnesses])
        cfg = SweepConfig(workers=plan.workers, batch=2, timeout_s=60.0, modules=("farm.fuzz.worker_catalog",),
                          # a planted fault travels with the cases: workers of a cluster that is
                          # already running (another sweep's) did not inherit this process's variables
                          env={ENV: path, **{k: os.environ[k] for k in ("FARM_PLANT",) if k in os.environ}},
                          progress=progress, budget_s=plan.budget_s, keep_order=True)
        t1 = time.perf_counter()
        run, stats = sweep(store, drawn.harnesses, options=plan.options, catalog=CATALOG,
                           filters={"fuzz": plan.to_dict()}, config=cfg, name=name, kind="fuzz", log=log)
        t2 = time.perf_counter()
    finally:
        os.unlink(path)
    outcomes = _outcomes(store, run.id, stats.done)
    res = _result(run, drawn, outcomes, {"draw": t1 - t0, "sweep": t2 - t1})
    if found_dir is not None and res.signatures:
        from farm.fuzz import keep

        res.found = keep.shrink_and_write(plan, drawn, outcomes, res.signatures, found_dir, run.name, log)
    res.timings["shrink"] = time.perf_counter() - t2
    res.timings["total"] = time.perf_counter() - t0
    _record(store, run.id, res)
    return res


def _outcomes(store: Any, run_id: int, done: int) -> dict[str, Outcome]:
    """fingerprint -> the outcome each case got, read back from the store (records only)."""
    from farm.results import Record
    from farm.store import queries

    from sqlalchemy import select

    from farm.store.models import HarnessRow, OutcomeRow

    with store.session() as s:
        rows = queries.results(s, run_id)
        order = s.execute(select(HarnessRow.fingerprint).join(OutcomeRow, OutcomeRow.harness_id == HarnessRow.id)
                          .where(OutcomeRow.run_id == run_id).order_by(OutcomeRow.id)).scalars().all()
    recs: dict[str, list[Record]] = {fp: [] for fp in order}  # in the order they were stored
    names: dict[str, str] = {}
    for r in rows:
        names[r["fingerprint"]] = r["harness"]
        recs.setdefault(r["fingerprint"], []).append(Record(
            r["stage"], r["platform"], r["status"], r["seconds"] or 0.0, r["error_type"], r["error"],
            metrics=r["metrics"] or {}, facts=r["facts"] or {}))
    return {fp: Outcome(fp, names[fp], tuple(rs)) for fp, rs in recs.items() if rs}


def _result(run: Any, drawn: Drawn, outcomes: dict[str, Outcome], timings: dict[str, float]) -> Result:
    from farm.analysis.signatures import signature

    per_stage: Counter[str] = Counter()
    secs: Counter[str] = Counter()
    by_sig: dict[str, dict[str, Any]] = {}
    bad = 0
    for i, (fp, o) in enumerate(outcomes.items()):
        case = drawn.cases.get(fp)
        stages = {r.stage for r in o.records if r.status in BAD}
        per_stage.update(stages)
        bad += bool(stages)
        for r in o.records:
            secs[r.stage] += r.seconds
        if case is None:
            continue
        for r in o.records:
            sig = signature(r.to_dict(), primitives=[case.primitive])
            if sig is None:
                continue
            e = by_sig.setdefault(sig.key, {"key": sig.key, "describe": sig.describe(), "signature": sig, "cases": [],
                                            "platforms": set(), "first_at": i + 1})  # the (i+1)-th case stored
            if fp not in e["cases"][-1:]:
                e["cases"].append(fp)
            e["platforms"].add(r.platform)
    sigs = sorted(by_sig.values(), key=lambda e: (-len(e["cases"]), e["key"]))
    return Result(run.id, run.name, len(outcomes), len(drawn.harnesses), bad, dict(per_stage), dict(secs), timings,
                  sigs)


def _record(store: Any, run_id: int, res: Result) -> None:
    """The campaign's summary in the run's stats; its total is what ran (the rest was never due)."""
    from farm.store.models import Run

    with store.session() as s:
        run = s.get(Run, run_id)
        d = res.to_dict()
        d["signatures"] = [{k: (sorted(v) if isinstance(v, set) else v) for k, v in e.items() if k != "signature"}
                           for e in d["signatures"]]
        run.stats = {**(run.stats or {}), "fuzz": d}
        run.total = res.cases


def summary_lines(res: Result) -> list[str]:
    """The end of ``farm fuzz``: cases, rate, failures per stage, where the time went, causes."""
    t = res.timings
    out = [f"fuzz run {res.run_name} (id {res.run_id}): {res.cases} cases run of {res.drawn} drawn, "
           f"{res.bad} failing; {res.rate:.2f} cases/s",
           "time: " + ", ".join(f"{k} {v:.1f}s" for k, v in t.items())]
    total = sum(res.stage_seconds.values()) or 1.0
    out.append("inside the cases: " + ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in
                                                 sorted(res.stage_seconds.items(), key=lambda kv: -kv[1]) if v > 0))
    out.append("failures per stage: " + (", ".join(f"{k} {v}" for k, v in sorted(res.per_stage.items())) or "none"))
    for e in res.signatures:
        at = e["first_at"] / res.rate if res.rate else 0.0
        out.append(f"  {e['key']}  {len(e['cases'])} case(s) on {','.join(sorted(e['platforms']))}, first at case "
                   f"{e['first_at']} (~{at:.0f}s of running): {e['describe'][:150]}")
    out += [f"  kept: {p}" for p in res.found]
    return out

