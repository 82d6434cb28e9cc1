"""Runs the stages for one job: trace → lower (per platform) → census → export →
serialize → compile → execute → compare → crossexec, applying limitations as data.

This is the one code path every runner uses (Ray actors, standalone workers, the
Bazel/pytest family tests). Isolation from crashes and hangs is the runner's job:
this module runs in whatever process it is given.
"""
from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from typing import Any

import numpy as np

from farm.catalog import Harness
from farm.platforms import LOWERING_PLATFORMS, NATIVE_PLATFORM
from farm.pipeline.references import reference_outputs
from farm.stages import census, compare, compile as compile_stage, execute, export, lower, trace, xhost
from farm.results import RUN_STAGES, UPSTREAM_STAGES, Artifact, Options, Outcome, Record, Reuse

#: Which Limitation stage judges a record of each pipeline stage. Export records are
#: per platform that JAX refused to export ("cuda", ...) or for the artifact ("export",
#: which only a limitation for all platforms covers); serialize records are for "export".
_LIMIT_STAGE = {"trace": "trace", "lower": "lower", "census": "census", "export": "export",
                "serialize": "serialize", "compile": "compile", "execute": "execute", "compare": "compare",
                "crossexec": "crossexec"}
_PLATFORM_OF_KIND = {"gpu": ("cuda", "rocm")}


def _judge(h: Harness, rec: Record) -> Record:
    """Apply the harness's limitations: expected failures and stale limitations."""
    stage = _LIMIT_STAGE.get(rec.stage)
    if stage is None:
        return rec
    platforms = (rec.platform,) + _PLATFORM_OF_KIND.get(rec.platform, ())
    if rec.stage == "export" and rec.platform == "export" and rec.status == "ok":
        # the artifact holds these platforms: a limitation saying one cannot be exported is stale
        platforms += tuple(rec.facts.get("platforms", ()))
    lim = None
    for platform in platforms:
        lim = h.limitation(platform, stage)
        if lim:
            break
    if lim is None:
        return rec
    facts = {**rec.facts, "limitation": lim.description}
    if rec.status in ("fail", "error", "not_runnable_here"):
        return _expected(rec, lim)
    if rec.status == "ok":
        return rec.with_status("unexpected_pass", facts=facts,
                               error=f"limitation no longer holds: {lim.description}")
    return rec


def _expected(rec: Record, lim: Any) -> Record:
    """A failure behind a limitation: ``expected_fail`` if it is the failure the limitation
    describes, else ``fail`` showing what was expected and what happened."""
    facts = {**rec.facts, "limitation": lim.description}
    if lim.expects(rec.status, rec.error_type, rec.error):
        return rec.with_status("expected_fail", facts=facts)
    expected = " ".join(filter(None, (lim.status, lim.error and f"/{lim.error}/")))
    return rec.with_status("fail", error_type="UnexpectedFailure",
                           error=f"expected {expected} ({lim.description}); got {rec.status}: "
                                 f"{rec.error_type}: {rec.error}"[:1000],
                           facts={**facts, "expected_error": lim.error, "expected_status": lim.status,
                                  "actual_status": rec.status, "actual_error_type": rec.error_type,
                                  "actual_error": rec.error})


def judge_crash(h: Harness, outcome: Outcome, run_on: tuple[str, ...]) -> Outcome:
    """A ``crashed`` outcome where the harness is known to kill the process on a platform
    it ran natively on (``Limitation.crashes``) is the expected failure."""
    if outcome.worst != "crashed":
        return outcome
    for kind in run_on:
        platform = NATIVE_PLATFORM.get(kind, kind)
        for lim in h.limitations:
            if lim.crashes and lim.applies(platform, h.dtype):
                return outcome.replace(records=[
                    r.with_status("expected_fail", facts={**r.facts, "limitation": lim.description})
                    if r.status == "crashed" else r for r in outcome.records])
    return outcome


def _judge_run(h: Harness, records: list[Record]) -> list[Record]:
    """Limitations with ``stage="run"``, judged per platform over its native stages: the
    failing ones are expected; if the platform ran natively (an execute record) and
    nothing failed, the limitation is stale (``unexpected_pass`` on the last of them)."""
    out = list(records)
    for platform in dict.fromkeys(r.platform for r in records):
        lim = h.limitation(platform, "run")
        if lim is None:
            continue
        idx = [i for i, r in enumerate(out) if r.platform == platform and r.stage in RUN_STAGES]
        bad = [i for i in idx if out[i].status in ("fail", "error", "not_runnable_here")]
        for i in bad:
            out[i] = _expected(out[i], lim)
        ran = any(out[i].stage == "execute" for i in idx)
        passed = [i for i in idx if out[i].status == "ok"]
        if not bad and ran and passed and all(out[i].status in ("ok", "skipped") for i in idx):
            i = passed[-1]
            out[i] = out[i].with_status("unexpected_pass", facts={**out[i].facts, "limitation": lim.description},
                                        error=f"limitation no longer holds: {lim.description}")
    return out


