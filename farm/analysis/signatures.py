"""Failure signatures: what one failing record says, without the parts that vary by accident.

A red cell names a harness, a platform and a stage; a *problem* is the cause behind many
such cells. ``signature(record)`` keeps what identifies a cause and drops what does not:

- the **stage** and **status** (``fail``, ``error``, ``crashed``, ``timeout``,
  ``unexpected_pass``: ``farm.results.BAD``; every other status has no signature);
- the **primitive(s)** of the harness (``primitives=``, or the row's ``primitive``);
- the **error type**, kept as it is, and the **error normalized**: numbers, shapes, dtype
  names, hex addresses, hashes and ids, file paths and quoted names are replaced by
  placeholders, so ``float32[3,4]`` and ``bfloat16[8]`` read alike (``<dtype>[…]``): one
  cause across the dtypes of a primitive is one cluster, which lists its dtypes;
- for numeric disagreements (``error_type == "Mismatch"``, an invariant's residual), the
  **class** of the disagreement (``numeric_class``): NaN where a finite value is expected,
  a wrong infinity, a wrong sign, a flushed subnormal, or else the ULP band; with how many
  elements: one, a few, most or all.

The platform is deliberately *not* part of the key: one cause that fails on cpu, cuda,
rocm and tpu alike is one cluster that lists those platforms (``farm.analysis.clusters``);
an error whose text names its platform ("... for platform tpu") keeps that word and stays
its own signature.

Records stored before the compare verdict recorded ``facts["disagreement"]`` lack the
counts; their class is taken from the metrics (max ULP error, mismatches) and the error
line ("3 of 64 elements differ") as far as they go, and is less precise, never wrong.

Pure: plain mappings in, frozen values out. ``Signature.key`` is stable across processes,
machines and versions of Python (sha256 of the canonical fields), the identity of a
cluster in the database (acknowledgements) and in reports.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from farm.results import BAD, QUIET

#: Placeholders the normalized error uses.
NUM, SHAPE, HEX, PATH, NAME, DTYPE = "N", "[…]", "0x…", "<path>", "'…'", "<dtype>"
#: Statuses without a signature: nothing is wrong, or the failure was expected.
NO_SIGNATURE = QUIET
#: How long a normalized error may be (the rest rarely tells causes apart).
MAX_MESSAGE = 240
#: ULP bands of a numeric disagreement, (upper bound in ULPs, label): just past the tolerance
#: (rounding), a precision bug (log1p off by 113 ULP), a lost digit or more, a wrong value.
#: Coarse on purpose: one cause errs by different amounts on different inputs.
ULP_BANDS = ((16.0, "16"), (1024.0, "1k"), (1048576.0, "1M"))
#: Error types that are numeric disagreements rather than exceptions.
NUMERIC_ERROR_TYPES = ("Mismatch",)


@dataclass(frozen=True, slots=True)
class Signature:
    """What identifies the cause of a failing record (see the module docstring).

    ``numeric``: the class of a numeric disagreement ("nan/few", "ulp≤1k/all", ...) or "";
    ``scope``: where a symbolic-shape failure lives ("symbolic-only", "symbolic-only on tpu":
    ``farm.analysis.shapes.scopes``) or "": a symbolic-only failure is never one cluster with
    a failure its static stages share."""

    stage: str
    status: str
    primitives: tuple[str, ...]
    error_type: str
    message: str
    numeric: str = ""
    scope: str = ""

    @property
    def key(self) -> str:
        """12 hex digits of the sha256 of the canonical fields: the cluster's identity."""
        fields = [self.stage, self.status, list(self.primitives), self.error_type, self.message, self.numeric]
        if self.scope:  # only then: the keys of signatures without one (acknowledgements) stay what they were
            fields.append(self.scope)
        text = json.dumps(fields, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def cause_key(self) -> str:
        """The key without the primitives: one error (a deserialization break, a worker
        abort) that several primitives' clusters share, which ``farm triage`` rolls up."""
        return Signature(self.stage, self.status, (), self.error_type, self.message, self.numeric, self.scope).key

    def describe(self) -> str:
        """One line for people: ``compare fail [log1p] Mismatch (ulp≤1k/all): output N: ...``."""
        prims = ",".join(self.primitives) or "?"
        kind = f" ({self.numeric})" if self.numeric else ""
        etype = f" {self.error_type}" if self.error_type else ""
        msg = f": {self.message}" if self.message else ""
        scope = f" <{self.scope}>" if self.scope else ""
        return f"{self.stage} {self.status} [{prims}]{scope}{etype}{kind}{msg}"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "primitives": list(self.primitives), "key": self.key}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Signature":
        return cls(d["stage"], d["status"], tuple(d.get("primitives") or ()), d.get("error_type") or "",
                   d.get("message") or "", d.get("numeric") or "", d.get("scope") or "")


