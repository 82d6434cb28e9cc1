"""Compare: the regression report between two runs, and accepting a regression.

The page reads the report that ``farm.store.reports`` keeps per pair of finished runs
(``farm sweep`` stores the one against the previous run when it ends); a pair seen for
the first time is computed and stored then. ``summarize`` turns that analysis report
into the page's flips (the per-stage flips and the harness x platform gate's findings: a
crash, a timeout or a vanished result, with stage ``*``); ``report`` is the same over two
runs' rows (it computes the status
flips itself if ``farm.analysis`` is missing). Accepting a flip is the dashboard's only
user write; it needs the write token and is recorded in the newer run's
``stats["accepted"]``, applied after the report, which it does not change.
"""
from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

from flask import Flask, current_app, jsonify, redirect, request, url_for

from dashboards.cache import bump_generation
from dashboards.views import require_token, store, twin
from farm.errors import ConfigError, RunNotFound
from farm.results import BAD, SEVERITY
from farm.reports.comparison import DASHBOARD, comparison
from farm.store import harnesses, queries

#: The perf findings the compare page's dot plot shows (the largest changes).
PERF_DOTS = 40


def summarize(full: dict[str, Any]) -> dict[str, Any]:
    """The page's report from a ``farm.analysis.report``: its status findings as flips, the
    rest as ``findings``, and the whole of it as ``analysis`` (see ``report``)."""
    flips: list[dict[str, Any]] = []
    findings: list[dict[str, Any]] = []
    for f in full["findings"]:
        if f["kind"] != "status":
            findings.append(f)
            continue
        kind = "regression" if f["regression"] else "fix" if f.get("change") == "fixed" else "change"
        flips.append({k: f.get(k) for k in ("harness", "fingerprint", "primitive", "dtype", "platform",
                                            "stage", "change", "error", "scope", "platforms")}
                     | {"before": f.get("base"), "after": f.get("candidate"), "kind": kind})
    page = _page_report(flips, findings, full["harnesses"]["added"], full["harnesses"]["removed"],
                        full["summary"]["results_compared"], full)
    page["vanished"] = list(full["harnesses"].get("vanished", []))
    page["pending"] = list(full["harnesses"].get("pending", []))
    return page


