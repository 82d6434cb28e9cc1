"""The Ray actor: one per slot, imports jax once, streams one outcome per harness."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ray

from workers.runtime import JobRunner


@ray.remote(max_restarts=0, max_task_retries=0)
class HarnessWorker:
    """A long-lived worker. The driver replaces it when it dies, hangs or grows too big."""

    def __init__(self, catalog: str, modules: list[str], options: dict[str, Any], clear_every: int = 200) -> None:
        import os

        self.runner = JobRunner(catalog, modules, options, clear_every)
        self.runner.label = f"ray:{ray.get_runtime_context().get_node_id()[:12]}:{os.getpid()}"

    def info(self) -> dict[str, Any]:
        return self.runner.info()

    def run_batch(self, fps: list[str], reuse: dict[str, dict[str, Any]] | None = None) -> Iterator[dict[str, Any]]:
        yield from self.runner.run_batch(fps, reuse)
