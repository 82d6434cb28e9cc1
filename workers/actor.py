"""The Ray actor: one per slot, imports jax once, streams its outcomes in chunks (``workers.chunks``)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ray

from workers.chunks import WINDOW_S, harness_thread, stream
from workers.runtime import JobRunner

#: Variables Ray sets to hand an actor its accelerators.
VISIBLE_VARS = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "TPU_VISIBLE_CHIPS")


@ray.remote(max_restarts=0, max_task_retries=0)
class HarnessWorker:
    """A long-lived worker. The driver replaces it when it dies, hangs or grows too big."""

    def __init__(self, catalog: str, modules: list[str], options: dict[str, Any], clear_every: int = 200) -> None:
        import os

        #: every job, and the set-up, run on this one thread (``chunks.harness_thread``)
        self.thread = harness_thread()
        self.runner = self.thread.submit(JobRunner, catalog, modules, options, clear_every).result()
        ctx = ray.get_runtime_context()
        self.runner.label = f"ray:{ctx.get_node_id()[:12]}:{os.getpid()}"
        # what Ray gave this actor, kept with its environment (the driver records it per worker)
        self.runner.placement = {
            "resources": ctx.get_assigned_resources(), "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "node_id": ctx.get_node_id(),
            **{v: os.environ[v] for v in VISIBLE_VARS if v in os.environ}}

    def ready(self) -> bool:
        """Answered once ``__init__`` (jax, the catalog) is done: the driver starts a job's
        clock from here, not from the actor's creation."""
        return True

    def info(self) -> dict[str, Any]:
        """The runner's info, with the Ray resources this actor holds (``{"GPU": 0.25}``...)."""
        ctx = ray.get_runtime_context()
        return {**self.thread.submit(self.runner.info).result(), "ray_resources": ctx.get_assigned_resources(),
                "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}

    def run_batch(self, fps: list[str], reuse: dict[str, dict[str, Any]] | None = None,
                  jobs: list[Any] | None = None, window_s: float = WINDOW_S) -> Iterator[bytes]:
        """The batch's outcomes in order, in chunks of those that finished within ``window_s``."""
        yield from stream(lambda: self.runner.run_batch(fps, reuse, jobs), self.thread, window_s)
