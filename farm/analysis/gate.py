"""The harness-level regression gate: the worst status of each harness x platform, and the
results that vanished between a base and a candidate run.

``farm.analysis.flips`` compares results stage by stage, where both runs have the stage.
That misses what happens to a harness as a whole:

- a crash or timeout of the worker is one record on platform ``"any"`` (stage
  ``execute``) that replaces every other record of the harness: stage by stage it is a
  ``new_result`` and the rest are ``missing``, neither a regression;
- a platform, or a whole harness, that the candidate should have run and did not.

Here each harness x platform is summarised by its worst record (``SEVERITY`` of
``farm.stages.record``), and a candidate's platform-``"any"`` record that stopped the
harness (any status but ``ok``/``unexpected_pass``: a crash, a timeout, a worker error, a
trace failure, not runnable here) stands for every platform the harness had in the base
run. A harness x platform whose worst status goes from not ``BAD`` to ``BAD`` is a
regression, unless a stage-by-stage regression already names that harness x platform
(``covered``), so nothing is reported twice.

What vanished, and what does not count (the decision this gate makes):

- A platform the harness had in the base run and lacks in the candidate (which has the
  harness) vanished, a regression, unless the candidate run was not asked to lower for
  it: both runs list their ``platforms`` and the base's has it, the candidate's not
  (``skipped_platforms``; such a platform is not compared at all).
- A harness of the base run absent from the candidate by fingerprint and by name (a
  changed fingerprint under the same name is *redefined*, not compared) vanished when
  the candidate should have run it, and was *removed* otherwise. Whether it should have
  is what the candidate's catalog and filters select now: ``selection`` (fingerprint ->
  name, computed outside this pure module from the catalog; a harness matches by
  fingerprint or by name). A harness that is in neither the candidate run nor its
  selection was removed from the catalog (or filtered out) and does not count. Without
  a selection (a run kind whose filters do not name a catalog selection), the
  candidate's own count decides: an interrupted or failed run, or one with fewer
  outcomes (``done``) than harnesses selected (``total``), did not run everything it
  selected, so each absent harness counts; a complete one selected none of them. A
  candidate still ``running`` has not run everything yet: its absent harnesses are
  ``pending``, not regressions.

Pure: rows and run dicts in, findings out; no I/O.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from farm.analysis.flips import classify
from farm.analysis.rows import Row
from farm.results import BAD, PASSED, SEVERITY

#: The platform of records that are about the whole harness (trace, a crashed worker).
ANY = "any"
#: ``platform`` / ``stage`` of a finding about every platform or every stage.
ALL = "*"
#: Statuses of a platform-``"any"`` record after which the harness goes on per platform.
_PROCEEDS = PASSED

Cells = dict[str, dict[str, Row]]  # fingerprint -> platform -> the worst row


def _rank(row: Row) -> tuple[int, str]:
    return SEVERITY[row["status"]], row["stage"]  # the stage only breaks ties, for a stable answer


def worst_cells(rows: Sequence[Row]) -> Cells:
    """The worst row of each harness (fingerprint) x platform.

    >>> c = worst_cells([{"fingerprint": "f", "platform": "cpu", "stage": "lower", "status": "ok"},
    ...                  {"fingerprint": "f", "platform": "cpu", "stage": "compare", "status": "fail"}])
    >>> c["f"]["cpu"]["stage"]
    'compare'
    """
    out: Cells = defaultdict(dict)
    for r in rows:
        cur = out[r["fingerprint"]].get(r["platform"])
        if cur is None or _rank(r) > _rank(cur):
            out[r["fingerprint"]][r["platform"]] = r
    return dict(out)


def platform_worst(cells: Mapping[str, Row], platform: str) -> Row | None:
    """The worst row of one harness on ``platform``, its platform-``"any"`` records
    included; a platform it has no record for takes a stopping ``"any"`` record's status
    (see the module docstring). None: the platform has no result."""
    own, whole = cells.get(platform), cells.get(ANY) if platform != ANY else None
    if own is None:
        return whole if whole is not None and whole["status"] not in _PROCEEDS else None
    if whole is not None and _rank(whole) > _rank(own):
        return whole
    return own


def skipped_platforms(base_run: Mapping[str, Any], cand_run: Mapping[str, Any]) -> list[str]:
    """Platforms the base run lowered for and the candidate run was not asked to."""
    bp, cp = base_run.get("platforms") or [], cand_run.get("platforms") or []
    return sorted(set(bp) - set(cp)) if bp and cp else []


def _incomplete(run: Mapping[str, Any]) -> bool:
    done, total = run.get("done"), run.get("total")
    return run.get("status") in ("interrupted", "failed") or (
        isinstance(done, int) and isinstance(total, int) and done < total)


def _at(row: Row | None) -> str | None:
    return f"{row['platform']}/{row['stage']}" if row is not None else None


def _finding(row: Row, change: str, platform: str, base: Row, cand: Row | None, scope: str) -> dict[str, Any]:
    return {"kind": "status", "change": change, "regression": True, "scope": scope,
            "harness": row["harness"], "fingerprint": row["fingerprint"], "primitive": row["primitive"],
            "dtype": row["dtype"], "platform": platform, "stage": ALL,
            "base": base["status"], "candidate": cand["status"] if cand is not None else None,
            "base_at": _at(base), "candidate_at": _at(cand), "error": (cand or {}).get("error")}


def flaky_cells(runs: Sequence[tuple[Mapping[str, Any], Sequence[Row]]], pairs: Collection[tuple[str, str]],
                **kw: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """Which (fingerprint, platform) ``pairs`` are flaky over ``runs`` by their worst status
    (``platform_worst``, so a harness that crashes every other run is flaky although its
    crash record and its other records never share a stage); ``kw`` as in
    ``farm.analysis.flaky.flaky``. Reads only the rows of the pairs' harnesses."""
    from farm.analysis.flaky import flaky

    if not pairs:
        return {}
    wanted = {fp for fp, _ in pairs}
    series = []
    for run, rows in runs:
        cells = worst_cells([r for r in rows if r["fingerprint"] in wanted])
        worst = [(fp, p, platform_worst(cells[fp], p)) for fp, p in pairs if fp in cells]
        series.append((run, [{"fingerprint": fp, "platform": p, "stage": ALL, "status": w["status"]}
                             for fp, p, w in worst if w is not None]))
    return {(fp, p): v for (fp, p, _), v in flaky(series, **kw).items()}