def _io_artifact(dyn: list[Any], outputs: list[np.ndarray] | None) -> Artifact:
    from farm.pipeline import iofile

    data = iofile.pack(dyn, outputs or [])
    return Artifact(hashlib.sha256(data).hexdigest(), "io", data,
                    {"inputs": len(dyn), "outputs": len(outputs or [])})


class CompileCache:
    """Per-worker dedup of compilation by module sha256.

    Many harnesses (and many platforms) produce byte-identical modules: on JAX's own
    catalog only ~2,600 distinct CPU modules come out of ~5,500 harnesses. An
    executable does not depend on input values, so each distinct module is compiled
    once and executed with every harness's own inputs. Bounded so memory stays flat.
    """

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._d: OrderedDict[str, Record] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Record | None:
        v = self._d.get(key)
        if v is not None:
            self._d.move_to_end(key)
            self.hits += 1
        else:
            self.misses += 1
        return v

    def put(self, key: str, value: Record) -> None:
        self._d[key] = value
        while len(self._d) > self.size:
            self._d.popitem(last=False)

    def clear(self) -> None:
        self._d.clear()


_CACHE = CompileCache()


def _compile_execute(lowered: lower.Lowered, dyn: list[Any], opts: Options, stage: str) -> tuple[Record, Record]:
    """Compile (or reuse the executable of an identical module), then execute."""
    run_stage = "execute" if stage == "compile" else stage + "_run"
    key = lowered.facts["module_sha256"] if lowered.ok else None
    c = _CACHE.get(key) if key is not None else None
    if c is not None:
        # the same module's executable: its cost and memory analysis hold, its compile time
        # was another harness's and is not this one's
        c = c.with_status(c.status, stage=stage, platform=lowered.platform, seconds=0.0,
                          metrics={k: v for k, v in c.metrics.items() if k != "compile_s"},
                          facts={**c.facts, "reused": True})
    else:
        c = compile_stage.run(lowered, stage=stage)
        if key is not None and c.status == "ok":
            _CACHE.put(key, c)
    e = execute.run(c, dyn, warmup=opts.warmup, repeats=opts.repeats, stage=run_stage)
    return c.with_status(c.status, handle=None), e


def run_harness(h: Harness, opts: Options = Options(), prior: xhost.Prior | None = None,
                reuse: Reuse | None = None, options_digest: str | None = None) -> Outcome:
    """Run every stage for one harness; exceptions inside stages become records.

    ``prior``: another host's serialized export of this harness (with its inputs and
    outputs), run here too and compared three ways (the ``xhost`` stage).
    ``reuse``: an earlier run's downstream records, taken instead of compiling and
    running again only if the exact modules, inputs and compiler are unchanged.
    ``options_digest``: the driver's digest of the sweep options and environment (the
    cache key part it looks results up by); computed here when not given."""
    import time

    import jax

    from farm.pipeline import cachekey as digest

    t0 = time.perf_counter()
    opt_d = options_digest or digest.options_digest(opts)
    with jax.enable_x64(h.needs_x64):
        records, artifacts, dkey = _run(h, opts, prior, reuse, opt_d)
    records = _judge_run(h, [_judge(h, r) for r in records])
    return Outcome(h.fingerprint, h.name, records, artifacts, time.perf_counter() - t0,
                   result_key=digest.result_key(h, opt_d), downstream_key=dkey)


def _downstream_key(h: Harness, opts: Options, options_digest: str, args: list[Any],
                    lowered: dict[str, lower.Lowered], serialized: export.Serialized | None) -> str:
    from farm.pipeline import cachekey as digest

    modules = {p: lo.facts["module_sha256"] if lo.ok else f"{lo.status}:{lo.error_type}:{lo.error}"
               for p, lo in lowered.items()}
    modules["export"] = serialized.artifact if serialized is not None else "none"
    return digest.downstream_key(h, options_digest, modules, digest.inputs_digest(args))


def _reused(reuse: Reuse) -> list[Record]:
    """The earlier run's downstream records, each saying where it came from."""
    out = []
    for d in reuse.records:
        r = Record.from_dict(d)
        if r.stage in UPSTREAM_STAGES:
            continue
        out.append(r.with_status(r.status, facts={**r.facts, "reused_from": r.facts.get("reused_from", reuse.run)}))
    return out


