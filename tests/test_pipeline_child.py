"""farm.pipeline.child: one child process under the Isolation policy: an answer, a death (exit
code or signal), a timeout kill; a lost child is replaced and always reaped (no zombie)."""
from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest

from farm.pipeline.child import DIED, FINISHED, TIMED_OUT, Child
from farm.pipeline.isolation import Isolation


def _serve(conn: Any, hello: bool, slow_start_s: float = 0.0) -> None:  # the child
    time.sleep(slow_start_s)
    if hello:
        conn.send(("ready", os.getpid()))
    while True:
        req = conn.recv()
        if req is None:
            return
        if req == "exit":
            os._exit(3)
        if req == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        if req == "hang":
            time.sleep(600)
        conn.send((req, os.getpid()))


def _reaped(pid: int) -> bool:
    """Whether ``pid`` (a child of this process) is gone, not left as a zombie."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


@pytest.fixture
def child() -> Any:
    c = Child(_serve, (False,), Isolation(timeout_s=30.0, startup_s=30.0))
    yield c
    c.stop()


def test_an_answer_is_finished_with_the_output(child: Child) -> None:
    ended = child.ask("x")
    assert ended.how == FINISHED and ended.finished and ended.output[0] == "x"
    assert ended.limit_s == 60.0  # the first request of a child without hello holds its start-up
    again = child.ask("y")
    assert again.output[1] == ended.output[1] and again.limit_s == 30.0  # the same process, now warm


def test_a_hello_is_waited_for_and_not_counted_in_the_first_limit() -> None:
    c = Child(_serve, (True,), Isolation(timeout_s=30.0, startup_s=30.0), hello=True)
    try:
        kind, pid = c.start()
        assert kind == "ready"
        ended = c.ask("x")
        assert ended.output == ("x", pid) and ended.limit_s == 30.0
    finally:
        c.stop()


def test_no_hello_within_the_start_up_is_an_error_and_the_child_is_reaped() -> None:
    c = Child(_serve, (True, 30.0), Isolation(startup_s=0.5), hello=True, what="test worker")
    with pytest.raises(RuntimeError, match="test worker did not start"):
        c.start()
    assert not c.running


@pytest.mark.parametrize("req, code, sig", [("exit", 3, None), ("segv", -signal.SIGSEGV, signal.SIGSEGV)])
def test_a_death_reports_its_exit_code_or_signal_and_the_next_request_gets_a_new_child(
        child: Child, req: str, code: int, sig: int | None) -> None:
    pid = child.ask("warm").output[1]
    ended = child.ask(req)
    assert (ended.how, ended.exitcode, ended.signal) == (DIED, code, sig) and not ended.finished
    assert not child.running and _reaped(pid)
    after = child.ask("x")
    assert after.finished and after.output[1] != pid


def test_a_timeout_kills_the_child_and_reaps_it(child: Child) -> None:
    pid = child.ask("warm").output[1]
    t0 = time.monotonic()
    ended = child.ask("hang", limit_s=0.5)
    assert (ended.how, ended.limit_s, ended.exitcode) == (TIMED_OUT, 0.5, None)
    assert time.monotonic() - t0 < 10
    assert not child.running and _reaped(pid)


def test_a_child_that_ended_between_requests_is_replaced_before_the_next(child: Child) -> None:
    pid = child.ask("warm").output[1]
    os.kill(pid, signal.SIGKILL)
    child.proc.join(5)
    ended = child.ask("x")
    assert ended.finished and ended.output[1] != pid and _reaped(pid)


def test_stop_with_grace_lets_the_child_return() -> None:
    c = Child(_serve, (False,), Isolation(timeout_s=30.0, startup_s=30.0))
    c.ask("warm")
    proc = c.proc
    c.stop(grace_s=10.0)
    assert proc.exitcode == 0 and not c.running
