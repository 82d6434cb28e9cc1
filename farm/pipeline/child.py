"""One child process that answers requests one at a time, under the ``Isolation`` policy:
what the standalone worker (``workers.standalone``), the fuzz probe (``farm.fuzz.probe``)
and the reducer's candidate worker (``farm.repro.candidate``) run their jobs in.

The child is spawned (``multiprocessing``'s ``spawn``: no forked jax state) with one end of
a pipe; it reads requests from it and writes one answer to each. With ``hello`` it first
writes one message of its own (what it found at start-up) and the runner waits
``policy.startup_s`` for it; without, the first request's limit holds the start-up
(``policy.limit(job, fresh=True)``). A request's answer is ``Ended``: ``finished`` with the
child's answer, ``died`` with its exit code (negative: the signal that killed it), or
``timed out`` (the child is killed); after a death or a timeout the next request starts a
new child. The child process is always reaped: no zombie is left.

Only the standard library here: a standalone worker runs on a device host with jax alone.

Example::

    child = Child(_serve, (catalog,), Isolation(timeout_s=60.0, startup_s=180.0), hello=True, what="repro worker")
    child.start()
    ended = child.ask(("run", job))
    if ended.finished:
        use(ended.output)
    child.stop()
"""
from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from farm.pipeline.isolation import Isolation

FINISHED, DIED, TIMED_OUT = "finished", "died", "timed out"


@dataclass(frozen=True, slots=True)
class Ended:
    """How one request to a child ended: ``how`` is ``finished`` (``output``: the child's
    answer), ``died`` (``exitcode``: the child's, negative for a signal; None if it could
    not be read) or ``timed out`` (after ``limit_s`` seconds; the child was killed)."""

    how: str
    limit_s: float
    output: Any = None
    exitcode: int | None = None

    @property
    def finished(self) -> bool:
        return self.how == FINISHED

    @property
    def signal(self) -> int | None:
        """The signal that killed the child (``died`` only), else None."""
        return -self.exitcode if self.how == DIED and self.exitcode is not None and self.exitcode < 0 else None


class Child:
    """A spawned child process running ``target(conn, *args)``; restarted after a death or a timeout.

    Args:
        target: the child's function (importable by name: the child is spawned); it reads
            requests with ``conn.recv()`` until ``None`` and sends one answer each.
        args: its arguments after the connection (picklable).
        policy: the time limits (``limit``, ``startup_s``).
        hello: whether the child sends a message of its own before serving (``start`` returns it).
        what: the child's name in errors (``RuntimeError("repro worker did not start")``).
    """

    def __init__(self, target: Callable[..., None], args: tuple[Any, ...], policy: Isolation, *,
                 hello: bool = False, what: str = "child process") -> None:
        self.target = target
        self.args = args
        self.policy = policy
        self.hello = hello
        self.what = what
        self.proc: Any = None
        self.conn: Any = None
        self.fresh = False  # no answer yet from a child that sent no hello: its start-up is in the clock

    @property
    def running(self) -> bool:
        return self.proc is not None

    def start(self) -> Any:
        """Spawn the child; with ``hello``, wait for its first message and return it.

        Raises:
            RuntimeError: the child sent no hello within ``policy.startup_s``, or died first.
        """
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=self.target, args=(child, *self.args), daemon=True)
        try:
            self.proc.start()
        except BaseException:  # never started (a main module without its __main__ guard): nothing to kill
            self.proc = self.conn = None
            raise
        finally:
            child.close()
        self.fresh = not self.hello
        if not self.hello:
            return None
        try:
            if self.conn.poll(self.policy.startup_s):
                return self.conn.recv()
        except (EOFError, OSError):
            pass
        self.kill()
        raise RuntimeError(f"{self.what} did not start")

    def ask(self, request: Any, limit_s: float | None = None) -> Ended:
        """Send ``request`` and wait for the answer, at most ``limit_s`` seconds (default: the
        policy's ``limit``, with the start-up while the child is fresh); a child is started
        first if none runs (or the last one ended between requests)."""
        if self.proc is not None and not self.proc.is_alive():
            self.kill()
        if self.proc is None:
            self.start()
        limit = self.policy.limit(None, fresh=self.fresh) if limit_s is None else limit_s
        try:
            self.conn.send(request)
            if self.conn.poll(limit):
                out = self.conn.recv()
                self.fresh = False
                return Ended(FINISHED, limit, out)
        except (EOFError, OSError):
            self.proc.join(5)  # reaped: its exit code (the signal) says how it died
            code = self.proc.exitcode
            self.kill()
            return Ended(DIED, limit, exitcode=code)
        self.kill()
        return Ended(TIMED_OUT, limit)

    def kill(self) -> None:
        """Kill the child now and reap it."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.join(5)
            self.conn.close()
        self.proc = self.conn = None

    def stop(self, grace_s: float = 0.0) -> None:
        """End the child: with ``grace_s``, ask it to return (a ``None`` request) and wait that
        long before it is killed."""
        if self.proc is not None and grace_s > 0 and self.proc.is_alive():
            try:
                self.conn.send(None)
                self.proc.join(grace_s)
            except OSError:
                pass
        self.kill()
