"""One bisection step in its own process: import jax, run named harnesses, write JSON.

``python -m workers.probe SPEC OUT``: ``SPEC`` (JSON) names the catalog, the harness names
and the options; ``OUT`` receives ``{"jax": ..., "jaxlib": ..., "outcomes": [...]}``, or
``{"import_error": ...}`` when this jax does not import (with this jaxlib, this Python):
the bisection skips such a point, as ``git bisect skip`` does. The harnesses run through
the normal pipeline (``workers.runtime.JobRunner``, as the standalone worker's children
do); the caller runs this with the point's jax first on ``PYTHONPATH`` and judges a crash
or a hang of the whole process itself. Needs neither Ray nor SQLAlchemy.
"""
from __future__ import annotations

import json
import sys
import time
import traceback
from typing import Any


def probe(spec: dict[str, Any]) -> dict[str, Any]:
    t0 = time.monotonic()
    try:
        import jax
        import jax.numpy  # noqa: F401  (a jax whose numpy layer does not load is as unusable)
        import jaxlib
    except Exception as e:  # noqa: BLE001  (any failure to import is "this point cannot be judged")
        last = traceback.format_exception_only(type(e), e)[-1].strip()
        return {"import_error": last[:500], "seconds": time.monotonic() - t0}
    from workers.runtime import JobRunner

    runner = JobRunner(spec["catalog"], spec.get("modules", []), spec["options"])
    by_name = {h.name: fp for fp, h in runner.harnesses.items()}
    outcomes, missing = [], []
    for name in spec["names"]:
        fp = by_name.get(name)
        if fp is None:
            missing.append(name)
            continue
        out = runner.run_one(fp).replace(stamp=None).to_dict()  # the environment is the probe's own, above
        out["artifacts"] = [{k: v for k, v in a.items() if k != "data"} for a in out["artifacts"]]
        outcomes.append(out)
    return {"jax": jax.__version__, "jaxlib": getattr(jaxlib, "__version__", None), "jax_file": jax.__file__,
            "outcomes": outcomes, "missing": missing, "seconds": time.monotonic() - t0}


def main(argv: list[str]) -> int:
    spec_path, out_path = argv
    with open(spec_path) as f:
        spec = json.load(f)
    result = probe(spec)
    with open(out_path, "w") as f:
        json.dump(result, f, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
