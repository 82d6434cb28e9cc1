"""Limitations applied as data: a harness's known gaps turn its records into expected
failures, and a limitation that no longer holds into an ``unexpected_pass`` finding.

Pure functions over a harness and its records; nothing here runs a stage.
"""
from __future__ import annotations

from farm.catalog import Harness, Limitation, known
from farm.platforms import native_platform
from farm.results import EXPECTABLE, PLATFORMS_OF_KIND, RUN_STAGES, Outcome, Record, carried, check_of, limitation_stages


def judge_record(h: Harness, rec: Record) -> Record:
    """Apply the harness's limitations: expected failures and stale limitations. A stage with
    no limitation of its own that explains a failure is judged by the earlier stages' that its
    check carries (``farm.results.CheckSpec.carries``)."""
    if rec.stage == "xhost":
        return _xhost(h, rec)
    if rec.stage == "run" or rec.stage not in limitation_stages():  # a record's stage is the Limitation stage judging it
        return rec
    stage = rec.stage
    platforms = (rec.platform,) + PLATFORMS_OF_KIND.get(rec.platform, ())
    if rec.stage == "export" and rec.platform == "export" and rec.status == "ok":
        # the artifact holds these platforms: a limitation saying one cannot be exported is stale
        platforms += tuple(rec.facts.get("platforms", ()))
    if ":" in rec.platform:  # "tpu:v5e", a target: a limitation may name it or its platform
        platforms += (rec.platform.partition(":")[0],)
    for fact in (spec := check_of(rec.stage)) and spec.platform_facts or ():  # more platforms its check's facts name
        named = rec.facts.get(fact)
        platforms += tuple(p for p in ([named] if isinstance(named, str) else named or ()) if p)
    lim = _explaining(rec, [h.limitation(platform, stage) for platform in platforms])
    was_carried = False
    if lim is None or not lim.expects(rec.status, rec.error_type, rec.error):
        # none of this stage's own explains it: one carried from an earlier stage may (a sunk
        # four-platform export fails with the error of whichever platform lowered first)
        via = _explaining(rec, [h.limitation(on or platform, s) for platform in platforms
                                for s, on in carried(rec.stage, platform == "cpu")])
        if via is not None and (lim is None or via.expects(rec.status, rec.error_type, rec.error)):
            lim, was_carried = via, True
    if lim is None:  # an upstream issue known in every catalog explains only its own failure
        issue = known.explaining(h.key.primitive, rec.stage, rec.status, rec.error_type, rec.error, platforms)
        return rec if issue is None else rec.with_status(
            "expected_fail", facts={**rec.facts, "limitation": issue.description, "known_issue": issue.url})
    if was_carried and rec.status == "ok":  # a carried limitation explains a failure, never flags a pass
        return rec
    facts = {**rec.facts, "limitation": lim.description}
    if rec.status in EXPECTABLE:
        return expected(rec, lim)
    if rec.status == "ok":
        return rec.with_status("unexpected_pass", facts=facts,
                               error=f"limitation no longer holds: {lim.description}")
    return rec


def _explaining(rec: Record, found: list[Limitation | None]) -> Limitation | None:
    """The first of ``found`` that explains ``rec``'s failure (a four-platform export sunk by two
    platforms fails with the error of whichever lowered first), else the first of them."""
    lims = [lim for lim in found if lim]
    return next((lim for lim in lims if lim.expects(rec.status, rec.error_type, rec.error)), lims[0] if lims else None)


def _xhost(h: Harness, rec: Record) -> Record:
    """Another host's (another jax's) artifact that fails against the reference only, where
    the harness declares that its compare fails on this platform: the same known gap, judged
    by that limitation. Any other xhost result stands (an ok is no evidence about the
    limitation: the artifact may come from another jax)."""
    f = rec.facts
    if rec.status != "fail" or f.get("vs_reference") != "fail" or "fail" in (f.get("vs_native"), f.get("vs_cpu_host")):
        return rec
    lim = h.limitation(rec.platform, "compare")
    return rec if lim is None else expected(rec, lim)


def expected(rec: Record, lim: Limitation) -> Record:
    """A failure behind a limitation: ``expected_fail`` if it is the failure the limitation
    describes, else ``fail`` showing what was expected and what happened."""
    facts = {**rec.facts, "limitation": lim.description}
    if lim.expects(rec.status, rec.error_type, rec.error):
        return rec.with_status("expected_fail", facts=facts)
    want = " ".join(filter(None, (lim.status, lim.error and f"/{lim.error}/")))
    return rec.with_status("fail", error_type="UnexpectedFailure",
                           error=f"expected {want} ({lim.description}); got {rec.status}: "
                                 f"{rec.error_type}: {rec.error}"[:1000],
                           facts={**facts, "expected_error": lim.error, "expected_status": lim.status,
                                  "actual_status": rec.status, "actual_error_type": rec.error_type,
                                  "actual_error": rec.error})


def judge_run(h: Harness, records: list[Record]) -> list[Record]:
    """Limitations with ``stage="run"``, judged per platform over its native stages: the
    failing ones are expected; if the platform ran natively (an execute record) and
    nothing failed, the limitation is stale (``unexpected_pass`` on the last of them)."""
    out = list(records)
    for platform in dict.fromkeys(r.platform for r in records):
        lim = h.limitation(platform, "run")
        if lim is None:
            continue
        idx = [i for i, r in enumerate(out) if r.platform == platform and r.stage in RUN_STAGES]
        bad = [i for i in idx if out[i].status in ("fail", "error", "not_runnable_here")]
        for i in bad:
            out[i] = expected(out[i], lim)
        ran = any(out[i].stage == "execute" for i in idx)
        passed = [i for i in idx if out[i].status == "ok"]
        if not bad and ran and passed and all(out[i].status in ("ok", "skipped") for i in idx):
            i = passed[-1]
            out[i] = out[i].with_status("unexpected_pass", facts={**out[i].facts, "limitation": lim.description},
                                        error=f"limitation no longer holds: {lim.description}")
    return out


def judge_crash(h: Harness, outcome: Outcome, run_on: tuple[str, ...], vjp: int = 0) -> Outcome:
    """A ``crashed`` outcome where the harness is known to kill the process on a platform
    it ran natively on (``Limitation.crashes``), in a sweep differentiating to the order the
    limitation names (``vjp``), is the expected failure."""
    if outcome.worst != "crashed":
        return outcome
    for kind in run_on:
        platform = native_platform(kind)
        for lim in h.limitations:
            if lim.crashes and lim.applies(platform, h.dtype) and vjp >= lim.vjp:
                return outcome.replace(records=[
                    r.with_status("expected_fail", facts={**r.facts, "limitation": lim.description})
                    if r.status == "crashed" else r for r in outcome.records])
    return outcome
