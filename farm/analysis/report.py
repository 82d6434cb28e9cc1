"""The comparison of a candidate run with a base run: one JSON-able dict that the CLI
(``farm compare``) and the dashboard both render.

``report(base_run, base_rows, cand_run, cand_rows, history, selection=...)`` takes what
``farm.store.queries.run_dict`` and ``farm.store.queries.results`` return, and what the
candidate's catalog and filters select (``farm.reports.comparison.selection``), and nothing
else; it does no I/O.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from farm.analysis import clusters as clusters_mod
from farm.analysis import drift as drift_mod
from farm.analysis import flips as flips_mod
from farm.analysis import gate as gate_mod
from farm.analysis import perf as perf_mod
from farm.analysis.flaky import flaky as flaky_results
from farm.analysis.rows import Row, env_fingerprint, index, run_brief

#: 2: harness x platform findings of ``farm.analysis.gate`` (stage "*", ``scope``), change
#: ``vanished``, ``harnesses.vanished``/``pending``, ``gate``. 4: ``clusters`` (appeared, gone,
#: spread: ``farm.analysis.clusters.diff``) and each regression's ``cluster`` key.
FORMAT_VERSION = 4
#: The kinds of regression ``--fail-on`` can name.
KINDS = ("status", "numeric", "perf")
ENV_KEYS = ("jax_version", "jaxlib_version", "python", "device_kinds", "xla_flags", "host", "farm_commit")

_STATUS_SEVERITY = {"new_error": 100, "vanished": 95, "new_failure": 90, "unexpected_pass": 70, "missing": 40,
                    "changed": 30, "fixed": 10, "new_result": 5}
_NUMERIC_SEVERITY = {"exceeds_tolerance": 80, "grew": 60, "back_in_tolerance": 8, "shrank": 6}

RunRows = tuple[Mapping[str, Any], Sequence[Row]]


def _severity(f: dict) -> float:
    if f["kind"] == "status":
        return 20.0 if f.get("flaky") else float(_STATUS_SEVERITY[f["change"]])
    if f["kind"] == "numeric":
        r = f.get("max_ratio")
        extra = min(9.0, math.log10(r)) if isinstance(r, (int, float)) and r > 1 else 0.0
        return _NUMERIC_SEVERITY[f["verdict"]] + extra
    if f["kind"] == "perf":
        if f["verdict"] != "regression":
            return 7.0 if f["verdict"] == "improvement" else 1.0
        r = f.get("ratio")
        return 50.0 + (min(9.0, math.log2(r)) if isinstance(r, (int, float)) and r > 1 else 0.0)
    return 20.0 + 10.0 * f.get("rate", 0.0)  # flaky


def _environment(base_run: Mapping[str, Any], cand_run: Mapping[str, Any]) -> dict[str, Any]:
    be, ce = base_run.get("environment") or {}, cand_run.get("environment") or {}
    diff = {k: {"base": be.get(k), "candidate": ce.get(k)} for k in ENV_KEYS if be.get(k) != ce.get(k)}
    return {"same": env_fingerprint(base_run) == env_fingerprint(cand_run), "differences": diff}


def _harnesses(base_rows: Sequence[Row], cand_rows: Sequence[Row]) -> tuple[set[str], dict[str, Any]]:
    bfp = {r["fingerprint"]: r for r in base_rows}
    cfp = {r["fingerprint"]: r for r in cand_rows}
    bname = {r["harness"]: fp for fp, r in bfp.items()}
    cname = {r["harness"]: fp for fp, r in cfp.items()}
    common = set(bfp) & set(cfp)
    redefined = sorted(n for n in set(bname) & set(cname) if bname[n] != cname[n])
    added = sorted(cfp[fp]["harness"] for fp in set(cfp) - set(bfp) if cfp[fp]["harness"] not in redefined)
    removed = sorted(bfp[fp]["harness"] for fp in set(bfp) - set(cfp) if bfp[fp]["harness"] not in redefined)
    return common, {"base": len(bfp), "candidate": len(cfp), "compared": len(common), "added": added,
                    "removed": removed, "redefined": redefined}


def _ordered_runs(base_run: Mapping[str, Any], base_rows: Sequence[Row], cand_run: Mapping[str, Any],
                  cand_rows: Sequence[Row], history: Sequence[RunRows] | None) -> list[RunRows]:
    """Base, candidate and the history runs not after the candidate, oldest first (id None
    last): one series for flakiness and performance, without runs the candidate cannot know."""
    bid, cid = base_run["id"], cand_run["id"]
    runs: dict[Any, RunRows] = {}
    for run, rows in history or ():
        if run["id"] not in (bid, cid) and (run["id"] is None or cid is None or run["id"] < cid):
            runs[run["id"]] = (run, rows)
    runs[bid] = (base_run, base_rows)
    runs[cid] = (cand_run, cand_rows)
    return [runs[i] for i in sorted(runs, key=lambda i: (i is None, i))]


def _history_ids(ordered: Sequence[RunRows], bid: Any, cid: Any) -> tuple[list[Any], list[Any]]:
    """The ids of the runs up to the base (performance's history) and of every run but the
    candidate (drift's history)."""
    upto_base = [run["id"] for run, _ in ordered if run["id"] == bid or (run["id"] is not None and bid is not None
                                                                         and run["id"] < bid)]
    before_cand = [run["id"] for run, _ in ordered if run["id"] != cid]
    return upto_base, before_cand


def _mark_flaky(f: dict, fk: Mapping[str, Any] | None) -> dict:
    """A flaky result's flip is no regression: ``f`` noting its flakiness, the flag cleared."""
    return {**f, "flaky": {"rate": fk["rate"], "runs": fk["runs"]}, "regression": False} if fk else f


def _status_findings(b: Mapping, c: Mapping, common: set[str], flaky: Mapping[tuple, Mapping[str, Any]]) -> list[dict]:
    """Stage-by-stage status flips, those of flaky results marked as such."""
    return [_mark_flaky(f, flaky.get((f["fingerprint"], f["platform"], f["stage"])))
            for f in flips_mod.flips(b, c, common)]


def _gate_findings(base_run: Mapping[str, Any], base_rows: Sequence[Row], cand_run: Mapping[str, Any],
                   cand_rows: Sequence[Row], ordered: Sequence[RunRows], status: Sequence[dict],
                   selection: Mapping[str, str] | None) -> tuple[dict[str, Any], list[dict]]:
    """The harness x platform gate (what stage-by-stage flips cannot see), skipping cells a
    status regression already names, with flaky cells marked; returns the gate's answer too."""
    covered = {(f["fingerprint"], f["platform"]) for f in status if f["change"] in flips_mod.REGRESSIONS}
    gated = gate_mod.gate(base_run, base_rows, cand_run, cand_rows, selection=selection, covered=covered)
    flaky_at = gate_mod.flaky_cells(ordered, [(f["fingerprint"], f["platform"]) for f in gated["findings"]
                                              if f["scope"] == "platform"])
    found = [_mark_flaky(f, flaky_at.get((f["fingerprint"], f["platform"]))) for f in gated["findings"]]
    return gated, found


def _with_absent(harnesses: Mapping[str, Any], gated: Mapping[str, Any]) -> dict[str, Any]:
    """``harnesses`` with the gate's vanished and pending harnesses, which are then not
    "removed": a harness the candidate should have run is no catalog change."""
    gone = set(gated["vanished"]) | set(gated["pending"])
    return {**harnesses, "removed": [n for n in harnesses["removed"] if n not in gone],
            "vanished": gated["vanished"], "pending": gated["pending"]}


def _gate_brief(selection: Mapping[str, str] | None, skipped: Sequence[str]) -> dict[str, Any]:
    """How the gate decided what the candidate should have run, so a reader can judge it."""
    return {"selection": "catalog" if selection is not None else "run counts",
            "selected": len(selection) if selection is not None else None,
            "skipped_platforms": skipped}


def _value_findings(b: Mapping, c: Mapping, common: set[str], idx: Mapping[Any, Mapping],
                    upto_base: Sequence[Any], before_cand: Sequence[Any], settings: perf_mod.Settings,
                    drift_factor: float, include_noise: bool) -> tuple[list[dict], dict[str, int]]:
    """Numeric drift and performance findings on the results both runs have, and the count
    of each performance verdict (noise included, for the summary)."""
    findings: list[dict] = []
    perf_counts: dict[str, int] = defaultdict(int)
    for k in sorted(set(b) & set(c)):
        if k[0] not in common:
            continue
        br, cr = b[k], c[k]
        d = drift_mod.drift(br, cr, [idx[i].get(k) for i in before_cand], factor=drift_factor)
        if d:
            findings.append(d)
        hist = [(i, idx[i].get(k)) for i in upto_base]
        for v in perf_mod.compare_rows(br, cr, hist, settings):
            perf_counts[v["verdict"]] += 1
            if v["verdict"] in ("regression", "improvement", "changed") or include_noise:
                findings.append({"kind": "perf", "regression": v["verdict"] == "regression",
                                 "harness": cr["harness"], "fingerprint": k[0], "primitive": cr["primitive"],
                                 "dtype": cr["dtype"], "platform": k[1], "stage": k[2], **v})
    return findings, perf_counts


def _flaky_findings(flaky: Mapping[tuple, Mapping[str, Any]], cand_rows: Sequence[Row]) -> list[dict]:
    """Flaky results of the harnesses the candidate ran (others are no longer its concern)."""
    names = {r["fingerprint"]: r for r in cand_rows}
    findings = []
    for k, fk in sorted(flaky.items()):
        if k[0] in names:
            r = names[k[0]]
            findings.append({"kind": "flaky", "regression": False, "harness": r["harness"], "fingerprint": k[0],
                             "primitive": r["primitive"], "dtype": r["dtype"], "platform": k[1], "stage": k[2],
                             **fk})
    return findings


def _ranked(findings: Sequence[dict]) -> list[dict]:
    """The findings with their severity, worst first, so readers see what matters first."""
    scored = [{**f, "severity": round(_severity(f), 3)} for f in findings]
    return sorted(scored, key=lambda f: (-f["severity"], f["harness"], f["platform"], f["stage"], f.get("metric", "")))


def _primitives(findings: Sequence[dict]) -> list[dict[str, Any]]:
    """Findings (already worst first) grouped by primitive, the worst group first: how a
    primitive's owner reads the report."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for f in findings:
        groups[f["primitive"]].append(f)
    primitives = [{"primitive": p, "worst": fs[0]["severity"], "regressions": sum(f["regression"] for f in fs),
                   "harnesses": sorted({f["harness"] for f in fs}), "findings": fs}
                  for p, fs in groups.items()]
    primitives.sort(key=lambda g: (-g["worst"], g["primitive"]))
    return primitives


def _regressions(findings: Sequence[dict]) -> dict[str, list[str]]:
    """The harnesses with a regression of each kind: what ``failing`` gates CI on."""
    return {kind: sorted({f["harness"] for f in findings if f["regression"] and
                          (f["kind"] == kind)}) for kind in KINDS}


def _summary(findings: Sequence[dict], perf_counts: Mapping[str, int], compared: int) -> dict[str, Any]:
    """Counts of every status change, drift verdict and performance verdict (zeros included,
    for a stable shape), of flaky results and of results compared."""
    by_change: dict[str, int] = defaultdict(int)
    for f in findings:
        if f["kind"] == "status":
            by_change[f["change"]] += 1
        elif f["kind"] == "numeric":
            by_change[f["verdict"]] += 1
    return {**{k: by_change.get(k, 0) for k in flips_mod.KINDS}, **{k: by_change.get(k, 0) for k in drift_mod.VERDICTS},
            "perf": {v: perf_counts.get(v, 0) for v in perf_mod.VERDICTS},
            "flaky": sum(f["kind"] == "flaky" for f in findings),
            "results_compared": compared}


def report(base_run: Mapping[str, Any], base_rows: Sequence[Row], cand_run: Mapping[str, Any],
           cand_rows: Sequence[Row], history: Sequence[RunRows] | None = None, threshold: float = 0.2, *,
           drift_factor: float = 4.0, z: float = 4.0, alpha: float = 0.05, min_history: int = 5,
           include_noise: bool = False, selection: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Compare ``cand`` with ``base``: status flips, the harness x platform gate (crashes,
    timeouts, vanished results), numeric drift, performance, flaky results.

    Args:
      base_run, cand_run: ``queries.run_dict`` of each run (needs ``id`` and ``environment``).
      base_rows, cand_rows: ``queries.results`` of each run.
      history: other runs as (run dict, rows) pairs, any order; base and candidate may be
        among them. Runs after the candidate are ignored. Performance uses the runs up to
        the base; flakiness uses all of them.
      threshold: the relative change a performance number must exceed (0.2 = 20%).
      drift_factor: how much an error metric must grow inside tolerance to count.
      z, alpha, min_history: the performance tests' thresholds (see ``farm.analysis.perf``).
      include_noise: also list performance results judged noise or insufficient data.
      selection: fingerprint -> name of the harnesses the candidate's catalog and filters
        select now, or None when unknown: which absent harnesses vanished and which were
        removed (see ``farm.analysis.gate``).

    Returns:
      A JSON-able dict, findings worst first and grouped by primitive (see README in
      ``farm/analysis/__init__.py``).
    """
    settings = perf_mod.Settings(threshold=threshold, alpha=alpha, z=z, min_history=min_history)
    bid, cid = base_run["id"], cand_run["id"]
    ordered = _ordered_runs(base_run, base_rows, cand_run, cand_rows, history)
    idx = {run["id"]: index(rows) for run, rows in ordered}
    upto_base, before_cand = _history_ids(ordered, bid, cid)

    b, c = idx[bid], idx[cid]
    common, harnesses = _harnesses(base_rows, cand_rows)
    flaky = flaky_results(ordered)

    findings = _status_findings(b, c, common, flaky)
    gated, gate_found = _gate_findings(base_run, base_rows, cand_run, cand_rows, ordered, findings, selection)
    findings += gate_found
    harnesses = _with_absent(harnesses, gated)
    value_found, perf_counts = _value_findings(b, c, common, idx, upto_base, before_cand, settings,
                                               drift_factor, include_noise)
    findings = _ranked(_in_clusters(findings + value_found, cand_rows) + _flaky_findings(flaky, cand_rows))
    summary = _summary(findings, perf_counts, sum(1 for k in set(b) & set(c) if k[0] in common))
    return {
        "format_version": FORMAT_VERSION,
        "base": run_brief(base_run),
        "candidate": run_brief(cand_run),
        "environment": _environment(base_run, cand_run),
        "settings": {"threshold": threshold, "drift_factor": drift_factor, "z": z, "alpha": alpha,
                     "min_history": min_history, "history_runs": len(ordered) - (1 if bid == cid else 2)},
        "harnesses": harnesses,
        "gate": _gate_brief(selection, gated["skipped_platforms"]),
        "summary": summary,
        "regressions": _regressions(findings),
        "clusters": clusters_mod.diff(base_rows, cand_rows),
        "primitives": _primitives(findings),
        "findings": findings,
    }


def _in_clusters(findings: Sequence[dict], cand_rows: Sequence[Row]) -> list[dict]:
    """Each regression whose candidate result fails, with the key of its failure cluster
    (``farm.analysis.clusters``): what an acknowledgement matches."""
    keys = clusters_mod.keys_of(cand_rows)
    out = []
    for f in findings:
        k = keys.get((f["fingerprint"], f["platform"], f["stage"])) if f["regression"] else None
        if k is None and f["regression"] and f["stage"] == "*":
            # a whole-harness record stood for the platform, or the platform vanished because
            # the harness failed before it (a lowering error on every platform: no export)
            k = keys.get((f["fingerprint"], "any", "*")) or keys.get((f["fingerprint"], "*", "*"))
        out.append({**f, "cluster": k} if k else f)
    return out


def failing(rep: Mapping[str, Any], kinds: Sequence[str] = ("status", "numeric"),
            acknowledged: Collection[str] = ()) -> dict[str, list[str]]:
    """The harnesses with a regression of each chosen kind (empty when none): a CI gate.
    A regression in an ``acknowledged`` cluster (its key) does not count.

    >>> failing({"regressions": {"status": ["a"], "numeric": [], "perf": ["b"]}}, ["status", "numeric"])
    {'status': ['a']}
    """
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown regression kind {unknown[0]!r} (valid: {', '.join(KINDS)})")
    regressions = rep["regressions"]
    if acknowledged:
        regressions = _regressions([f for f in rep["findings"] if f.get("cluster") not in acknowledged])
    return {k: list(regressions.get(k, [])) for k in kinds if regressions.get(k)}
