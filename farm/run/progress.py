"""What a sweep is configured with, what it counts, and how it shows progress."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm  # ~25 ms: every sweep shows progress


@dataclass
class SweepConfig:
    workers: int | None = None  # None: every core (local) / every cpu_slot (cluster)
    address: str | None = None
    #: the most harnesses one batch (one Ray task) holds; None: sized to ``batch_s`` seconds
    #: of a worker's time as the sweep measures it (``farm.run.batching.FIRST_BATCH`` before
    #: anything was timed, at most ``MAX_BATCH``)
    batch: int | None = None
    batch_s: float = 1.0
    timeout_s: float = 120.0
    startup_s: float = 120.0
    recycle_after: int = 1500  # harnesses per worker process before it is replaced
    rss_budget: int = 2_000_000_000  # bytes; a worker above this is replaced
    commit_every_s: float = 1.0
    modules: tuple[str, ...] = ()
    progress: bool | None = None  # None: a bar on a TTY, periodic lines otherwise
    env: dict[str, str] = field(default_factory=dict)  # extra environment for worker processes
    gpu_fraction: float = 0.25  # the share of one GPU each gpu worker holds (Ray num_gpus)
    gpu_backend: str = "cuda"  # what a gpu worker's JAX_PLATFORMS pins it to: cuda, rocm or auto (no pin)
    #: seconds of running after the first outcome (the workers are up), past which no batch is
    #: handed out and what is queued is dropped (a fuzz campaign's budget); None: run everything
    budget_s: float | None = None
    keep_order: bool = False  # run harnesses in the order given (a fuzz campaign's families interleaved)
    #: seconds a finished outcome may wait in its worker for others to travel with it in one
    #: object (``workers.chunks``); 0: one object per harness
    window_s: float = 0.2


@dataclass
class SweepStats:
    done: int = 0
    cached: int = 0
    crashed: int = 0
    timeouts: int = 0
    workers_replaced: int = 0
    workers_started: int = 0  # worker processes asked for, replacements included
    peak_rss: dict[int, int] = field(default_factory=dict)
    bad: int = 0
    wall_s: float = 0.0
    dedup_hits: int = 0
    downstream_reused: int = 0  # re-traced and re-lowered; compile, execute and compare reused
    install_digest_s: float = 0.0
    #: worker label ("ray:<node>:<pid>", what each outcome row's ``worker`` names) -> that
    #: worker process's own environment (versions, jaxlib revision, plugins, devices, pinned backend)
    worker_envs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"done": self.done, "cached": self.cached, "downstream_reused": self.downstream_reused,
                "install_digest_s": round(self.install_digest_s, 3),
                "crashed": self.crashed, "timeouts": self.timeouts,
                "workers_replaced": self.workers_replaced, "workers_started": self.workers_started, "bad": self.bad, "wall_s": round(self.wall_s, 3),
                "peak_rss_per_worker": max(self.peak_rss.values(), default=0),
                "workers_seen": len(self.peak_rss), "worker_environments": self.worker_envs}


class Progress:
    """A tqdm bar on a TTY; a plain line every few seconds otherwise (CI logs)."""

    def __init__(self, total: int, enabled: bool | None = None, every_s: float = 10.0) -> None:
        self.total, self.n, self.bad = total, 0, 0
        self.t0 = time.monotonic()
        self.last = self.t0
        self.every_s = every_s
        tty = sys.stderr.isatty() if enabled is None else enabled
        self.bar = tqdm(total=total, unit="harness", dynamic_ncols=True, file=sys.stderr) if tty else None

    def update(self, n: int, bad: int) -> None:
        self.n += n
        self.bad += bad
        if self.bar is not None:
            self.bar.update(n)
            self.bar.set_postfix(failures=self.bad, refresh=False)
            return
        now = time.monotonic()
        if now - self.last >= self.every_s or self.n == self.total:
            self.last = now
            el = now - self.t0
            rate = self.n / el if el else 0.0
            eta = (self.total - self.n) / rate if rate else float("inf")
            print(f"[farm] {self.n}/{self.total} harnesses, {rate:.1f}/s, ETA {eta:.0f}s, failures {self.bad}",
                  file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
