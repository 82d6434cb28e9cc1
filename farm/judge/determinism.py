"""The verdict on the determinism stage: a module or an export made again (in the worker, after
everything else; in a fresh process) that differs from the one the sweep kept is ``fail``, the
record showing which and both module texts (``facts.texts``)."""
from __future__ import annotations

from farm.results import Record


def determinism(rec: Record) -> Record:
    """``fail`` where anything made again differs, naming where and what."""
    differs = rec.facts.get("differs") or {}
    if rec.status != "ok" or not differs:
        return rec
    said = "; ".join(f"made {'again in the worker' if where == 'again' else 'in a fresh process'}: "
                     f"{', '.join(sorted(what))} differ" for where, what in sorted(differs.items()))
    return rec.with_status("fail", error_type="ProcessDependent",
                           error=f"the export depends on the process that made it ({said})"[:1000])
