"""The api catalog's census data for another jax version, from a measured run.

    farm sweep --catalog api --db sqlite:///api.db        # in that jax's venv
    farm show latest --format json --db sqlite:///api.db > run.json
    python scripts/census_table.py run.json               # in the same venv

For each api label (``farm.catalog.api.declare``'s), the keys that must be added over the
label's ``CHLO`` table (measured on ``CHLO_MEASURED``) for every harness's census to read what
the run's census found on its jax: the ``chlo_on`` entry of that version, as
``{**CHLO, **<these>}``. The most common finding of a function is its bare key, the rest
``/dtype`` or ``/dtype@case`` keys; every harness's lookup is checked against the run before
anything is printed. Notes in parentheses (``(no abort)``) are not measured: copy them by hand.
"""
from __future__ import annotations

import collections
import json
import re
import sys
from typing import Any

from farm.catalog import api, registry

PLATFORMS = ("cpu", "cuda", "rocm", "tpu")
_OP = re.compile(r"chlo\.([a-z_0-9]+)")


def measured(run: dict[str, Any]) -> dict[str, dict[str, frozenset[str]]]:
    """harness name -> platform -> the chlo ops its census found (failed or expected)."""
    out: dict[str, dict[str, frozenset[str]]] = {}
    for h in run["harnesses"]:
        ops: dict[str, frozenset[str]] = {}
        for plat, stages in h["platforms"].items():
            r = stages.get("census")
            if r and r["status"] in ("fail", "expected_fail") and "plugin boundary" in (r["error"] or ""):
                ops[plat] = frozenset(_OP.findall(r["error"]))
        out[h["harness"]] = ops
    return out


def text(ops: dict[str, frozenset[str]]) -> str:
    """Platform -> ops as a census value: platforms with the same ops on one part."""
    by: dict[frozenset[str], list[str]] = collections.defaultdict(list)
    for p in PLATFORMS:
        if ops.get(p):
            by[ops[p]].append(p)
    return "; ".join(f"{','.join(ps)}: {' '.join(sorted(o))}" for o, ps in by.items())


def where(h: Any) -> tuple[str, str, str, str]:
    """(function, spec tag, dtype, case) as ``census_text`` looks a harness up."""
    params = dict(h.key.params)
    case = "edge" if "edge" in params else params.get("case", "main")
    return h.primitive, params.get("v", ""), h.dtype, case


def overlay(label: str, found: dict[tuple[str, str, str, str], dict[str, frozenset[str]]]) -> dict[str, str]:
    """The keys over ``label``'s table that make every lookup read ``found``."""
    base, _ = api.CENSUS[label]
    extra: dict[str, str] = {}

    def wrong() -> list[tuple[str, str, str, str]]:
        merged = {**base, **extra}
        return [w for w, ops in found.items()
                if api.census_ops(api.census_text(*w, merged)) != ops]

    bad = wrong()
    for name, tag in sorted({(w[0], w[1]) for w in bad}):
        key = f"{name}:{tag}" if tag else name
        mine = {w: ops for w, ops in found.items() if w[:2] == (name, tag)}
        common = collections.Counter(text(o) for o in mine.values()).most_common(1)[0][0]
        extra[key] = common
        for w in wrong():
            if w[:2] != (name, tag):
                continue
            same_dtype = {text(o) for v, o in mine.items() if v[2] == w[2]}
            extra[f"{key}/{w[2]}" if len(same_dtype) == 1 else f"{key}/{w[2]}@{w[3]}"] = text(found[w])
        for w in wrong():
            if w[:2] == (name, tag):
                extra[f"{key}/{w[2]}@{w[3]}"] = text(found[w])
    left = wrong()
    assert not left, f"{label}: lookups still differ from the run: {left[:5]}"
    return extra


def main(path: str) -> None:
    run = json.load(open(path))
    ops = measured(run)
    by_label: dict[str, dict[tuple[str, str, str, str], dict[str, frozenset[str]]]] = collections.defaultdict(dict)
    for h in registry.load("api"):
        if h.name not in ops:
            continue
        w = where(h)
        seen = by_label[h.family].setdefault(w, ops[h.name])
        assert seen == ops[h.name], f"{h.name}: one lookup, two censuses: {seen} and {ops[h.name]}"
    for label in sorted(by_label):
        extra = overlay(label, by_label[label])
        if extra:
            print(f"# {label}")
            print("{" + ",\n ".join(f"{k!r}: {v!r}" for k, v in sorted(extra.items())) + "}")


if __name__ == "__main__":
    main(sys.argv[1])
