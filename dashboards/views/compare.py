"""Compare: the regression report between two runs, and accepting a regression.

``report`` is the one adapter between the store's rows and the analysis: it uses
``farm.analysis`` when that package provides a report function, else computes the
status flips itself. Accepting a flip is the dashboard's only write; it needs the
write token and is recorded in the newer run's ``stats["accepted"]``.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from flask import Flask, redirect, request, url_for

from dashboards.views import require_token, store, twin
from farm.errors import ConfigError
from farm.stages.record import BAD, SEVERITY
from farm.store import queries


def report(base: dict[str, Any], head: dict[str, Any], base_rows: list[dict[str, Any]],
           head_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The regression report between two runs' ``queries.results`` rows.

    Returns ``{"source", "flips": [...], "new": [...], "gone": [...], "summary": {...}}``;
    each flip is ``{harness, fingerprint, primitive, dtype, platform, stage, before, after,
    kind (regression|fix|change), error}``."""
    try:
        from farm.analysis import regression_report  # type: ignore[attr-defined]
    except ImportError:
        regression_report = None
    if callable(regression_report):
        out = regression_report(base_rows, head_rows)
        if isinstance(out, dict) and "flips" in out:
            return {"source": "farm.analysis", **out}
    key = lambda r: (r["fingerprint"], r["platform"], r["stage"])  # noqa: E731
    before = {key(r): r for r in base_rows}
    after = {key(r): r for r in head_rows}
    flips = []
    for k, r in after.items():
        b = before.get(k)
        if b is None or b["status"] == r["status"]:
            continue
        worse = SEVERITY[r["status"]] > SEVERITY[b["status"]]
        kind = ("regression" if r["status"] in BAD and worse else
                "fix" if b["status"] in BAD and not worse else "change")
        flips.append({"harness": r["harness"], "fingerprint": r["fingerprint"], "primitive": r["primitive"],
                      "dtype": r["dtype"], "platform": r["platform"], "stage": r["stage"], "before": b["status"],
                      "after": r["status"], "kind": kind, "error": r["error"]})
    order = {"regression": 0, "change": 1, "fix": 2}
    flips.sort(key=lambda f: (order[f["kind"]], f["harness"], f["platform"], f["stage"]))
    harnesses = lambda rows: {(r["fingerprint"], r["harness"]) for r in rows}  # noqa: E731
    new = sorted(n for _, n in harnesses(head_rows) - harnesses(base_rows))
    gone = sorted(n for _, n in harnesses(base_rows) - harnesses(head_rows))
    summary = {k: sum(f["kind"] == k for f in flips) for k in order}
    summary["compared"] = len(before.keys() & after.keys())
    return {"source": "dashboard", "flips": flips, "new": new, "gone": gone, "summary": summary}


def context() -> dict[str, Any]:
    base_ref = request.args.get("base", "previous")
    head_ref = request.args.get("head", "latest")
    with store().session() as s:
        b, h = queries.resolve_run(s, base_ref), queries.resolve_run(s, head_ref)
        base, head = queries.run_dict(s, b), queries.run_dict(s, h)
        rep = report(base, head, queries.results(s, b.id), queries.results(s, h.id))
    accepted = {(a["fingerprint"], a["platform"], a["stage"]) for a in head["stats"].get("accepted", [])
                if a.get("base") == base["id"]}
    for f in rep["flips"]:
        f["accepted"] = (f["fingerprint"], f["platform"], f["stage"]) in accepted
    return {"base": base, "head": head, "report": rep}


def accept() -> Any:
    """POST /compare/accept: mark one regression accepted (token required)."""
    require_token()
    form = request.form
    missing = [k for k in ("base", "head", "fingerprint", "platform", "stage") if not form.get(k)]
    if missing:
        raise ConfigError(f"missing form field(s): {', '.join(missing)}")
    with store().session() as s:
        b, h = queries.resolve_run(s, form["base"]), queries.resolve_run(s, form["head"])
        queries.harness_by_fingerprint(s, form["fingerprint"])
        entry = {"base": b.id, "fingerprint": form["fingerprint"], "platform": form["platform"],
                 "stage": form["stage"], "note": form.get("note", "")[:500],
                 "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        stats = dict(h.stats or {})
        stats["accepted"] = [a for a in stats.get("accepted", []) if
                             (a["base"], a["fingerprint"], a["platform"], a["stage"]) !=
                             (b.id, entry["fingerprint"], entry["platform"], entry["stage"])] + [entry]
        h.stats = stats
        base_id, head_id = b.id, h.id
    if request.accept_mimetypes.best == "application/json" or request.headers.get("Authorization"):
        from flask import jsonify

        return jsonify({"accepted": entry}), 201
    return redirect(url_for("compare", base=base_id, head=head_id), code=303)


def register(app: Flask) -> None:
    twin(app, "/compare", "/compare.json", "compare", "compare.html", context)
    app.add_url_rule("/compare/accept", "compare_accept", accept, methods=["POST"])
