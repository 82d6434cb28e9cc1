"""Harness detail: definition, every stage per platform, module text, diffs, artifacts, history;
where the run has its symbolic variant, static against symbolic side by side per platform
(``farm.analysis.shapes.side_by_side``). ``?shapes=`` keeps the stage table and the history
to static or symbolic records.

Module text artifacts are found through each lower record's ``facts["module_sha256"]``;
the export artifact is the serialize record's ``artifact``. Every blob is read through
``farm.store.artifacts.get``, which checks its hash: a corrupt one is an error page on
download and an inline error on the detail page.
"""
from __future__ import annotations

import difflib
from typing import Any

from flask import Flask, Response, request
from sqlalchemy.orm import Session

from dashboards.views import one_of, shapes_arg, store, twin
from farm.analysis.shapes import keeps, side_by_side
from farm.errors import ArtifactNotFound, FarmError, RunNotFound
from farm.results import LOWERING_PLATFORMS, STAGES
from farm.store import artifacts, harnesses, queries
from farm.store.models import HarnessRow

_STAGE_ORDER = {s: i for i, s in enumerate(STAGES)}


def _run_for(s: Session, h: HarnessRow, ref: str | None) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The run to show (``ref``, else the newest with this harness) and the harness's runs."""
    runs = harnesses.harness_runs(s, h.id)
    if ref:
        return queries.run_dict(s, queries.resolve_run(s, ref), with_counts=False), runs
    if not runs:
        return None, runs
    return queries.run_dict(s, queries.resolve_run(s, runs[0]["id"]), with_counts=False), runs


def _text(s: Session, sha: str) -> dict[str, Any]:
    """A module text artifact, verified; a FarmError becomes an inline ``error``."""
    try:
        _, data = artifacts.get(s, sha)
    except FarmError as e:
        return {"sha256": sha, "text": None, "error": str(e)}
    return {"sha256": sha, "text": data.decode("utf-8", "replace"), "error": None}


def _modules(s: Session, rows: list[dict[str, Any]], with_text: bool = True) -> dict[str, dict[str, Any]]:
    """platform -> lowered module sha (+ text) and the census facts that flag it."""
    census = {r["platform"]: r["facts"] or {} for r in rows if r["stage"] == "census"}
    out: dict[str, dict[str, Any]] = {}
    texts: dict[str, dict[str, Any]] = {}
    for r in rows:
        sha = (r["facts"] or {}).get("module_sha256") if r["stage"] == "lower" else None
        if not sha:
            continue
        if with_text and sha not in texts:
            texts[sha] = _text(s, sha)
        facts = census.get(r["platform"], {})
        out[r["platform"]] = {"sha256": sha, "non_stablehlo": list(facts.get("non_stablehlo") or []),
                              "unguaranteed": list(facts.get("unguaranteed") or []),
                              "custom_calls": list(facts.get("custom_calls") or []),
                              **({k: texts[sha][k] for k in ("text", "error")} if with_text else {})}
    return out


def context(fp: str) -> dict[str, Any]:
    shapes = shapes_arg()
    with store().session() as s:
        h = harnesses.harness_by_fingerprint(s, fp)
        run, runs = _run_for(s, h, request.args.get("run"))
        rows = harnesses.harness_results(s, h.id, run["id"]) if run else []
        modules = _modules(s, rows)
        shas = [r["artifact"] for r in rows if r["artifact"]] + [m["sha256"] for m in modules.values()]
        info = harnesses.artifact_info(s, shas)
        history = [x for x in harnesses.harness_history(s, fp) if keeps(x["stage"], shapes)]
    rows.sort(key=lambda r: (_STAGE_ORDER.get(r["stage"], 99), r["platform"]))
    sides = side_by_side(rows)
    rows = [r for r in rows if keeps(r["stage"], shapes)]
    platforms = sorted({r["platform"] for r in rows})
    export = [{"platform": r["platform"], "stage": r["stage"], **info.get(r["artifact"], {"sha256": r["artifact"]})}
              for r in rows if r["artifact"]]
    d = h.definition or {}
    definition = {"name": h.name, "fingerprint": h.fingerprint, "catalog": h.catalog, "family": h.family,
                  "primitive": h.primitive, "group": h.grp, "dtype": h.dtype, "shapes": h.shapes,
                  "params": h.params, "args": d.get("args", []), "compare": d.get("compare"),
                  "devices": d.get("devices"), "limitations": d.get("limitations", [])}
    return {"harness": definition, "run": run, "runs": runs, "shapes": shapes, "platforms": platforms,
            "results": rows, "static_vs_symbolic": sides, "modules": modules, "artifacts": export,
            "history": history_series(history)}


