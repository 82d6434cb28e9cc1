"""One bisection step: a jax (a release's venv, or a commit's tree over a fixed jaxlib) runs
the target harnesses in its own process (``workers.probe``), through a result cache.

A step's cache key is the digest of everything that can change its result, by content:
what the point imports (a release venv's installation digest, or a commit's ``jax/`` tree
id with the jaxlib environment's compiler and reference digests), the harness names and
catalog, the options, the farm's own code and harness modules, and the environment
variables a worker reads. A second bisection over the same range is served from the cache
without starting a process; a commit with other ``jax/`` content has another key. Crashes
and timeouts are never cached (they say something about one attempt, not about the code).
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from farm.errors import FarmError
from farm.judge import lost_record
from farm.results import NOT_REUSABLE
from farm.run.versions.venvs import ROOT, cache_root

#: Bump when what a cached step holds changes meaning.
STEP_KEY_VERSION = "1"


@dataclass(frozen=True, slots=True)
class Prepared:
    """How to run one point: the interpreter, a directory put first on ``PYTHONPATH``
    (a commit's or a wheel's jax; None: the venv's own; a callable: made only when the step
    runs, not when the cache serves it), and the content identity of both."""

    python: str
    path: str | Callable[[], str] | None
    identity: str


@dataclass(frozen=True)
class Point:
    """One point of a line: its label, how to run it, and (commits) what it is."""

    label: str
    prepare: Callable[[], Prepared]
    commit: str | None = None
    subject: str = ""


@dataclass(frozen=True, slots=True)
class Step:
    """What one point gave: the records of the target harnesses, or why it could not run."""

    label: str
    records: tuple[dict[str, Any], ...]
    import_error: str | None
    seconds: float
    cached: bool
    jax: str | None = None
    key: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def skipped(self) -> bool:
        return self.import_error is not None


def environment_digest(python: str) -> dict[str, Any]:
    """The installation digest of ``python``'s environment (``farm.cache.key``),
    computed in that interpreter without importing jax (file hashes memoized on disk)."""
    code = ("import json; from farm.cache.key import installation; "
            "print(json.dumps(installation().to_dict()))")
    p = subprocess.run([python, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    if p.returncode != 0:
        raise FarmError(f"{python}: cannot digest its installation: {p.stderr.strip().splitlines()[-1:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def step_environ() -> dict[str, str]:
    """The environment a step process gets, as its worker will set it up (the forced host
    devices of ``workers.runtime.configure_process`` already in ``XLA_FLAGS``): the cache key
    reads the same variables, whether or not this process has configured itself already."""
    from workers.runtime import HOST_DEVICES

    env = dict(os.environ)
    flags = env.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={HOST_DEVICES}".strip()
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a commit's tree keeps its bytecode for the next bisection
    return env


def _harness_files() -> str:
    h = hashlib.sha256()
    for p in sorted((ROOT / "harnesses").glob("*.py")):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


class Stepper:
    """Runs points for a fixed target (harness names, catalog, options), through the cache."""

    def __init__(self, names: list[str], catalog: str, options: dict[str, Any], *, modules: list[str] | None = None,
                 timeout_s: float = 600.0, cache_dir: Path | None = None, use_cache: bool = True) -> None:
        from farm.cache.key import farm_code
        from farm.cache.hermetic import environment

        self.spec = {"catalog": catalog, "modules": list(modules or []), "names": list(names), "options": options}
        self.timeout_s = timeout_s
        self.cache_dir = cache_dir or cache_root() / "bisect-steps"
        self.use_cache = use_cache
        self.ran = 0  # processes started (cache misses)
        env = step_environ()
        self._fixed = [STEP_KEY_VERSION, self.spec, farm_code(), _harness_files(), environment(env)]

    def key(self, identity: str) -> str:
        return hashlib.sha256(json.dumps([self._fixed, identity], sort_keys=True, default=str).encode()).hexdigest()

    def run(self, label: str, prepare: Callable[[], Prepared]) -> Step:
        t0 = time.monotonic()
        prep = prepare()
        key = self.key(prep.identity)
        path = self.cache_dir / key[:2] / f"{key}.json"
        if self.use_cache and path.exists():
            d = json.loads(path.read_text())
            return Step(label, tuple(d["records"]), d.get("import_error"), time.monotonic() - t0, True,
                        d.get("jax"), key)
        d = self._execute(prep)
        self.ran += 1
        step = Step(label, tuple(d["records"]), d.get("import_error"), time.monotonic() - t0, False, d.get("jax"), key)
        if not any(r.get("status") in NOT_REUSABLE for r in step.records):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({**d, "key": key}, default=str))
            os.replace(tmp, path)
        return step

    def _execute(self, prep: Prepared) -> dict[str, Any]:
        """Run ``workers.probe`` in the point's interpreter; a crash or a hang of the process is
        the step's result (``crashed``, ``timeout``) for every target harness."""
        with tempfile.TemporaryDirectory(prefix="farm-bisect-") as tmp:
            spec, out = Path(tmp) / "spec.json", Path(tmp) / "out.json"
            spec.write_text(json.dumps(self.spec))
            first = prep.path() if callable(prep.path) else prep.path
            pythonpath = os.pathsep.join(p for p in (first, str(ROOT)) if p)
            env = {**step_environ(), "PYTHONPATH": pythonpath}
            try:
                p = subprocess.run([prep.python, "-m", "workers.probe", str(spec), str(out)], cwd=tmp, env=env,
                                   capture_output=True, text=True, timeout=self.timeout_s)
                hung, why = False, f"step process exited {p.returncode}: " + " ".join(
                    (p.stderr or "").strip().splitlines()[-1:])
            except subprocess.TimeoutExpired:
                p, hung, why = None, True, f"no result after {self.timeout_s:.0f} s; step process killed"
            if p is not None and p.returncode == 0 and out.exists():
                d = json.loads(out.read_text())
                if d.get("import_error"):
                    return {"records": [], "import_error": d["import_error"], "jax": None}
                recs = [{**r, "harness": o["name"]} for o in d["outcomes"] for r in o["records"]]
                recs += [{"harness": n, "stage": "trace", "platform": "cpu", "status": "error",
                          "error_type": "UnknownHarness", "error": f"this jax's catalog has no harness {n}"}
                         for n in d.get("missing", [])]
                return {"records": recs, "import_error": None, "jax": d.get("jax"), "jaxlib": d.get("jaxlib")}
        return {"records": [{"harness": n, **lost_record("trace", "cpu", hung=hung, why=why)}
                            for n in self.spec["names"]], "import_error": None, "jax": None}


def commit_identity(tree: str, env: dict[str, Any]) -> str:
    """A commit's step identity: its ``jax/`` tree id and the jaxlib environment (compiler and
    reference digests; the environment's own installed jax is shadowed, so it is not part)."""
    return json.dumps({"jax_tree": tree, "compiler": env["compiler"], "reference": env["reference"]})


def this_python() -> str:
    return sys.executable
