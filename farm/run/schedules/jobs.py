"""Running ``farm ARGS`` as a Ray job on a cluster (``farm sweep --submit``, ``submit = true``).

``ray.job_submission`` is imported inside ``submit``: it costs about 0.8 s at start-up
(measured with ``python -X importtime``), and only a submitted sweep needs it.
"""
from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

from farm.errors import ClusterError
from farm.run.schedules.config import ROOT, Log, _stderr


def submit(args: list[str], dashboard: str, *, working_dir: Path = ROOT, log: Log = _stderr,
           poll_s: float = 2.0) -> int:
    """Run ``farm ARGS`` as a Ray job on the cluster (the driver runs on the head).

    ``args`` must reach the cluster on their own: a ``--db`` the head can open. Without
    ``--address`` the job's driver joins the cluster it runs on (``--address auto``).
    Returns 0 when the job succeeded, 1 otherwise; the job's log is echoed as it grows.
    """
    from ray.job_submission import JobStatus, JobSubmissionClient  # lazy: ~0.8 s (module docstring)

    if "--address" not in args:
        args = [*args, "--address", "auto"]
    entrypoint = "python -m farm " + shlex.join(args)
    try:
        client = JobSubmissionClient(dashboard)
    except Exception as e:  # connection refused, bad token, not a dashboard
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ClusterError(f"cannot reach the Ray dashboard at {dashboard!r}: {msg}") from None
    runtime_env = {"working_dir": str(working_dir),
                   "excludes": [".venv", ".git", "*.db", "*.db-*", "bazel-*", "node_modules", "__pycache__",
                                "*.state.json", ".farm-schedule-*"],
                   "env_vars": {"RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1"}}
    job = client.submit_job(entrypoint=entrypoint, runtime_env=runtime_env)
    log(f"submitted Ray job {job} to {dashboard}: {entrypoint}")
    shown = 0
    terminal = {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}
    try:
        while True:
            status = client.get_job_status(job)
            logs = client.get_job_logs(job)
            if len(logs) > shown:
                sys.stderr.write(logs[shown:])
                sys.stderr.flush()
                shown = len(logs)
            if status in terminal:
                break
            time.sleep(poll_s)
    except KeyboardInterrupt:
        client.stop_job(job)
        log(f"stopped Ray job {job}")
        raise
    log(f"Ray job {job}: {status.value}")
    return 0 if status == JobStatus.SUCCEEDED else 1
