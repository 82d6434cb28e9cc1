"""The edge-values check (``--edges [representative|all]``): a harness's function compiled for
the CPU and run with each operand at its dtype's edge values, then all together
(``farm.stages.edges``), each judged against the float64 jaxpr reference (``farm.judge.edges``).

``representative`` (what ``--edges`` alone means) takes one harness per primitive of the
catalog (``farm.catalog.registry.representative``: the same on every run and host); ``all``
every harness. A harness the catalog already draws at special values (group
``special_values``) is not drawn again.
"""
from __future__ import annotations

from farm.catalog import Harness, registry
from farm.catalog.known import EdgeValue, edge_values
from farm.judge import verdict, with_finding
from farm.pipeline.check import Base, Produced, Run
from farm.results import Record, check_spec
from farm.stages import edges
from farm.stages.record import Timer, failure


def chosen(h: Harness, how: str) -> bool:
    """Whether ``--edges how`` runs ``h``."""
    if how == "off" or h.key.group == "special_values":
        return False
    return how == "all" or (how == "representative" and registry.representative(h))


class EdgesCheck(Base):
    """On the static path of a harness that runs here and has an operand with edge values."""

    spec = check_spec("edges")

    def applies(self, run: Run) -> bool:
        h = run.h
        return (run.opts.edges != "off" and run.static and not run.abstract and "cpu" in run.opts.platforms
                and not h.mesh and h.devices == 1 and h.effects is None and h.pallas is None
                and chosen(h, run.opts.edges) and any(edges.edged(x) for x in run.dyn))

    def run(self, run: Run) -> Produced:
        jitted, jaxpr = run.traced.handle.jitted, run.traced.handle.traced.jaxpr
        timer = Timer()
        try:
            with timer():
                exe = edges.compiled(jitted, run.dyn)
        except Exception as e:  # a compile the native stage judges: nothing to run here
            return [Record("edge_values", "any", "skipped", timer.seconds,
                           error=f"does not compile here: {type(e).__name__}", facts={"reason": "no compile"})], []
        known = edge_values(run.h.primitive, run.h.dtype)
        out = []
        for label, args in edges.variants(run.dyn):
            try:
                out.append(self._variant(run, exe, jaxpr, label, args, known))
            except Exception as e:  # the farm's own bug: an error record, never a pass
                out.append(failure(Record, "edge_values", label, e, 0.0))
        return out, []

    @staticmethod
    def _variant(run: Run, exe: object, jaxpr: object, label: str, args: list, known: tuple[EdgeValue, ...]) -> Record:
        """One variant: the conventions' elements taken out first; then, where known findings
        cover elements and the variant fails, it must pass without all of them (then ``expected_fail``;
        else ``fail``, both errors). A variant that passes with them is ``ok`` and says the finding
        was not seen: a predicate is wider than where the bug shows on every dtype, and each
        finding's standalone repro (``tests/test_edges.py`` runs them) is what says it is fixed."""
        args, excused = edges.restored(args, run.dyn, [e.where for e in known if not e.finding])
        rec = verdict(edges.run(exe, label, args), h=run.h, jaxpr=jaxpr)
        if excused:
            rec = rec.with_status(rec.status, facts={**rec.facts, "excused": excused, "conventions": [
                e.description for e in known if not e.finding]})
        findings = [e for e in known if e.finding and edges.restored(args, run.dyn, [e.where])[1]]
        if not findings or rec.status not in ("ok", "fail"):
            return rec
        # every finding that covers elements of this variant, taken out together
        without, covered = edges.restored(args, run.dyn, [e.where for e in findings])
        again = verdict(edges.run(exe, label, without), h=run.h, jaxpr=jaxpr) if rec.status == "fail" else None
        return with_finding(rec, again, "; ".join(e.description for e in findings), covered)


CHECK = EdgesCheck()
