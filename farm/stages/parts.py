"""The platforms' parts of one multi-platform module: whether they compute differently
(``branched``), and the module relabelled so the CPU backend runs one platform's part
(``relabelled``), as crossexec runs another platform's static module. The vjp, symbolic and
effects stages run other platforms' parts this way, and run a module without a platform
branch once, not once per platform.
"""
from __future__ import annotations

import dataclasses
import re
from collections import OrderedDict
from typing import Any

#: Source locations in a module's text: what two lowerings of the same computation may differ in.
LOCATIONS = re.compile(r"\bloc\([^)]*\)|#loc\d*( = .*)?")
_CASE = re.compile(r'(%[\w#]+)(?::\d+)? = "stablehlo\.case"\(([^)]*)\)')
_RETURNS_CONSTANT = re.compile(r"^stablehlo\.return %c(_\d+)? : tensor<i32>$")


_TEXTS: OrderedDict[bytes, str] = OrderedDict()  # module bytes -> text, the last few


def module_text(exp: Any) -> str:
    """``exp.mlir_module()`` (a ``jax.export.Exported``'s module printed from its serialized
    bytes, and nothing else), printed once per module: an artifact and its round trip carry
    the same bytes, and each print costs a parse (~3 ms)."""
    key = bytes(exp.mlir_module_serialized)
    text = _TEXTS.get(key)
    if text is None:
        text = _TEXTS[key] = exp.mlir_module()
        while len(_TEXTS) > 8:
            _TEXTS.popitem(last=False)
    return text


def branched(module_text: str) -> bool:
    """Whether a module may compute differently on different platforms: whether, in any of its
    functions, a ``stablehlo.case`` has two branches that differ (locations aside). A case
    whose branches each return an i32 constant and whose result only selects the branch of
    other cases is jax's map from platform index to lowering rule, not a computation: skipped.
    Anything this cannot read counts as branched."""
    text = LOCATIONS.sub("", module_text)
    for func in text.split("func.func")[1:]:
        cases = list(_CASE.finditer(func))
        if len(cases) != func.count("stablehlo.case"):  # a case op in a form not read here
            return True
        for m in cases:
            regions = _regions(func, m.end())
            if regions is None:
                return True
            if len(set(regions)) <= 1:
                continue
            result = m.group(1)
            selector = all(_RETURNS_CONSTANT.match(r) for r in regions)
            uses = re.findall(rf"{re.escape(result)}(?![\w#])", func)
            as_selector = len(re.findall(rf'"stablehlo\.case"\({re.escape(result)}\)', func))
            if not (selector and len(uses) == 1 + as_selector):
                return True
    return False


def _regions(text: str, start: int) -> list[str] | None:
    """The bodies of the regions of the op whose operands end at ``start``: `` ({ a }, { b })``;
    None where the text is not that shape."""
    open_at = text.find("({", start)
    if open_at < 0 or text[start:open_at].strip():
        return None
    out: list[str] = []
    depth, begin = 0, 0
    for i in range(open_at + 1, len(text)):
        c = text[i]
        if c == "{":
            depth += 1
            if depth == 1:
                begin = i + 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                out.append(" ".join(text[begin:i].split()))
        elif depth == 0 and c == ")":
            return out
    return None


def relabelled(exp: Any, p: str) -> Any:
    """``exp`` (a ``jax.export.Exported``) with its platform labels changed so the CPU
    backend runs ``p``'s part."""
    platforms = tuple(exp.platforms)
    if "cpu" not in platforms:
        if len(platforms) == 1:
            return dataclasses.replace(exp, platforms=("cpu",))
        swapped = tuple("cpu" if q == p else q for q in platforms)
    else:
        swapped = tuple("cpu" if q == p else p if q == "cpu" else q for q in platforms)
    return dataclasses.replace(exp, platforms=swapped)
