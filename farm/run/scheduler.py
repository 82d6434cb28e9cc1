"""The scheduler of one sweep: long-lived Ray workers, one per slot, fed batches of
harnesses; a worker that dies is replaced and its harness retried once alone (then
``crashed``), one that hangs past the time limit is killed (``timeout``); outcomes are
handed to the driver's sink as they arrive (``farm.run.sweep`` is the driver).
"""
from __future__ import annotations

import dataclasses
import gc
import time
from collections import deque
from typing import Any, Callable

from farm.catalog import Harness
from farm.errors import CatalogMismatch, ClusterError
from farm.pipeline.isolation import Isolation
from farm.platforms import native_platform, slot_resource
from farm.results import BAD, Options, Outcome
from farm.run import cluster
from farm.run.batching import START_S, Pace, batch_size, first_workers, grow
from farm.run.cluster import Worker, WorkerDied
from farm.host import fingerprint
from farm.run.progress import Progress, SweepConfig, SweepStats

_NOT_READY = object()  # a busy worker with nothing streamed this turn
#: outcomes the driver buffers before handing them to the sink (or ``commit_every_s``)
FLUSH_AT = 1000


class Sweep:
    """Runs harnesses on Ray actors and hands outcomes to ``sink`` as they finish.

    ``run`` repeats ``_step`` until nothing is left: hand out batches, wait, then for each
    busy worker handle a finished outcome, a dead worker or a timeout; rebalance; flush.
    """

    def __init__(self, harnesses: list[Harness], options: Options, catalog: str, config: SweepConfig,
                 sink: Callable[[list[Outcome], str], None], *, options_digest: str | None = None,
                 reuse: dict[str, dict[str, Any]] | None = None) -> None:
        self.harnesses = harnesses
        self.options = options
        self.catalog = catalog
        self.config = config
        self.sink = sink
        self.stats = SweepStats()
        self.options_digest = options_digest
        #: fingerprint -> an earlier run's downstream records (``pipeline.Reuse`` as a dict)
        self.reuse = reuse or {}
        #: every harness runs natively on each kind, on a worker of that kind (one lane per kind)
        self.kinds: tuple[str, ...] = tuple(options.run_on or ("cpu",))
        self.kind = self.kinds[0]
        #: per kind, the harnesses not handed out yet, in order (batches are cut at dispatch)
        self.pending: dict[str, deque[Harness]] = {}
        #: work handed back (the rest of a dead worker's batch, a retry), served before
        #: ``pending``: (kind, batch, precise); a precise batch streams each outcome alone
        #: (window 0), as one retried after a death or hang in a chunked batch must, to name its cause
        self.queue: deque[tuple[str, list[Harness], bool]] = deque()
        #: per kind, the worker seconds a harness takes (a moving average over chunks: ``_timed``)
        self.pace = Pace()
        self.slots: list[Worker] = []
        self.target: dict[str, int] = {}  # per kind, the workers wanted; fewer while the cluster has fewer slots
        #: per kind, the workers started so far (up to ``target``): a small sweep starts one and
        #: adds more only while they pay for their start (``_grow``)
        self.want: dict[str, int] = {}
        #: with several kinds: fingerprint -> the outcomes of the kinds done so far (merged once all are)
        self.partial: dict[str, dict[str, Outcome]] = {}
        self.retry_alone: set[str] = set()
        self.node_requeues: dict[str, int] = {}
        # After a worker dies its slot is refilled only while the cluster has room: when a
        # node is lost, its slots go and the surviving nodes take the work.
        self.lost_at = -1e9
        self.last_check = 0.0
        self.buffer: list[Outcome] = []
        self.last_commit = time.monotonic()
        self.progress: Progress | None = None
        #: timeout, crash and retry-alone: the policy the standalone worker applies too
        self.isolation = Isolation(config.timeout_s, config.startup_s)
        #: when the budget (``config.budget_s``, counted from the first outcome) runs out
        self.deadline: float | None = None

    def run(self) -> SweepStats:
        t0 = time.monotonic()
        hs = self.harnesses if self.config.keep_order else \
            sorted(self.harnesses, key=lambda h: (h.family, h.group, h.dtype or "", h.name))
        for kind in self.kinds:  # one lane per kind: each kind's workers take its own
            self.pending[kind] = deque(hs)
            n = min(max(1, self.config.workers or 1), max(1, len(hs)))
            if kind != "cpu":  # an accelerator worker Ray cannot place would wait forever
                n = max(1, min(n, cluster.capacity(kind, self.config.gpu_fraction)))
            self.target[kind] = n
            self.want[kind] = first_workers(len(hs), n)
            self.slots += [self._new_worker(kind) for _ in range(self.want[kind])]
        self.progress = Progress(len(self.harnesses), self.config.progress)
        self.last_commit = time.monotonic()
        # The heap from before the sweep (catalog, store, Ray) stays out of the collector's scans
        # while the sweep allocates ~60 objects a harness: a full collection scanned it all, half
        # the driver's time per outcome. Unfrozen after (nothing is lost: it is collectable again).
        # A young generation of 20k objects (not 700) stops re-scanning the buffered outcomes
        # every few harnesses: a few MB of young garbage at most.
        gc.freeze()
        thresholds = gc.get_threshold()
        gc.set_threshold(max(thresholds[0], 20_000), *thresholds[1:])
        try:
            while self._step():
                pass
        except BaseException:  # Ctrl-C, a lost cluster, a catalog mismatch: keep what finished
            self._flush(force=True)
            raise
        finally:
            self.progress.close()
            for s in self.slots:
                s.kill()
            gc.set_threshold(*thresholds)
            gc.unfreeze()
        self._flush(force=True)
        self.stats.wall_s = time.monotonic() - t0
        return self.stats

    def _batch_size(self, slot: Worker) -> int:
        """How many pending harnesses ``slot`` gets next (``farm.run.batching.batch_size``)."""
        kind, cfg = slot.kind, self.config
        return batch_size(self.pace.of(kind), len(self.pending[kind]), self.target.get(kind, 1),
                          cfg.recycle_after - slot.count, batch=cfg.batch, batch_s=cfg.batch_s)

    def _timed(self, slot: Worker, n: int, now: float) -> None:
        """``n`` outcomes came from ``slot`` in one chunk: its kind's pace takes them in."""
        self.pace.chunk(slot.kind, n, now - slot.since, fresh=slot.fresh)

    def _new_worker(self, kind: str) -> Worker:
        # every option travels (a hand-written copy of the fields once dropped --shapes on the way)
        opts = {**self.options.to_dict(), "run_on": [kind], "options_digest": self.options_digest}
        self.stats.workers_started += 1
        return Worker.start(kind, self.catalog, list(self.config.modules), opts, self.config.env,
                            self.config.gpu_fraction, self.config.gpu_backend)

    def _step(self) -> bool:
        """One turn: hand out batches, wait for results, handle each worker. False once all is done."""
        self._dispatch()
        active = [s for s in self.slots if s.stream is not None]
        if not active and not self.queue and not any(self.pending.values()):
            return False
        if not active:  # every worker was lost; wait for the cluster to offer slots again
            time.sleep(0.2)
        ready = cluster.wait(active, timeout=0.2) if active else []
        got = {id(w): d for w, d in zip(ready, cluster.fetch(ready))} if ready else {}
        now = time.monotonic()
        kept = []
        for slot in self.slots:
            slot_ = self._collect(slot, got.get(id(slot), _NOT_READY), now) if slot.stream is not None else slot
            if slot_ is not None:
                kept.append(slot_)
        self.slots = kept
        self._grow(now)
        if len(self.slots) < sum(self.want.values()) or now - self.lost_at < 60.0:
            self._rebalance(now)
        self._flush()
        return True

    def _dispatch(self) -> None:
        """Give each idle worker the next batch of its kind (none past the budget: what is
        running finishes, what is queued is dropped)."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.queue.clear()
            for q in self.pending.values():
                q.clear()
        for slot in self.slots:
            if slot.stream is None:
                i = next((i for i, (kind, _, _) in enumerate(self.queue) if kind == slot.kind), None)
                if i is not None:
                    _, batch, precise = self.queue[i]
                    del self.queue[i]
                elif self.pending[slot.kind]:
                    q = self.pending[slot.kind]
                    batch, precise = [q.popleft() for _ in range(self._batch_size(slot))], False
                else:
                    continue
                key = (slot.kind, batch[0].fingerprint)
                isolated = len(batch) == 1 and key in self.retry_alone
                slot.run(batch, self.reuse, isolated=isolated,
                         window_s=0.0 if precise or isolated else self.config.window_s)

    def _collect(self, slot: Worker, d: Any, now: float) -> Worker | None:
        """Handle a busy worker and what it streamed (``cluster.fetch``: a chunk of outcomes, None
        at the end of its batch, a ``WorkerDied``, or ``_NOT_READY``); returns what takes its
        place (itself, a new worker, or None)."""
        cur = slot.current
        if d is _NOT_READY:
            return self._check_timeout(slot, cur, now) if cur is not None else slot
        if isinstance(d, WorkerDied):
            self._worker_died(slot, cur, d.cause)
            return None
        if d is None:  # the batch is over
            slot.stream = None
            return slot
        if d:
            self._timed(slot, len(d), now)
        for one in d:  # a chunk: the outcomes of the batch's next harnesses, in order
            slot = self._finished(slot, one, now)
        return slot

    def _finished(self, slot: Worker, o: Outcome, now: float) -> Worker:
        """A worker streamed the outcome of its current harness; a worker at its end of life is recycled."""
        cur = slot.current
        stamp = o.stamp  # the driver's to read: the store has no column for it, a bundle drops it
        if any(r.error_type == "UnknownHarness" for r in o.records):
            raise CatalogMismatch(
                f"a worker (pid {stamp.pid if stamp else None}) does not know harness {cur.name if cur else o.name}: "
                "its catalog differs from the driver's (code changed during the sweep, or nodes "
                "run different farm versions). Finished results are kept; make the code the same "
                "everywhere, then `farm sweep --resume latest`")
        rss = stamp.rss if stamp else 0
        if stamp and stamp.environment:  # a worker's first outcome: where it runs
            env = dict(stamp.environment)
            self.stats.worker_envs[o.worker] = {**env, "fingerprint": fingerprint(env)}
        if stamp and stamp.pid:
            self.stats.peak_rss[stamp.pid] = max(self.stats.peak_rss.get(stamp.pid, 0), rss)
        self._finish(o, slot.kind)
        if slot.advance(now):
            return slot
        if slot.count >= self.config.recycle_after or rss > self.config.rss_budget:
            return self._replace(slot)
        return slot

    def _worker_died(self, slot: Worker, cur: Harness | None, cause: str) -> None:
        """The worker process died under ``cur``: requeue it if its node went away, else retry it
        alone once, else record it ``crashed``; the rest of the batch goes back in the queue."""
        if cur is not None:
            kind, key = slot.kind, (slot.kind, cur.fingerprint)
            tries = self.node_requeues.get(key, 0)
            if cluster.capacity(kind, self.config.gpu_fraction) < self.target[kind] and tries < 3:
                # its node went away (the cluster has fewer slots): not the harness's fault
                self.node_requeues[key] = tries + 1
                self.queue.appendleft((kind, [cur], True))
            elif not self.isolation.retry(1 if key in self.retry_alone or slot.isolated else 0):
                self.stats.crashed += 1
                self._finish(self.isolation.crashed(cur, cause, (kind,), self.options.vjp), kind)
            else:
                self.retry_alone.add(key)
                self.queue.appendleft((kind, [cur], True))
            self._requeue_rest(slot, slot.pos + 1, precise=True)
        self._lose(slot)

    def _check_timeout(self, slot: Worker, cur: Harness, now: float) -> Worker:
        """A worker past the time limit on ``cur`` is killed and replaced; ``cur`` is a ``timeout``.
        In a chunked batch the hang may be a later harness's, with ``cur``'s outcome still in
        its window (a hang that holds the GIL stops the flush): ``cur`` is retried alone first."""
        limit = self.isolation.limit(cur, slot.starting(now))
        if now - slot.since <= limit:
            return slot
        if slot.window_s > 0:
            self.queue.appendleft((slot.kind, [cur], True))
        else:
            self.stats.timeouts += 1
            self._finish(self.isolation.timed_out(cur, limit), slot.kind)
        self._requeue_rest(slot, slot.pos + 1, precise=True)
        return self._replace(slot)

    def _rebalance(self, now: float) -> None:
        """At most once a second, match live workers to the slots the cluster has now (a node
        may have gone or come); with none left for ``startup_s`` after a loss, give up."""
        if now - self.last_check >= 1.0:
            self.last_check = now
            for kind in self.kinds:
                self._rebalance_kind(kind)
        lost = [k for k in self.kinds if not any(s.kind == k for s in self.slots)
                and (self.pending[k] or any(q[0] == k for q in self.queue))]
        if lost and now - self.lost_at > self.config.startup_s:
            left = sum(map(len, self.pending.values())) + sum(len(q[1]) for q in self.queue)
            raise ClusterError(f"no node offers {', '.join(slot_resource(k) if k == 'cpu' else k for k in lost)} "
                               f"any more ({left} harness runs left); resume the run when nodes are back")

    def _rebalance_kind(self, kind: str) -> None:
        cap = cluster.capacity(kind, self.config.gpu_fraction)
        mine = [s for s in self.slots if s.kind == kind]
        # More workers than slots: the newest that never started cannot be placed.
        for s in [s for s in reversed(mine) if s.fresh and s.count == 0]:  # replacements are appended
            if len(mine) <= cap:
                break
            self._requeue_rest(s, s.pos, precise=s.window_s == 0)
            self._lose(s)
            self.slots.remove(s)
            mine.remove(s)
        while len(mine) < min(self.want[kind], cap):
            w = self._new_worker(kind)
            self.slots.append(w)
            mine.append(w)
            self.stats.workers_replaced += 1

    def _grow(self, now: float) -> None:
        """Start one more worker of a kind running fewer than its ``target``, when the harnesses
        not handed out yet would keep it busy for longer than a worker takes to start
        (``batching.grow``; the time is the measured pace, or what a worker has spent on its
        current harness so far)."""
        for kind in self.kinds:
            mine = [s for s in self.slots if s.kind == kind]
            if self.want[kind] >= self.target[kind] or len(mine) < self.want[kind]:
                continue  # all started, or a lost one is being replaced first
            pending = len(self.pending[kind]) + sum(len(b) for k, b, _ in self.queue if k == kind)
            known = [self.pace.of(kind)] + [now - s.since for s in mine if s.stream is not None and not s.fresh]
            per = max((p for p in known if p is not None), default=None)
            start_s = max((s.up_s for s in mine if s.up_s is not None), default=START_S)
            if grow(per, pending, len(mine), start_s) and len(mine) < cluster.capacity(kind, self.config.gpu_fraction):
                self.want[kind] += 1
                self.slots.append(self._new_worker(kind))

    def _replace(self, slot: Worker) -> Worker:
        slot.kill()
        self.stats.workers_replaced += 1
        return self._new_worker(slot.kind)

    def _lose(self, slot: Worker) -> None:
        slot.kill()
        self.lost_at = time.monotonic()

    def _requeue_rest(self, slot: Worker, after: int, precise: bool) -> None:
        rest = slot.batch[after:]
        if rest:
            self.queue.appendleft((slot.kind, rest, precise))

    def _finish(self, o: Outcome, kind: str) -> None:
        """Count an outcome and buffer it for the sink; with several kinds, once every kind's is in."""
        if len(self.kinds) > 1:
            got = self.partial.setdefault(o.fingerprint, {})
            got[kind] = o
            if len(got) < len(self.kinds):
                return
            o = merge_kinds(self.partial.pop(o.fingerprint), self.kinds)
        self.buffer.append(o)
        if self.deadline is None and self.config.budget_s is not None:
            self.deadline = time.monotonic() + self.config.budget_s
        self.stats.done += 1
        self.stats.downstream_reused += any("reused_from" in r.facts for r in o.records)
        bad = o.worst in BAD
        self.stats.bad += bad
        self.progress.update(1, int(bad))

    def _flush(self, force: bool = False) -> None:
        """Hand buffered outcomes to the sink: every ``commit_every_s``, at ``FLUSH_AT``, or when forced."""
        if self.buffer and (force or time.monotonic() - self.last_commit >= self.config.commit_every_s
                            or len(self.buffer) >= FLUSH_AT):
            self.sink(self.buffer, "ray")
            self.buffer = []
            self.last_commit = time.monotonic()


