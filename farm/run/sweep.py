"""The sweep: selection → jobs → Ray workers → results streamed to the store.

One driver, one writer. Workers are long-lived Ray actors (one per slot) that stream
one outcome per harness; the driver watches every in-flight harness so that a worker
that dies is replaced (its harness retried once alone, then recorded ``crashed``) and a
worker that hangs past the time limit is killed (``timeout``). Results are committed in
batches as they arrive, so an interrupted sweep resumes without redoing anything.

The scheduler (dispatch, crash and timeout isolation, rebalancing) is
``farm.run.scheduler``; everything that talks to Ray is in ``farm.run.cluster``
(``ray_init`` and ``check_feasible`` stay importable from here).
"""
from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

from farm.catalog import Harness
from farm.cache import key as digest
from farm.results import Options, Outcome, RunDims
from farm.run import cluster
from farm.run.cluster import check_feasible, ray_init  # noqa: F401  (importable from here)
from farm.host import describe
from farm.reports.comparison import precompute
from farm.store import codedeps, failures, queries, writes
from farm.run.progress import Progress, SweepConfig, SweepStats  # noqa: F401  (importable from here)
from farm.run.scheduler import Sweep, merge_kinds  # noqa: F401  (merge_kinds: importable from here)


@dataclass
class _Plan:
    """What a sweep has to do, found before any worker starts."""

    run: Any  # the store's Run row
    hids: dict[str, int]  # fingerprint -> harness id
    resumed: bool
    done: int  # harnesses this run finished before (when resumed)
    todo: list[Harness]
    cached: dict[int, int]  # harness id -> the run its whole outcome was copied from (result cache, level 1)
    reuse: dict[str, dict[str, Any]]  # fingerprint -> downstream priors (result cache, level 2)
    install: digest.Installation
    options_digest: str
    by_deps: int = 0  # of ``cached``: found by the key over the jax code each harness ran


