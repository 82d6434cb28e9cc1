"""The primitive × target support matrix of Pallas kernels (family ``pallas_prims``, docs/pallas.md):
which lax primitive, inside a kernel body, lowers for which Pallas backend and TPU generation,
and whether the interpret-mode kernel computes it right.

Rows are primitives (× dtype unless collapsed); columns are ``INTERPRET`` (the kernel under JAX's
HLO interpreter on the CPU against the float64 reference: the worst of its trace, cpu lowering,
compile, execute and compare records) and each ``pallas_export`` target (every TPU generation,
cuda:mosaic_gpu, cuda:triton, rocm:triton, rocm:mosaic_gpu). A cell counts its harnesses' records
by status: ``ok``, ``expected_fail`` (with each limitation's reason), ``fail``, ``error``,
``skipped`` (with the reason: a target this jax has no lowering for)...

Pure functions over the store's plain result rows (``farm.store.queries.results``).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from farm.analysis.pallas import _target_order
from farm.results import SEVERITY, worst_status

#: The column of the interpret-mode numbers.
INTERPRET = "interpret"
#: The records that make the interpret column: the kernel traced, lowered for and run on the CPU.
_INTERPRET_STAGES = {("trace", "any"), ("trace", "cpu"), ("lower", "cpu"), ("compile", "cpu"), ("execute", "cpu"),
                     ("compare", "cpu")}
#: The stages a matrix reads (what a face asks the store for).
STAGES = ("pallas_export", *sorted({stage for stage, _ in _INTERPRET_STAGES}))
#: The family whose harnesses are the matrix's rows by default.
FAMILY = "pallas_prims"
#: A cell's status as one short word (the md face).
SHORT = {"ok": "ok", "expected_fail": "xf", "fail": "FAIL", "error": "ERR", "skipped": "skip",
         "unexpected_pass": "UP", "not_runnable_here": "n/r", "crashed": "CRASH", "timeout": "TIME"}


def _column(r: Mapping[str, Any]) -> str | None:
    if r["stage"] == "pallas_export":
        return r["platform"]
    if (r["stage"], r["platform"]) in _INTERPRET_STAGES:
        return INTERPRET
    return None


def _why(r: Mapping[str, Any]) -> str | None:
    """What explains a record that is not ok: the limitation's reason, else JAX's words."""
    facts = r.get("facts") or {}
    if r["status"] == "expected_fail" and facts.get("limitation"):
        return str(facts["limitation"])
    if r["status"] == "ok":
        return None
    text = f"{r.get('error_type') or ''}: {r.get('error') or ''}".strip(": ")
    return text[:240] or None


def matrix(rows: Iterable[Mapping[str, Any]], *, by: str = "dtype", family: str | None = FAMILY) -> dict[str, Any]:
    """The matrix of one run's rows. ``by``: "dtype" (a row per primitive and dtype) or
    "primitive" (dtypes collapsed). ``family``: only harnesses of this family (None: all).

    {"columns": [INTERPRET, targets...], "rows": [{"primitive", "dtype" (None when collapsed),
    "harnesses", "cells": {column: {"worst", "counts": {status: n}, "why": {reason: n}}}}],
    "totals": {column: {status: n}}, "reasons": {reason: n}}. A cell counts records (one per
    harness and target; the interpret cell one per harness, its worst)."""
    if by not in ("dtype", "primitive"):
        raise ValueError(f"by must be 'dtype' or 'primitive', not {by!r}")
    interp: dict[str, list[Mapping[str, Any]]] = defaultdict(list)  # harness -> its interpret records
    cells: dict[tuple[str, str | None], dict[str, dict[str, Counter]]] = defaultdict(dict)
    harnesses: dict[tuple[str, str | None], set[str]] = defaultdict(set)
    targets: set[str] = set()
    key_of: dict[str, tuple[str, str | None]] = {}
    for r in rows:
        if family is not None and r.get("family") != family:
            continue
        column = _column(r)
        if column is None:
            continue
        key = (r["primitive"], r["dtype"] if by == "dtype" else None)
        key_of[r["harness"]] = key
        harnesses[key].add(r["harness"])
        if column == INTERPRET:
            interp[r["harness"]].append(r)
            continue
        targets.add(column)
        _add(cells[key], column, r)
    for harness, recs in interp.items():  # the harness's worst interpret-mode record
        worst = max(recs, key=lambda r: SEVERITY.get(r["status"], 0))
        _add(cells[key_of[harness]], INTERPRET, worst)
    columns = [INTERPRET, *sorted(targets, key=_target_order)]
    out_rows = []
    totals: dict[str, Counter] = {c: Counter() for c in columns}
    reasons: Counter = Counter()
    for key in sorted(cells):
        row_cells = {}
        for column, cell in cells[key].items():
            row_cells[column] = {"worst": worst_status(cell["counts"]), "counts": dict(cell["counts"]),
                                 "why": dict(cell["why"])}
            totals[column].update(cell["counts"])
            reasons.update(cell["why"])
        out_rows.append({"primitive": key[0], "dtype": key[1], "harnesses": len(harnesses[key]), "cells": row_cells})
    return {"columns": columns, "by": by, "rows": out_rows, "totals": {c: dict(n) for c, n in totals.items()},
            "reasons": dict(reasons.most_common())}


def _add(cell_of: dict[str, dict[str, Counter]], column: str, r: Mapping[str, Any]) -> None:
    cell = cell_of.setdefault(column, {"counts": Counter(), "why": Counter()})
    cell["counts"][r["status"]] += 1
    why = _why(r)
    if why:
        cell["why"][why] += 1


def row_label(row: Mapping[str, Any]) -> str:
    return row["primitive"] if row.get("dtype") is None else f"{row['primitive']} {row['dtype']}"


def diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """Two matrices (two runs: two jax versions, two dates) cell by cell: {"columns_only_before",
    "columns_only_after", "rows_only_before", "rows_only_after", "changed": [{"row", "column",
    "before", "after"}]} where a cell is its worst status and counts; a cell present on one side
    only is changed too (before or after None)."""
    def index(m: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        return {row_label(r): r for r in m["rows"]}

    a, b = index(before), index(after)
    cols_a, cols_b = list(before["columns"]), list(after["columns"])
    changed = []
    for label in sorted(set(a) & set(b)):
        for column in [c for c in cols_a if c in cols_b]:
            ca, cb = a[label]["cells"].get(column), b[label]["cells"].get(column)
            if _brief(ca) != _brief(cb):
                changed.append({"row": label, "column": column, "before": _brief(ca), "after": _brief(cb)})
    return {"columns_only_before": [c for c in cols_a if c not in cols_b],
            "columns_only_after": [c for c in cols_b if c not in cols_a],
            "rows_only_before": sorted(set(a) - set(b)), "rows_only_after": sorted(set(b) - set(a)),
            "changed": changed}


def _brief(cell: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if cell is None else {"worst": cell["worst"], "counts": dict(sorted(cell["counts"].items()))}


def cell_text(cell: Mapping[str, Any] | None) -> str:
    """A cell in a few characters: its status where all its records agree ("ok", "xf"), else
    each status with its count ("ok 2 xf 1"); "." where the kernel was not lowered for it."""
    if not cell:
        return "."
    counts = cell["counts"]
    if len(counts) == 1:
        return SHORT.get(next(iter(counts)), next(iter(counts)))
    order = sorted(counts, key=lambda s: SEVERITY.get(s, 0))
    return " ".join(f"{SHORT.get(s, s)} {counts[s]}" for s in order)


def markdown(m: Mapping[str, Any], *, merge_tpu: bool = True) -> str:
    """The matrix as a Markdown table and its reasons as numbered notes. ``merge_tpu``: TPU
    generations whose column is the same in every row are one column ("tpu v2…8i")."""
    columns = list(m["columns"])
    groups = _merged(m, columns) if merge_tpu else [[c] for c in columns]
    notes: dict[str, int] = {}
    head = ["primitive" + (" dtype" if m.get("by") == "dtype" else ""), "n"] + [_group_name(g) for g in groups]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in m["rows"]:
        out = [row_label(row), str(row["harnesses"])]
        for g in groups:
            cell = row["cells"].get(g[0])
            text = cell_text(cell)
            refs = sorted({notes.setdefault(w, len(notes) + 1) for w in (cell or {}).get("why", {})})
            out.append(text + ("" if not refs else " [" + ",".join(map(str, refs)) + "]"))
        lines.append("| " + " | ".join(out) + " |")
    totals = ["**total records**", str(sum(r["harnesses"] for r in m["rows"]))]
    for g in groups:
        counts: Counter = Counter()
        for c in g:
            counts.update(m["totals"].get(c, {}))
        totals.append(" ".join(f"{SHORT.get(s, s)} {n}" for s, n in sorted(counts.items(), key=lambda x: SEVERITY.get(x[0], 0))))
    lines.append("| " + " | ".join(totals) + " |")
    if notes:
        lines.append("")
        lines += [f"[{n}] {w}" for w, n in sorted(notes.items(), key=lambda x: x[1])]
    return "\n".join(lines) + "\n"


def _merged(m: Mapping[str, Any], columns: list[str]) -> list[list[str]]:
    """Consecutive TPU columns merged while every row's cell is the same in them."""
    groups: list[list[str]] = []
    for c in columns:
        if (groups and c.startswith("tpu:") and groups[-1][0].startswith("tpu:")
                and all(_brief(r["cells"].get(c)) == _brief(r["cells"].get(groups[-1][0]))
                        and (r["cells"].get(c) or {}).get("why") == (r["cells"].get(groups[-1][0]) or {}).get("why")
                        for r in m["rows"])):
            groups[-1].append(c)
        else:
            groups.append([c])
    return groups


def _group_name(g: list[str]) -> str:
    if len(g) == 1:
        return g[0]
    return f"tpu {g[0].partition(':')[2]}…{g[-1].partition(':')[2]} ({len(g)})"


def diff_markdown(d: Mapping[str, Any], before: str, after: str) -> str:
    lines = [f"matrix {before} → {after}: {len(d['changed'])} cells changed"]
    for k in ("columns_only_before", "columns_only_after", "rows_only_before", "rows_only_after"):
        if d[k]:
            lines.append(f"{k.replace('_', ' ')}: {', '.join(d[k])}")
    if d["changed"]:
        lines += ["", "| row | column | before | after |", "|---|---|---|---|"]
        for c in d["changed"]:
            lines.append(f"| {c['row']} | {c['column']} | {cell_text(c['before'])} | {cell_text(c['after'])} |")
    return "\n".join(lines) + "\n"
