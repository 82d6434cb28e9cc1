"""Status flips between a base and a candidate run, per harness x platform x stage."""
from __future__ import annotations

from collections.abc import Mapping

from farm.analysis.rows import Key, Row
from farm.results import BROKEN, ERRORS, GOOD

BAD = BROKEN  # unexpected_pass is a kind of flip of its own

#: Kinds of flip, worst first; the first four are regressions. ``vanished`` (a result the
#: candidate should have and lacks) comes from ``farm.analysis.gate``, never ``classify``.
KINDS = ("new_error", "vanished", "new_failure", "unexpected_pass", "missing", "changed", "fixed", "new_result")
REGRESSIONS = ("new_error", "vanished", "new_failure", "unexpected_pass")


def classify(base: str | None, cand: str | None) -> str | None:
    """The kind of change from ``base`` to ``cand`` status, or None if nothing changed.

    >>> classify("ok", "fail"), classify("fail", "ok"), classify("expected_fail", "unexpected_pass")
    ('new_failure', 'fixed', 'unexpected_pass')
    """
    if base == cand:
        return None
    if cand is None:
        return "missing"
    if base is None:
        return "new_result"
    if cand == "unexpected_pass":
        return "unexpected_pass"
    if cand in ERRORS and base not in ERRORS:
        return "new_error"
    if cand == "fail" and base not in BAD:
        return "new_failure"
    if base in BAD + ("unexpected_pass",) and cand in GOOD:
        return "fixed"
    return "changed"


def flips(base: Mapping[Key, Row], cand: Mapping[Key, Row], common: set[str]) -> list[dict]:
    """Every status change of a result whose harness (fingerprint) is in both runs."""
    out = []
    for k in sorted(set(base) | set(cand)):
        if k[0] not in common:
            continue
        b, c = base.get(k), cand.get(k)
        kind = classify(b["status"] if b else None, c["status"] if c else None)
        if kind is None:
            continue
        row = c or b
        out.append({"kind": "status", "change": kind, "regression": kind in REGRESSIONS,
                    "harness": row["harness"], "fingerprint": k[0], "primitive": row["primitive"],
                    "dtype": row["dtype"], "platform": k[1], "stage": k[2],
                    "base": b["status"] if b else None, "candidate": c["status"] if c else None,
                    "error": (c or {}).get("error") if kind != "fixed" else (b or {}).get("error")})
    return out
