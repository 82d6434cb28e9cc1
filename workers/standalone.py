"""Standalone worker: the same stage code without Ray (jobs file in, results bundle out).

For hosts that cannot join the cluster (an air-gapped device host, a lent GPU machine
without Ray). Each harness runs in a child process so a crash or hang is recorded
(``crashed`` after one retry alone, ``timeout``) and the rest carry on.
"""
from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import os
import queue
import sys
import threading
import time
from typing import Any

from farm.catalog import Harness
from farm.pipeline.child import TIMED_OUT, Child, Ended
from farm.pipeline.isolation import Isolation
from farm.results import Outcome
from farm.formats import journal as journal_
from farm.formats.outcomes import from_json, pack, unpack


def _child(conn: Any, catalog: str, modules: list[str], options: dict[str, Any]) -> None:
    from workers.runtime import JobRunner

    runner = JobRunner(catalog, modules, options)
    conn.send(("ready", runner.info()))
    while True:
        job = conn.recv()
        if job is None:
            return
        fp, prior = job
        conn.send(("outcome", pack([runner.run_one(fp, prior)])))


class IsolatedRunner:
    """A child process that runs harnesses one at a time; replaced when it dies or hangs."""

    def __init__(self, catalog: str, modules: list[str], options: dict[str, Any], startup_s: float = 180.0) -> None:
        # the limit of each harness is the caller's (``run``): the policy here only times the start
        self.child = Child(_child, (catalog, modules, options), Isolation(startup_s=startup_s), hello=True,
                           what="standalone worker")
        self.info: dict[str, Any] = {}
        self.peak_rss = 0

    def start(self) -> None:
        _, self.info = self.child.start()

    def stop(self) -> None:
        self.child.kill()

    def run(self, fp: str, timeout_s: float, prior: dict[str, Any] | None = None) -> Ended:
        """How the harness's run ended (``finished``: its ``Outcome``, stamped); a lost process is
        stopped and the next ``run`` starts a new one."""
        if not self.child.running:
            self.start()
        ended = self.child.ask((fp, prior), timeout_s)
        if ended.finished:
            (o,) = unpack(ended.output[1])
            ended = dataclasses.replace(ended, output=o)
            self.peak_rss = max(self.peak_rss, o.stamp.rss if o.stamp else 0)
        return ended


def _lost(h: Harness, ended: Ended, policy: Isolation, run_on: tuple[str, ...], tries: int) -> Outcome | None:
    """The outcome of a harness whose process was lost (``timeout``, or ``crashed`` once it may
    not be retried alone again), or None: run it again."""
    if ended.how == TIMED_OUT:
        return policy.timed_out(h, ended.limit_s)
    if not policy.retry(tries):
        return policy.crashed(h, f"exit code {ended.exitcode}", run_on)
    return None


def run_isolated(runner: IsolatedRunner, h: Harness, policy: Isolation, run_on: tuple[str, ...],
                 prior: dict[str, Any] | None = None) -> Outcome:
    """One harness on ``runner`` under ``policy``: a hang is a ``timeout``, a death is retried
    alone (each runner runs one harness at a time) and then ``crashed``."""
    limit = policy.limit(h, fresh=False)  # the runner waits for its process to start first
    tries = 0
    while True:
        ended = runner.run(h.fingerprint, limit, prior)
        if ended.finished:
            return ended.output  # its stamp goes no further: the journal and the bundle drop it (to_json)
        lost = _lost(h, ended, policy, run_on, tries)
        if lost is not None:
            return lost
        tries += 1


def read_jobs(path: str) -> dict[str, Any]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def spread(harnesses: list[Harness]) -> list[Harness]:
    """Round-robin over groups, so a run cut short by a deadline still covers every group."""
    by_group: dict[str, list[Harness]] = {}
    for h in harnesses:
        by_group.setdefault(h.group, []).append(h)
    queues = list(by_group.values())
    out: list[Harness] = []
    while queues:
        out += [q.pop(0) for q in queues]
        queues = [q for q in queues if q]
    return out