def sweep(store: Any, harnesses: list[Harness], *, options: Options, catalog: str, filters: dict[str, Any],
          config: SweepConfig, name: str | None = None, resume: str | None = None, force: bool = False,
          dims: RunDims | None = None, kind: str = "sweep",
          log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> tuple[Any, SweepStats]:
    """Create (or resume) a run, skip what is done or cached, run the rest on Ray. ``kind``:
    the run's kind (``fuzz`` for a fuzz campaign's run)."""
    # A local CPU sweep is always feasible: start Ray only if something is left to run
    # (a warm re-sweep whose results are all cached never pays for a cluster).
    lazy = config.address is None and tuple(options.run_on) == ("cpu",) and not cluster.running()
    started = False
    if not lazy:
        started, config.workers = ray_init(config.address, config.workers, tuple(options.run_on))
    try:
        if not lazy:
            check_feasible(options.run_on, config.gpu_fraction)
        plan = _plan(store, harnesses, options=options, catalog=catalog, filters=filters, config=config,
                     name=name, resume=resume, force=force, dims=dims, kind=kind)
        _announce(plan, log)
        if plan.todo and lazy:
            started, config.workers = ray_init(config.address, config.workers, tuple(options.run_on))
        stats = _execute(store, plan, options=options, catalog=catalog, config=config)
        # The dashboard's default compare page (this run against the previous one) opens
        # at once if its report is stored now; this never raises (a failure is one line).
        if stats.done:  # nothing new was computed: the report would only restate its cache source
            precompute(store, plan.run.id, log)
        return plan.run, stats
    finally:
        if started:
            cluster.shutdown()


def _plan(store: Any, harnesses: list[Harness], *, options: Options, catalog: str, filters: dict[str, Any],
          config: SweepConfig, name: str | None, resume: str | None, force: bool,
          dims: RunDims | None = None, kind: str = "sweep") -> _Plan:
    """Open (or resume) the run, copy the cached outcomes into it, and find the level-2
    priors for the harnesses left to run."""
    env = describe(device_kinds=list(options.run_on))  # as a worker sees it (the driver may have no devices)
    install = digest.installation()
    opt_d = digest.options_digest(options, env=config.env)
    with store.session() as s:
        if resume:
            run = queries.resolve_run(s, resume)
            run.status = "running"
        else:
            run = writes.create_run(s, env=env, name=name, catalog=catalog, filters=filters,
                                    platforms=options.platforms, run_on=options.run_on, total=len(harnesses),
                                    dims=dims, kind=kind)
        hids = writes.harness_ids(s, harnesses)
        done = writes.finished(s, run.id)
        todo = [h for h in harnesses if hids[h.fingerprint] not in done]
        cached: dict[int, int] = {}
        narrowed: dict[int, int] = {}
        reuse: dict[str, dict[str, Any]] = {}
        if not force:
            keys = {hids[h.fingerprint]: digest.result_key(h, opt_d) for h in todo}
            cached = writes.copy_cached(s, run, keys)
            todo = [h for h in todo if hids[h.fingerprint] not in cached]
            narrowed = _copy_by_deps(s, run, todo, hids, opt_d, keys)
            todo = [h for h in todo if hids[h.fingerprint] not in narrowed]
            cached.update(narrowed)
            priors = writes.downstream_priors(s, run, [hids[h.fingerprint] for h in todo])
            reuse = {h.fingerprint: priors[hids[h.fingerprint]] for h in todo if hids[h.fingerprint] in priors}
        run.stats = {**(run.stats or {}), "installation": install.to_dict()}
    return _Plan(run=run, hids=hids, resumed=bool(resume), done=len(done), todo=todo, cached=cached, reuse=reuse,
                 install=install, options_digest=opt_d, by_deps=len(narrowed))


def _copy_by_deps(s: Any, run: Any, todo: list[Harness], hids: dict[str, int], opt_d: str,
                  keys: dict[int, str]) -> dict[int, int]:
    """Result cache by jax code (``farm.cache.units``): copy an earlier outcome whose
    key over the jax code it ran is unchanged on today's tree (an edit to a lowering rule
    re-runs only the harnesses that ran it). Returns harness id -> the run that computed it."""
    tree = digest.jax_tree()
    if tree is None or not todo:
        return {}
    by_id = {hids[h.fingerprint]: h for h in todo}
    candidates = writes.deps_candidates(s, run, list(by_id))
    if not candidates:
        return {}
    code_sets = codedeps.sets(s, {sha for cs in candidates.values() for _, _, sha, _ in cs})
    source: dict[int, tuple[int, int]] = {}
    for hid, cs in candidates.items():
        now: dict[str, str | None] = {}
        for rid, origin, sha, key in cs:
            if sha not in code_sets:
                continue  # its code set is not stored whole (or damaged): never guess
            if sha not in now:
                now[sha] = digest.deps_key(by_id[hid], opt_d, code_sets[sha], tree=tree)
            if now[sha] == key:
                source[hid] = (rid, origin)
                break
    writes.copy_outcomes(s, run, source, {hid: keys[hid] for hid in source})
    return {hid: origin for hid, (_, origin) in source.items()}


def _announce(plan: _Plan, log: Callable[[str], None]) -> None:
    if plan.resumed:
        log(f"resuming run {plan.run.name}: {plan.done} done, {len(plan.todo)} to go")
    if plan.cached:
        sources = ", ".join(f"{n} from run {r}" for r, n in sorted(Counter(plan.cached.values()).items()))
        narrowed = (f"; {plan.by_deps} of them although jax changed: none of the jax code they ran did"
                    if plan.by_deps else "")
        log(f"{len(plan.cached)} harnesses reused whole: nothing that shapes their results changed "
            f"(harness, jax/jaxlib/plugin files, farm code, options){narrowed} [{sources}] (use --force to recompute)")
    if plan.reuse:
        log(f"{len(plan.todo)} to run: trace and lower again; compile, execute and compare are reused where the "
            f"exact modules, inputs and compiler are unchanged ({len(plan.reuse)} have an earlier result)")


def _execute(store: Any, plan: _Plan, *, options: Options, catalog: str, config: SweepConfig) -> SweepStats:
    """Run what is left, committing each batch of outcomes as it comes, then finish the run."""
    writer_session = store.sessions()
    writer = writes.Writer(writer_session, writer_session.merge(plan.run), plan.hids)

    # the database as the progress lines name it while a write waits (no password)
    db = store.engine.url.render_as_string(hide_password=True)

    def progress_line(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    def sink(outcomes: list[Outcome], worker: str) -> None:
        # A lost connection (the server restarted or is down) or a lock held by another writer
        # is retried for about two minutes, one progress line per wait: the batch is idempotent,
        # so a retry never duplicates. Meanwhile the workers go on; their outcomes wait in Ray.
        def undo() -> None:
            writer_session.rollback()
            writer.known_artifacts.clear()  # rolled back with the batch

        failures.retry(lambda: (writer.write(outcomes, worker), writer_session.commit()), undo, what=db,
                       log=progress_line)

    sw = Sweep(plan.todo, options, catalog, config, sink, options_digest=plan.options_digest, reuse=plan.reuse)
    status = "finished"
    try:
        if plan.todo:
            sw.run()
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    except Exception as e:
        status = "failed"  # e.g. every node lost: not finished, so it can be resumed
        err = failures.explain(e, f"finished results are kept: `farm sweep --resume {plan.run.name}` once it is fixed")
        if err is not None:
            raise err from None
        raise
    finally:
        try:
            failures.retry(lambda: _finish_run(store, plan, status, sw.stats), what=db, log=progress_line)
        except Exception as e:  # the store itself failed (disk full, server gone): the run stays resumable
            if failures.kind(e) is None:
                raise
            print(f"farm: could not record how run {plan.run.name} ended ({failures.kind(e)}); "
                  f"`farm sweep --resume {plan.run.name}` finishes it", file=sys.stderr)
        writer_session.close()
    return sw.stats


def _finish_run(store: Any, plan: _Plan, status: str, stats: SweepStats) -> None:
    """Record how the run ended (``finished``, ``interrupted`` or ``failed``) and its stats."""
    stats.cached = len(plan.cached)
    stats.install_digest_s = plan.install.seconds
    with store.session() as s:
        run = s.get(type(plan.run), plan.run.id)
        d = stats.to_dict()  # a resumed run keeps the environments of its earlier workers too
        d["worker_environments"] = {**(run.stats or {}).get("worker_environments", {}), **d["worker_environments"]}
        writes.finish_run(s, run, status, {**d, "resumed": plan.resumed})