def _run(h: Harness, opts: Options, prior: xhost.Prior | None = None, reuse: Reuse | None = None,
         options_digest: str = "") -> tuple[list[Record], list[Artifact], str | None]:
    recs: list[Record] = []
    arts: list[Artifact] = []
    have = _device_count()
    if h.devices > have:
        return [Record("trace", "any", "not_runnable_here", error_type="TooFewDevices",
                       error=f"needs {h.devices} devices; this host's default backend has {have}",
                       facts={"devices_needed": h.devices, "devices_here": have})], arts, None
    args = h.make_args()
    tr = trace.run(h, args)
    recs.append(tr.with_status(tr.status, handle=None))
    if not tr.ok:
        return recs, arts, None
    _, _, dyn = tr.handle
    promised = tr.facts.get("outputs")

    lowered: dict[str, lower.Lowered] = {}
    for p in opts.platforms:
        lo = lower.run(tr, p)
        lowered[p] = lo
        recs.append(lo.with_status(lo.status, handle=None))
        if lo.ok:
            recs.append(census.run(lo.handle[1], p))
            if opts.keep_modules:
                text = lo.handle[2].encode()
                arts.append(Artifact(lo.facts["module_sha256"], "module", text, {"platform": p, "stage": "lower"}))

    good = tuple(p for p in opts.platforms if lowered[p].ok)
    serialized: export.Serialized | None = None
    if good:
        ex, *refused = export.run_all(tr, good)
        recs += [r.with_status(r.status, handle=None) for r in (ex, *refused)]
        se = export.serialize(ex)
        recs.append(se.with_status(se.status, handle=None))
        if se.status == "ok":
            serialized = se
            blob, _ = se.handle
            arts.append(Artifact(se.artifact, "export", blob, {
                "platforms": ex.facts["platforms"], "calling_convention_version": ex.facts["calling_convention_version"],
                "jax_version": jax_version(), "format": "jax.export.serialize"}))
            # walk the artifact's own bytecode: printing it to text and parsing that back cost ~18 ms
            recs.append(census.run(census.parse_artifact(bytes(ex.handle.mlir_module_serialized)), "export",
                                   exported=True))

    dkey = _downstream_key(h, opts, options_digest, args, lowered, serialized)
    if reuse is not None and reuse.key == dkey and prior is None:
        return recs + _reused(reuse), arts, dkey
    recs += _native(h, opts, args, dyn, promised, lowered, serialized, prior, arts)
    return recs, arts, dkey


def _native(h: Harness, opts: Options, args: list[Any], dyn: list[Any], promised: list[dict[str, Any]] | None,
            lowered: dict[str, lower.Lowered], serialized: export.Serialized | None, prior: xhost.Prior | None,
            arts: list[Artifact]) -> list[Record]:
    """Compile, execute and judge on each run-on kind; crossexec the other platforms' modules."""
    recs: list[Record] = []
    ref = None
    for kind in opts.run_on:
        native = NATIVE_PLATFORM[kind]
        lo = lowered.get(native)
        if lo is None:
            continue
        c, e = _compile_execute(lo, dyn, opts, "compile")
        actual = e.handle if e.ok else None
        if actual is not None:
            io_art = _io_artifact(dyn, actual)
            arts.append(io_art)
            e = e.with_status(e.status, artifact=io_art.sha256)
        recs += [c, e.with_status(e.status, handle=None)]
        if ref is None and h.reference is not None:
            try:
                ref = reference_outputs(h, args)
            except Exception as exc:  # a broken reference is the farm's bug: say so
                recs.append(Record("compare", native, "error", error_type=type(exc).__name__,
                                   error=f"reference raised: {exc}"[:500]))
        rtol, atol = h.tolerance(native, promised[0]["dtype"] if promised else None)
        exact = h.compare == "exact"
        if h.invariant is not None and actual is not None:
            recs.append(_invariant(h, args, actual, native))
        elif h.compare != "none" or actual is None:
            recs.append(compare.run(actual, ref, platform=native, against="reference", rtol=rtol, atol=atol,
                                    exact=exact, promised=promised))
        if prior is not None:
            recs.append(_xhost(h, args, prior, native, dyn, actual, ref, rtol, atol, exact, promised))
        if actual is not None and kind == "cpu":
            if opts.roundtrip and serialized is not None:
                recs.append(_roundtrip(serialized, dyn, actual))
            if opts.crossexec:
                for p in opts.platforms:
                    if p == native or not lowered[p].ok:
                        continue
                    recs += _crossexec(h, args, lowered[p], lo, dyn, actual, opts, rtol, atol, exact)
    return recs