def _choose(jobs: dict[str, Any], cat: list[Harness]) -> tuple[dict[str, tuple[Harness, str]], int]:
    """Match the jobs to this host's catalog: ``({fingerprint: (harness, job fingerprint)}, missing)``.

    By fingerprint, else by name, because a definition that changed between the hosts'
    jax versions gives the harness another fingerprint here; the first match wins. Jobs
    with ``select`` (catalog filters) take every harness of this host's catalog that matches
    (``farm sweep --jax``: each version sweeps its own catalog)."""
    from farm import catalog

    if jobs.get("select") is not None:
        # select on this host's own catalog: another jax version's catalog has other harnesses
        own = catalog.select(catalog.Filters.from_dict(jobs["select"]))
        return {h.fingerprint: (h, h.fingerprint) for h in own}, 0
    by_fp = catalog.by_fingerprint(cat)
    by_name = {h.name: h for h in cat}
    names = jobs.get("names") or [None] * len(jobs["fingerprints"])
    chosen: dict[str, tuple[Harness, str]] = {}
    missing = 0
    for fp, name in zip(jobs["fingerprints"], names):
        h = by_fp.get(fp) or by_name.get(name)
        if h is None:
            missing += 1
        else:
            chosen.setdefault(h.fingerprint, (h, fp))
    return chosen, missing


class _Pool:
    """What the worker threads of one ``run_jobs`` share: the queue, the outcomes, the stats.

    A class rather than a closure so ``run_jobs`` stays short and each step has a name."""

    def __init__(self, jobs: dict[str, Any], chosen: dict[str, tuple[Harness, str]], order: list[Harness],
                 deadline_s: float | None, log: Any, journal: journal_.Journal | None = None,
                 done: list[Outcome] | None = None) -> None:
        self.jobs = jobs
        self.chosen = chosen
        self.total = len(order)
        self.priors: dict[str, Any] = jobs.get("priors", {})
        #: timeout, crash and retry-alone: the policy the Ray scheduler applies too
        self.isolation = Isolation(float(jobs.get("timeout_s", 120)), startup_s=0.0)
        self.deadline_s = deadline_s
        self.log = log
        self.todo: queue.Queue = queue.Queue()
        for h in order:
            self.todo.put(h)
        self.journal = journal
        self.keep = set(jobs["keep_artifacts"]) if jobs.get("keep_artifacts") is not None else None
        self.outcomes: list[Outcome] = list(done or [])  # resumed: what the journal held
        self.total += len(self.outcomes)
        self.lock = threading.Lock()
        self.t0 = time.monotonic()
        self.infos: list[dict[str, Any]] = []
        self.peak_rss: list[int] = []

    def run_one(self, runner: IsolatedRunner, h: Harness) -> Outcome:
        """One harness; a crash is retried once alone, then judged (a crash can be expected).

        A harness matched by name keeps the job's fingerprint in its trace facts, so the
        home host can file the result under the job it sent."""
        job_fp = self.chosen[h.fingerprint][1]
        prior = self.priors.get(job_fp)
        o = run_isolated(runner, h, self.isolation, tuple(self.jobs["options"].get("run_on") or ("cpu",)), prior)
        if job_fp != h.fingerprint:
            o = o.replace(records=[r.with_status(r.status, facts={**r.facts, "job_fingerprint": job_fp})
                                   if r.stage == "trace" else r for r in o.records])
        return o

    def work(self) -> None:
        """One thread: its own child process, taking harnesses until the queue or the deadline runs out."""
        runner = IsolatedRunner(self.jobs["catalog"], self.jobs.get("modules", []), self.jobs["options"])
        runner.start()
        self.infos.append(runner.info)
        try:
            while self.deadline_s is None or time.monotonic() - self.t0 < self.deadline_s:
                try:
                    h = self.todo.get_nowait()
                except queue.Empty:
                    return
                o = self.run_one(runner, h)
                if self.keep is not None:
                    from farm.formats.bundles import keep_only

                    o = keep_only([o], self.keep)[0]
                if self.journal is not None:  # on disk (fsynced) before the next harness starts
                    self.journal.append(self.chosen[h.fingerprint][0].describe(), o,
                                        runner.info.get("environment", {}))
                with self.lock:
                    self.outcomes.append(o)
                    n = len(self.outcomes)
                if n % 100 == 0 or n == self.total:
                    rate = n / max(time.monotonic() - self.t0, 1e-9)
                    self.log(f"[farm worker] {n}/{self.total} harnesses, {rate:.1f}/s, "
                             f"{time.monotonic() - self.t0:.0f}s", file=sys.stderr)
        finally:
            self.peak_rss.append(runner.peak_rss)
            runner.stop()