def _absent_fate(fp: str, name: str, platforms: Sequence[str], cand_run: Mapping[str, Any],
                 selection: Mapping[str, str] | None, selected_names: Collection[str]) -> str:
    """What a base harness absent from the candidate (by fingerprint and name) is:
    ``"removed"`` when the candidate should not have run it (or no compared platform is
    left), ``"pending"`` while the candidate still runs, else ``"vanished"``, a regression
    (see the module docstring); ``selected_names``: the names ``selection`` holds."""
    expected = (fp in selection or name in selected_names) if selection is not None \
        else _incomplete(cand_run)
    if not expected or not platforms:
        return "removed"
    return "pending" if cand_run.get("status") == "running" else "vanished"


def _platform_findings(fp: str, bc: Mapping[str, Row], cc: Mapping[str, Row], platforms: Sequence[str],
                       covered: Collection[tuple[str, str]]) -> list[dict[str, Any]]:
    """The regressions of one harness both runs have, platform by platform: a platform it
    lost, or one whose worst status turned ``BAD`` where no stage-by-stage regression
    already says so."""
    findings: list[dict[str, Any]] = []
    for p in platforms:
        b, c = platform_worst(bc, p), platform_worst(cc, p)
        assert b is not None  # p is one of the base's platforms
        if c is None:
            findings.append(_finding(b, "vanished", p, b, None, "platform"))
        elif b["status"] not in BAD and c["status"] in BAD and (fp, p) not in covered:
            findings.append(_finding(b, classify(b["status"], c["status"]) or "changed", p, b, c, "platform"))
    return findings


def gate(base_run: Mapping[str, Any], base_rows: Sequence[Row], cand_run: Mapping[str, Any],
         cand_rows: Sequence[Row], *, selection: Mapping[str, str] | None = None,
         covered: Collection[tuple[str, str]] = ()) -> dict[str, Any]:
    """Harness x platform regressions and vanished results of ``cand`` against ``base``.

    Args:
      base_run, cand_run: run dicts; reads ``platforms`` (both), and of the candidate
        ``status``, ``done`` and ``total`` (see the module docstring).
      base_rows, cand_rows: result rows (``harness``, ``fingerprint``, ``primitive``,
        ``dtype``, ``platform``, ``stage``, ``status``, ``error``).
      selection: fingerprint -> harness name of what the candidate's catalog and filters
        select, or None when unknown.
      covered: (fingerprint, platform) pairs a stage-by-stage regression already names.

    Returns:
      ``{"findings": [...], "vanished": [name], "pending": [name], "removed": [name],
      "skipped_platforms": [platform]}``. Findings are status findings (every one a
      regression) with ``stage`` ``"*"`` and ``scope`` ``"platform"`` (one harness x
      platform: ``change`` new_error | new_failure | unexpected_pass | vanished) or
      ``"harness"`` (the whole harness vanished: ``platform`` ``"*"``, ``platforms`` the
      base run's); ``base``/``candidate`` are the worst statuses (candidate None:
      vanished) and ``base_at``/``candidate_at`` the "platform/stage" of those records.

    >>> row = lambda p, s, st: {"harness": "h", "fingerprint": "f", "primitive": "sin", "dtype": "float32",
    ...                         "platform": p, "stage": s, "status": st, "error": None}
    >>> base = [row("any", "trace", "ok"), row("cpu", "execute", "ok")]
    >>> found = gate({}, base, {}, [row("any", "execute", "crashed")])["findings"]
    >>> [(f["platform"], f["base"], f["candidate"]) for f in found]
    [('any', 'ok', 'crashed'), ('cpu', 'ok', 'crashed')]
    """
    bcells, ccells = worst_cells(base_rows), worst_cells(cand_rows)
    cand_names = {r["harness"] for r in cand_rows}
    selected_names = set(selection.values()) if selection is not None else set()
    skipped = skipped_platforms(base_run, cand_run)
    covered = set(covered)
    findings: list[dict[str, Any]] = []
    absent: dict[str, list[str]] = {"vanished": [], "pending": [], "removed": []}
    for fp in sorted(bcells):
        bc = bcells[fp]
        platforms = sorted(p for p in bc if p not in skipped)
        if fp in ccells:
            findings += _platform_findings(fp, bc, ccells[fp], platforms, covered)
            continue
        some = next(iter(bc.values()))
        if some["harness"] in cand_names:
            continue  # redefined: the same name under another fingerprint, not compared
        fate = _absent_fate(fp, some["harness"], platforms, cand_run, selection, selected_names)
        absent[fate].append(some["harness"])
        if fate == "vanished":
            base = max(bc.values(), key=_rank)
            findings.append(_finding(some, "vanished", ALL, base, None, "harness") | {"platforms": platforms})
    return {"findings": findings, "vanished": sorted(absent["vanished"]), "pending": sorted(absent["pending"]),
            "removed": sorted(absent["removed"]), "skipped_platforms": skipped}