def _xhost(h: Harness, args: list[Any], prior: xhost.Prior, platform: str, dyn: list[Any],
           actual: list[np.ndarray] | None, ref: list[np.ndarray] | None, rtol: float, atol: float,
           exact: bool, promised: list[dict[str, Any]] | None) -> Record:
    """Another host's artifact run here; non-unique results are judged by the invariant."""
    invariant = None if h.invariant is None else (lambda outs: _invariant_error(h, args, outs))
    return xhost.run(prior, platform, dyn, native=actual, reference=ref, rtol=rtol, atol=atol, exact=exact,
                     promised=promised, invariant=invariant)


def _roundtrip(se: export.Serialized, dyn: list[Any], native: list[np.ndarray]) -> Record:
    """The deserialized artifact, called here, must equal the native run bit for bit."""
    try:
        out = execute.to_numpy(export.call(se, dyn))
    except Exception as e:
        from farm.stages.record import failure

        return failure(compare.Compared, "compare", "export", e, 0.0, facts={"against": "native"})
    return compare.run(out, native, platform="export", against="native", rtol=0.0, atol=0.0, exact=True)


def _crossexec(h: Harness, args: list[Any], lo: lower.Lowered, native_lo: lower.Lowered, dyn: list[Any],
               native: list[np.ndarray], opts: Options, rtol: float, atol: float, exact: bool) -> list[Record]:
    """Run another platform's module on this backend and compare with the native result.

    A module whose platform-only custom calls (cuSOLVER, hipSPARSE...) have no handler
    here is ``not_runnable_here``, whether the compile or the first run finds out.
    Non-unique results (a harness with an invariant) are judged by the invariant: an
    SVD's signs may differ between two correct lowerings."""
    if lo.facts["module_sha256"] == native_lo.facts["module_sha256"]:
        return [Record("crossexec", lo.platform, "ok", facts={"identical_to": native_lo.platform})]
    c, e = _compile_execute(lo, dyn, opts, "crossexec")
    if c.status != "ok":
        return [c]
    if not e.ok:
        return [compile_stage.not_runnable(e.with_status(e.status, stage="crossexec"))]
    if h.invariant is not None:
        like = [{"dtype": str(a.dtype), "shape": list(a.shape)} for a in native]
        got = [{"dtype": str(a.dtype), "shape": list(a.shape)} for a in e.handle]
        if got != like:
            cmp = compare.Compared("crossexec", lo.platform, "fail", error_type="Mismatch",
                                   error=f"outputs {got} differ in dtype or shape from {native_lo.platform}'s {like}",
                                   facts={"against": native_lo.platform})
        else:
            cmp = _invariant(h, args, e.handle, lo.platform, stage="crossexec")
    else:
        cmp = compare.run(e.handle, native, platform=lo.platform, against=native_lo.platform,
                          rtol=rtol, atol=atol, exact=exact, stage="crossexec")
    return [cmp.with_status(cmp.status, seconds=c.seconds + e.seconds,
                            metrics={**cmp.metrics, "compile_s": c.metrics.get("compile_s", 0.0),
                                     "execute_s": e.metrics.get("execute_s", 0.0)})]


def _invariant(h: Harness, args: list[Any], actual: list[np.ndarray], platform: str,
               stage: str = "compare") -> Record:
    """Non-unique results (eig, svd signs, sort ties): check invariants instead."""
    try:
        err = _invariant_error(h, args, actual)
        rtol, atol = h.tolerance(platform)
        ok = err <= max(rtol, atol) * 10
        return compare.Compared(stage, platform, "ok" if ok else "fail",
                                error=None if ok else f"invariant error {err:.3g}",
                                error_type=None if ok else "Mismatch",
                                metrics={"invariant_err": err},
                                facts={"against": "invariant", "rtol": rtol, "atol": atol})
    except Exception as e:
        from farm.stages.record import failure

        return failure(compare.Compared, stage, platform, e, 0.0, facts={"against": "invariant"})


def _invariant_error(h: Harness, args: list[Any], outs: list[np.ndarray]) -> float:
    """The harness invariant's error for these outputs, computed in float64."""
    from farm.pipeline.references import upcast

    with np.errstate(all="ignore"):
        return float(h.invariant(*[upcast(a) for a in args], *outs))


def _device_count() -> int:
    import jax

    return jax.device_count()


def jax_version() -> str:
    import jax

    return jax.__version__


def clear_caches() -> None:
    """Drop JAX's and our caches so a long-lived worker keeps bounded memory."""
    import jax

    _CACHE.clear()
    jax.clear_caches()


def rss_bytes() -> int:
    try:
        with open(f"/proc/{os.getpid()}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