def run_jobs(jobs_path: str, out_path: str, *, workers: int = 1, deadline_s: float | None = None,
             log: Any = print) -> dict[str, Any]:
    """Run a jobs file on ``workers`` isolated child processes and write a results bundle.

    Jobs are matched by fingerprint, else by name (a harness whose definition changed
    between the hosts' jax versions runs under this host's fingerprint). With a deadline
    no new harness starts after ``deadline_s``; the bundle holds what finished.

    Each result is appended to ``OUT.journal.jsonl`` (fsynced) as it finishes; a worker
    killed mid-run loses only the harnesses in flight: ``farm import OUT.journal.jsonl``
    loads what finished, and the same command run again resumes from the journal (the
    journal is removed once the bundle is written)."""
    from farm import catalog
    from farm.formats import bundles as bundle

    jobs = read_jobs(jobs_path)
    cat = catalog.load(jobs["catalog"], jobs.get("modules", []))
    chosen, missing = _choose(jobs, cat)
    jpath = journal_.path_for(out_path)
    run_meta = {"name": jobs.get("name"), "catalog": jobs["catalog"], "filters": jobs.get("filters", {}),
                "platforms": jobs["options"].get("platforms", []), "run_on": jobs["options"].get("run_on", [])}
    job_id = _job_identity(jobs)
    done = _resume(jpath, job_id, chosen, log)
    order = spread([h for h, _ in chosen.values() if h.fingerprint not in {o.fingerprint for o in done}])
    jr = journal_.Journal(jpath, {"run": run_meta, "job": job_id})
    pool = _Pool(jobs, chosen, order, deadline_s, log, journal=jr, done=done)
    threads = [threading.Thread(target=pool.work, daemon=True) for _ in range(max(1, workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    jr.close()
    seconds = time.monotonic() - pool.t0
    outcomes = pool.outcomes
    env = pool.infos[0].get("environment", {}) if pool.infos else {}
    unrun = pool.total - len(outcomes)
    paths = bundle.write_parts(out_path, per_part=int(jobs.get("per_bundle") or 10**9), environment=env,
                 run={**run_meta,
                      "stats": {"jobs": len(jobs["fingerprints"]) or len(chosen), "ran": len(outcomes), "missing": missing,
                                "unrun": unrun, "workers": workers, "seconds": seconds,
                                "resumed": len(done), "deadline_s": deadline_s, "priors": len(pool.priors),
                                "peak_rss_per_worker": max(pool.peak_rss, default=0)}},
                 harnesses=[chosen[o.fingerprint][0].describe() for o in outcomes], outcomes=outcomes)
    if os.path.exists(jpath):  # the bundle holds all of it now
        os.remove(jpath)
    return {"jobs": len(jobs["fingerprints"]) or len(chosen), "run": len(outcomes), "missing": missing, "unrun": unrun,
            "resumed": len(done), "seconds": seconds, "bundles": paths}


def _job_identity(jobs: dict[str, Any]) -> str:
    """What a journal must match to be resumed: the same harnesses, catalog and options."""
    key = {k: jobs.get(k) for k in ("catalog", "modules", "fingerprints", "select", "options", "keep_artifacts",
                                    "timeout_s")}
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()


def _resume(jpath: str, job_id: str, chosen: dict[str, tuple[Harness, str]], log: Any) -> list[Outcome]:
    """The outcomes a journal left by an earlier (killed) run of the same jobs holds."""
    from farm.errors import FarmError

    if not os.path.exists(jpath) or os.path.getsize(jpath) == 0:
        return []
    doc = journal_.read(jpath)
    if doc.get("job") != job_id:
        raise FarmError(f"{jpath} holds results of another jobs file: import it (`farm import {jpath}`) "
                        "and remove it, or write to another --out")
    done = [from_json(o) for o in doc["outcomes"] if o["fingerprint"] in chosen]
    log(f"[farm worker] resuming from {jpath}: {len(done)} harnesses already done", file=sys.stderr)
    return done