def merge_kinds(by_kind: dict[str, Outcome], kinds: tuple[str, ...]) -> Outcome:
    """One outcome from each kind's: the first kind's records, then each other kind's records
    for a (stage, platform) not yet there (its native compile/execute/compare); trace, lower
    and export ran on every kind and are kept once. An outcome that never ran (crashed,
    timeout: platform "any") is filed under its kind's native platform."""
    records, arts, seen, shas = [], [], set(), set()
    for kind in kinds:
        o = by_kind[kind]
        for r in o.records:
            if len(o.records) == 1 and r.platform == "any":
                r = dataclasses.replace(r, platform=native_platform(kind))
            if (r.stage, r.platform) not in seen:
                seen.add((r.stage, r.platform))
                records.append(r)
        for a in o.artifacts:
            if a.sha256 not in shas:
                shas.add(a.sha256)
                arts.append(a)
    outs = [by_kind[k] for k in kinds]
    first = outs[0]
    # the store drops the keys of a crashed/timed-out outcome (its worst status is the merged worst)
    return dataclasses.replace(first, records=tuple(records), artifacts=tuple(arts),
                               seconds=sum(o.seconds for o in outs),
                               worker=" ".join(dict.fromkeys(o.worker for o in outs if o.worker)),
                               result_key=None if any(o.result_key is None for o in outs) else first.result_key,
                               downstream_key=first.downstream_key,
                               deps_key=None if any(o.deps_key is None for o in outs) else first.deps_key,
                               deps=first.deps)


# --------------------------------------------------------------------------- sweep