def signature(record: Mapping[str, Any], *, primitives: Iterable[str] | None = None,
              expected: bool = False, scope: str = "") -> Signature | None:
    """The signature of one record (a ``Record.to_dict()`` or a result row of
    ``farm.store.queries.results``), or None for a record with nothing wrong (ok, skipped,
    expected_fail, not_runnable_here).

    ``primitives``: the harness's primitive(s); default: the record's ``primitives`` or
    ``primitive`` field. ``expected``: also sign ``expected_fail`` records (the known
    failures a harness's ``Limitation`` declares), to see them as clusters too. ``scope``:
    a symbolic failure's (``farm.analysis.shapes.scopes``: it depends on the harness's other
    records, which one record does not hold).

    >>> s = signature({"stage": "compare", "platform": "cpu", "status": "fail", "error_type": "Mismatch",
    ...                "error": "output 0: 3 of 64 elements differ from the float64 reference",
    ...                "metrics": {"max_ulp_err": 113.0, "mismatches": 3.0}}, primitives=["log1p"])
    >>> s.describe()
    'compare fail [log1p] Mismatch (ulp≤1k/few): output N: N of N elements differ from the <dtype> reference'
    >>> signature({"stage": "compare", "platform": "cpu", "status": "ok"}) is None
    True
    """
    status = record.get("status")
    if status not in BAD and not (expected and status == "expected_fail"):
        return None
    if primitives is None:
        primitives = record.get("primitives") or ([record["primitive"]] if record.get("primitive") else [])
    prims = tuple(sorted({str(p) for p in primitives}))
    etype = str(record.get("error_type") or "")
    return Signature(str(record.get("stage") or ""), str(status), prims, etype, normalize(record.get("error")),
                     numeric_class(record), scope)


