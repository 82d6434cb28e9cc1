"""farm.pipeline.isolation: the one policy the Ray scheduler, the standalone worker and
farm repro apply to a job that hangs or kills its process."""
from __future__ import annotations

import jax.numpy as jnp

from farm import catalog
from farm.pipeline.isolation import Isolation


def _harness(**kw):
    return catalog.define("iso", "neg", lambda x: jnp.negative(x), [catalog.RandArg((3,), "float32")],
                          dtype="float32", catalog="isolation-test", **kw)


def test_a_fresh_process_gets_its_startup_time_and_a_harness_its_own_limit() -> None:
    policy = Isolation(timeout_s=10.0, startup_s=50.0)
    h = _harness()
    assert policy.limit(h, fresh=False) == 10.0
    assert policy.limit(h, fresh=True) == 60.0
    assert policy.limit(_harness(timeout_s=3.0), fresh=False) == 3.0


def test_a_death_is_retried_alone_then_crashed_judged_by_limitations() -> None:
    policy = Isolation(retries_alone=1)
    assert policy.retry(0) and not policy.retry(1)
    assert not Isolation(retries_alone=0).retry(0)
    plain = policy.crashed(_harness(), "exit code -6", ("cpu",))
    assert plain.worst == "crashed" and "exit code -6" in plain.records[0].error
    known = _harness(limitations=[catalog.Limitation("aborts on cpu", platforms=("cpu",), stage="run", crashes=True)])
    assert policy.crashed(known, "exit code -6", ("cpu",)).worst == "expected_fail"
    late = policy.timed_out(_harness(), 10.0)
    assert late.worst == "timeout" and "10s" in late.records[0].error