_METRICS = (("compile_s", "compile", "compile_s"), ("execute_s", "execute", "execute_s"),
            ("max_ulp_err", "compare", "max_ulp_err"), ("max_rel_err", "compare", "max_rel_err"))


def history_series(history: list[dict[str, Any]]) -> dict[str, Any]:
    """Plot rows from ``harnesses.harness_history`` (oldest run first): ``runs`` (x order),
    per metric ``{run, series (platform), value}`` rows, and ``status`` rows
    ``{run, row (stage@platform), status}`` for the status heat map."""
    runs = list(dict.fromkeys(h["run"] for h in history))
    out: dict[str, Any] = {"runs": runs}
    for key, stage, metric in _METRICS:
        out[key] = [{"run": h["run"], "series": h["platform"], "value": float(v)} for h in history
                    if h["stage"] == stage and h["status"] in ("ok", "unexpected_pass", "fail")
                    and (v := (h["metrics"] or {}).get(metric)) is not None]
    out["status"] = [{"run": h["run"], "row": f'{h["stage"]}@{h["platform"]}', "status": h["status"]}
                     for h in sorted(history, key=lambda h: _STAGE_ORDER.get(h["stage"], 99))]
    return out


def module_context(fp: str, platform: str) -> dict[str, Any]:
    with store().session() as s:
        h = harnesses.harness_by_fingerprint(s, fp)
        run, _ = _run_for(s, h, request.args.get("run"))
        rows = harnesses.harness_results(s, h.id, run["id"]) if run else []
        modules = _modules(s, rows)
    if platform not in modules:
        raise ArtifactNotFound(f"no lowered module for {h.name} on {platform!r} in run "
                        f"{run['name'] if run else '(none)'} (platforms: {', '.join(sorted(modules)) or 'none'})")
    return {"harness": {"name": h.name, "fingerprint": fp}, "run": run, "platform": platform,
            "platforms": sorted(modules), "module": modules[platform]}


def diff_context(fp: str) -> dict[str, Any]:
    platform = one_of("platform", LOWERING_PLATFORMS, "cpu")
    with store().session() as s:
        h = harnesses.harness_by_fingerprint(s, fp)
        runs = harnesses.harness_runs(s, h.id)
        if not runs:
            raise RunNotFound(f"no run has results for {h.name}")
        head = queries.resolve_run(s, request.args.get("head") or runs[0]["id"])
        base_default = runs[1]["id"] if len(runs) > 1 else runs[0]["id"]
        base = queries.resolve_run(s, request.args.get("base") or base_default)
        sides = {}
        for side, r in (("base", base), ("head", head)):
            m = _modules(s, harnesses.harness_results(s, h.id, r.id)).get(platform)
            sides[side] = {"run": {"id": r.id, "name": r.name}, "sha256": m["sha256"] if m else None,
                           "text": m["text"] if m else None, "error": (m["error"] if m else
                                                                        f"no {platform} module in {r.name}")}
    a, b = sides["base"]["text"] or "", sides["head"]["text"] or ""
    lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(), f"{sides['base']['run']['name']}",
                                      f"{sides['head']['run']['name']}", lineterm="", n=3))
    return {"harness": {"name": h.name, "fingerprint": fp}, "platform": platform, "runs": runs, **sides,
            "identical": sides["base"]["sha256"] == sides["head"]["sha256"] and sides["base"]["sha256"] is not None,
            "diff": lines}


def download(sha: str) -> Response:
    """The verified bytes of one artifact (sha validated: 64 hex digits, else 404)."""
    with store().session() as s:
        row, data = artifacts.get(s, sha)
        kind, meta = row.kind, dict(row.meta or {})
    if kind == "module":
        mime, name = "text/plain; charset=utf-8", f"{sha[:16]}.mlir"
    else:
        mime, name = "application/octet-stream", f"{sha[:16]}.{kind}.bin"
    inline = request.args.get("inline") == "1" and kind == "module"
    resp = Response(data, content_type=mime)
    resp.headers["Content-Disposition"] = f'{"inline" if inline else "attachment"}; filename="{name}"'
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["X-Artifact-Kind"] = kind
    resp.headers["ETag"] = sha
    return resp


def register(app: Flask) -> None:
    twin(app, "/harness/<fp>", "/harness/<fp>.json", "harness", "harness.html", context, params=("run", "shapes"))
    twin(app, "/harness/<fp>/module/<platform>", "/harness/<fp>/module/<platform>.json", "module",
         "module.html", module_context, params=("run",))
    twin(app, "/harness/<fp>/diff", "/harness/<fp>/diff.json", "diff", "diff.html", diff_context,
         params=("platform", "base", "head"))
    app.add_url_rule("/artifacts/<sha>", "artifact", download, methods=["GET"])