def report(base: dict[str, Any], head: dict[str, Any], base_rows: list[dict[str, Any]],
           head_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The regression report between two runs' ``queries.results`` rows.

    Uses ``farm.analysis.report`` (status flips, the harness x platform gate, numeric
    drift, performance) when the package is there, else computes the status flips here.
    Returns ``{"source", "flips", "findings", "new", "gone", "vanished", "pending",
    "summary", "analysis"}``; each flip is ``{harness, fingerprint, primitive, dtype,
    platform, stage, before, after, kind (regression|fix|change), change, error}`` (a
    gate finding also has ``scope`` and, for a vanished harness, ``platforms``; ``after``
    None: no result); ``gone`` are harnesses removed from the candidate's selection,
    ``vanished`` those it should have run and lacks; ``findings`` are the analysis's numeric and
    performance findings (empty without it); ``analysis`` its whole report (or None)."""
    try:
        from farm import analysis  # optional package: the fallback below runs without it (no start-up cost)
    except ImportError:
        analysis = None
    if analysis is not None:
        return summarize(analysis.report(base, base_rows, head, head_rows))
    flips: list[dict[str, Any]] = []
    before = {(r["fingerprint"], r["platform"], r["stage"]): r for r in base_rows}
    for r in head_rows:
        b = before.get((r["fingerprint"], r["platform"], r["stage"]))
        if b is None or b["status"] == r["status"]:
            continue
        worse = SEVERITY[r["status"]] > SEVERITY[b["status"]]
        kind = ("regression" if r["status"] in BAD and worse else
                "fix" if b["status"] in BAD and not worse else "change")
        flips.append({"harness": r["harness"], "fingerprint": r["fingerprint"], "primitive": r["primitive"],
                      "dtype": r["dtype"], "platform": r["platform"], "stage": r["stage"], "change": None,
                      "before": b["status"], "after": r["status"], "kind": kind, "error": r["error"]})
    names = lambda rows: {r["harness"] for r in rows}  # noqa: E731
    new, gone = sorted(names(head_rows) - names(base_rows)), sorted(names(base_rows) - names(head_rows))
    compared = len(before.keys() & {(r["fingerprint"], r["platform"], r["stage"]) for r in head_rows})
    return _page_report(flips, [], new, gone, compared, None)


def _page_report(flips: list[dict[str, Any]], findings: list[dict[str, Any]], new: list[str], gone: list[str],
                 compared: int, full: dict[str, Any] | None) -> dict[str, Any]:
    order = {"regression": 0, "change": 1, "fix": 2}
    flips.sort(key=lambda f: (order[f["kind"]], f["harness"], f["platform"], f["stage"]))
    summary = {k: sum(f["kind"] == k for f in flips) for k in order}
    summary["compared"] = compared
    summary["numeric_or_perf_regressions"] = sum(bool(f.get("regression")) for f in findings)
    return {"source": "farm.analysis" if full is not None else "dashboard", "flips": flips, "findings": findings,
            "new": new, "gone": gone, "vanished": [], "pending": [], "summary": summary, "analysis": full}


def needs_two_runs() -> dict[str, Any] | None:
    """The page's context when the database has fewer than two runs: what comparison needs,
    instead of a 404 for a "previous" run that cannot exist (None when there are two)."""
    with store().session() as s:
        n = queries.count_runs(s)
        if n > 1:
            return None
        only = queries.run_dict(s, queries.resolve_run(s, "latest"), with_counts=False) if n else None
    have = f"this database has one run ({only['name']})" if only else "this database has no runs yet"
    return {"base": None, "head": only, "report": None, "runs": n,
            "needs": f"Comparison needs two runs; {have}. Run another `farm sweep`, then compare the two here "
                     f"or with `farm compare previous latest`."}


def context() -> dict[str, Any]:
    base_ref, head_ref = request.args.get("base", "previous"), request.args.get("head", "latest")
    try:
        c = comparison(store(), base_ref, head_ref, DASHBOARD, log=current_app.logger.warning)
    except RunNotFound:
        if {base_ref, head_ref} <= {"previous", "latest"} and (few := needs_two_runs()) is not None:
            return few  # not a typo'd run: the database has no second run to compare with
        raise
    base, head, rep = c.base, c.head, summarize(c.report)
    accepted = {(a["fingerprint"], a["platform"], a["stage"]) for a in head["stats"].get("accepted", [])
                if a.get("base") == base["id"]}
    for f in rep["flips"]:
        f["accepted"] = (f["fingerprint"], f["platform"], f["stage"]) in accepted
    return {"base": base, "head": head, "report": rep, "needs": None, "perf_dots": perf_dots(rep["findings"])}


def perf_dots(findings: list[dict[str, Any]], limit: int = PERF_DOTS) -> list[dict[str, Any]]:
    """The dot plot's rows for the performance findings: ``{label, ratio, kind, harness,
    fingerprint, platform, stage, metric}``, the ``limit`` largest changes (by |log ratio|)."""
    rows = [{"label": f'{f["harness"]} {f["platform"]}/{f["stage"]} {f.get("metric") or ""}'.strip(),
             "ratio": f["ratio"], "kind": f.get("verdict") or "changed", "harness": f["harness"],
             "fingerprint": f["fingerprint"], "platform": f["platform"], "stage": f["stage"],
             "metric": f.get("metric")}
            for f in findings if f["kind"] == "perf" and isinstance(f.get("ratio"), (int, float))
            and math.isfinite(f["ratio"]) and f["ratio"] > 0]
    rows.sort(key=lambda r: -abs(math.log(r["ratio"])))
    return rows[:limit]


def accept() -> Any:
    """POST /compare/accept: mark one regression accepted (token required)."""
    require_token()
    form = request.form
    missing = [k for k in ("base", "head", "fingerprint", "platform", "stage") if not form.get(k)]
    if missing:
        raise ConfigError(f"missing form field(s): {', '.join(missing)}")
    with store().session() as s:
        b, h = queries.resolve_run(s, form["base"]), queries.resolve_run(s, form["head"])
        harnesses.harness_by_fingerprint(s, form["fingerprint"])
        entry = {"base": b.id, "fingerprint": form["fingerprint"], "platform": form["platform"],
                 "stage": form["stage"], "note": form.get("note", "")[:500],
                 "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        stats = dict(h.stats or {})
        stats["accepted"] = [a for a in stats.get("accepted", []) if
                             (a["base"], a["fingerprint"], a["platform"], a["stage"]) !=
                             (b.id, entry["fingerprint"], entry["platform"], entry["stage"])] + [entry]
        h.stats = stats
        base_id, head_id = b.id, h.id
    bump_generation()  # the compare pages now show it accepted: cached pages are stale
    if request.accept_mimetypes.best == "application/json" or request.headers.get("Authorization"):
        return jsonify({"accepted": entry}), 201
    return redirect(url_for("compare", base=base_id, head=head_id), code=303)


def register(app: Flask) -> None:
    twin(app, "/compare", "/compare.json", "compare", "compare.html", context, params=("base", "head"))
    app.add_url_rule("/compare/accept", "compare_accept", accept, methods=["POST"])