# --------------------------------------------------------------------------- the error text
_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), r) for p, r in (
    (r"(?:[A-Za-z]:)?(?:/[\w.@+\-]+){2,}/?(?::\d+)?", PATH),            # /a/b/c.py:12
    (r"\b[\w\-]+\.(?:py|so|cc|h|mlir|json|gz|txt)(?::\d+)?\b", PATH),    # file.py:12
    (r"\b0x[0-9a-fA-F]+\b", HEX),                                        # addresses
    (r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b", HEX),         # hashes, ids
    (r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", HEX),
    (r"tensor<[^<>]*>", "tensor<…>"),                                    # tensor<3x4xf32>
    (r"\b(?:float8_\w+|bfloat16|float(?:16|32|64)|u?int(?:4|8|16|32|64)|complex(?:64|128)|bool_?)\b", DTYPE),
    (r"\b(?:bf16|f16|f32|f64|[su](?:4|8|16|32|64)|i(?:1|4|8|16|32|64)|ui(?:4|8|16|32|64)|c64|c128|pred)"
     r"(?=\[|\b)", DTYPE),                                              # f32[3], i1, pred
    (r"(<dtype>)\s*\[[\d,\s]*\]", r"\1" + SHAPE),                          # <dtype>[3,4]
    (r"(?<![\w\]])\((?:\s*-?\d+\s*,)+\s*(?:-?\d+\s*)?\)", "(…)"),        # (3, 4), (3,)
    (r"(?<![\w\]])\[(?:\s*-?\d+\s*,)*\s*-?\d+\s*\]", SHAPE),             # [3, 4]
    (r"\b\d+(?:x\d+)+(?:x[a-z]+\d*)?\b", "…x…"),                         # 3x4, 3x4xf32
    (r"'[^'\s]*\d[^'\s]*'", NAME),                                       # 'jit_f_3'
    (r"%[\w.#]+", "%…"),                                                 # %arg0, %0
    (r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?\b", NUM),            # 12, 1.5e-3
    (r"(?<![\w.])[-+]?(?:inf|nan)\b", NUM),
))


def normalize(error: Any) -> str:
    """The first line of an error with what varies by accident replaced by placeholders.

    >>> normalize("Cannot reshape f32[3,4] at 0x7f3a2b1c to (12, 1): see /usr/lib/x.py:12")
    'Cannot reshape <dtype>[…] at 0x… to (…): see <path>'
    >>> normalize("output 0 is float32[3], tracing promised float64[3]")
    'output N is <dtype>[…], tracing promised <dtype>[…]'
    """
    return _normalize(str(error)) if error else ""


@functools.lru_cache(maxsize=65536)
def _normalize(error: str) -> str:
    """``normalize`` of a string, memoized: the failing rows of a run repeat few texts."""
    text = error.strip().splitlines()[0] if error.strip() else ""
    for pattern, repl in _RULES:
        text = pattern.sub(repl, text)
    text = re.sub(r"\s+", " ", text).strip()
    return text[:MAX_MESSAGE]


# --------------------------------------------------------------------------- numeric classes
_OF = re.compile(r"\b(\d+) of (\d+) elements\b")


def numeric_class(record: Mapping[str, Any]) -> str:
    """The class of a numeric disagreement, "" for a record that is not one.

    ``kind/extent``: kind is ``nan`` (NaN where a finite value is expected), ``finite``
    (a finite value where NaN is expected), ``inf`` (a wrong infinity, or one where a
    finite value is expected), ``sign`` (the opposite sign, a zero's included),
    ``flushed`` (a subnormal read as zero), ``exact`` (integers/bools differ),
    ``invariant`` (a non-unique result's residual), or ``ulp≤B`` / ``ulp>B`` (the ULP band
    of the largest error); extent is ``one``, ``few`` (at most 10%), ``most`` or ``all``
    elements, or missing where the record does not say.

    >>> numeric_class({"status": "fail", "error_type": "Mismatch", "metrics": {"mismatches": 4.0},
    ...                "facts": {"disagreement": {"elements": 4, "bad": 4, "nan": 4}}})
    'nan/all'
    """
    if record.get("status") not in ("fail", "expected_fail"):
        return ""
    metrics = record.get("metrics") or {}
    facts = record.get("facts") or {}
    etype = record.get("error_type") or ""
    if etype not in NUMERIC_ERROR_TYPES:
        if etype or "invariant_err" not in metrics:
            return ""
    d = facts.get("disagreement") or {}
    if record.get("stage") == "xhost":  # three comparisons: the class of the one the error names
        metrics, d = _xhost_comparison(str(record.get("error") or ""), metrics, facts)
    bad = _num(d.get("bad"))
    if bad is None:
        bad = _num(metrics.get("mismatches"))
    elements = _num(d.get("elements"))
    m = _OF.search(str(record.get("error") or ""))
    if m and (elements is None or bad is None):
        bad = float(m.group(1)) if bad is None else bad
        elements = float(m.group(2))
    kind = _kind(d, metrics, facts)
    if kind == "nonfinite" and str(record.get("dtype") or "").startswith(("int", "uint", "bool")):
        kind = "exact"  # an older record of an integer harness: compared exactly, its ULP error "inf"
    if not kind:
        return ""
    extent = _extent(bad, elements)
    return f"{kind}/{extent}" if extent else kind


_XHOST = {"vs reference": "reference", "vs cpu host": "cpu_host", "vs native": "native"}


def _xhost_comparison(error: str, metrics: Mapping[str, Any], facts: Mapping[str, Any]
                      ) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """An xhost record's metrics and counts of the comparison its error line names
    (``vs reference: ...``; metrics ``reference_max_ulp_err``, facts ``reference_disagreement``)."""
    for said, label in _XHOST.items():
        if error.startswith(said):
            n = len(label) + 1
            return ({k[n:]: v for k, v in metrics.items() if k.startswith(label + "_")},
                    facts.get(f"{label}_disagreement") or {})
    return metrics, {}


def _kind(d: Mapping[str, Any], metrics: Mapping[str, Any], facts: Mapping[str, Any]) -> str:
    for name in ("nan", "finite", "inf", "sign", "flushed"):
        if (_num(d.get(name)) or 0) > 0:
            return name
    if facts.get("exact") or d.get("exact"):
        return "exact"
    if _num(metrics.get("invariant_err")) is not None and not (_num(metrics.get("mismatches")) or 0):
        return "invariant"  # the elements agree; a non-unique result's residual does not
    ulp = _num(metrics.get("max_ulp_err"))
    if ulp is not None and ulp > 0:
        if math.isinf(ulp) or math.isnan(ulp):
            # an older record: a NaN or an infinity was involved, which one is not recorded
            return "nonfinite"
        return ulp_band(ulp)
    if _num(metrics.get("invariant_err")) is not None or facts.get("against") == "invariant":
        return "invariant"
    return "mismatch" if (_num(metrics.get("mismatches")) or 0) > 0 else ""


def ulp_band(ulp: float) -> str:
    """``ulp≤16``, ``ulp≤1k`` (1024), ``ulp≤1M`` (2**20) or ``ulp>1M``.

    >>> ulp_band(113.0)
    'ulp≤1k'
    """
    for bound, label in ULP_BANDS:
        if ulp <= bound:
            return f"ulp≤{label}"
    return f"ulp>{ULP_BANDS[-1][1]}"


def _extent(bad: float | None, elements: float | None) -> str:
    if bad is None or bad <= 0:
        return ""
    if elements is not None and elements > 0 and bad >= elements:
        return "all"
    if bad == 1:
        return "one"
    if elements is None or elements <= 0:
        return ""
    return "few" if bad <= 0.1 * elements else "most"


def _num(v: Any) -> float | None:
    """A stored number (the store keeps inf/nan as strings)."""
    if v is None or isinstance(v, bool):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None
