"""The one outcome codec (``farm.formats.outcomes``): a real worker's typed outcome crosses
every hop (Ray's chunks, a child's pipe, a journal, a bundle) and comes back the same, and
the worker's stamp reaches the driver but no journal or bundle."""
from __future__ import annotations

from collections import deque

import pytest

from farm import catalog
from farm.formats import bundles, journal, outcomes
from farm.results import Options, Outcome, Record, Stamp
from farm.run.cluster import Worker
from farm.run.progress import Progress, SweepConfig
from farm.run.scheduler import Sweep
from workers.chunks import decode, encode


@pytest.fixture(scope="module")
def stamped() -> Outcome:
    """sin float32 through a real worker runner: records, an export artifact and its stamp."""
    from workers.runtime import JobRunner

    h = catalog.select(catalog.Filters.parse(primitive="sin", dtype="float32"))[0]
    runner = JobRunner("farm", [], {"platforms": ["cpu", "cuda"], "run_on": ["cpu"], "repeats": 1})
    return runner.run_one(h.fingerprint)


def test_a_worker_hands_over_a_typed_outcome_stamped_with_its_process(stamped: Outcome) -> None:
    import os

    assert isinstance(stamped, Outcome) and stamped.records and stamped.artifacts
    assert stamped.stamp is not None and stamped.stamp.pid == os.getpid() and stamped.stamp.rss > 0
    assert stamped.stamp.environment and stamped.stamp.environment["platform"] == "cpu"  # the first outcome
    assert stamped.worker.startswith("standalone:")


def test_chunks_and_pipes_give_back_the_same_outcome_stamp_included(stamped: Outcome) -> None:
    (back,) = decode(encode([stamped]))
    assert back.to_dict() == stamped.to_dict() and back.stamp == stamped.stamp
    assert [a.data for a in back.artifacts] == [a.data for a in stamped.artifacts]  # raw bytes, not base64
    two = outcomes.unpack(outcomes.pack([stamped, stamped.replace(name="other", stamp=None)]))
    assert [o.name for o in two] == [stamped.name, "other"] and two[1].stamp is None


def test_json_keeps_everything_but_the_stamp_and_artifacts_travel_as_base64(stamped: Outcome) -> None:
    doc = outcomes.to_json(stamped)
    assert "stamp" not in doc and all(isinstance(a["data"], str) for a in doc["artifacts"])
    back = outcomes.from_json(doc)
    assert back.to_dict() == stamped.replace(stamp=None).to_dict()
    changed = outcomes.from_json({**doc, "artifacts": [{**doc["artifacts"][0], "data": "AAAA"}]})
    assert changed.artifacts[0].data != stamped.artifacts[0].data  # what is read is what was written


def test_a_bundle_and_a_journal_read_back_the_outcome_the_worker_made(stamped: Outcome, tmp_path) -> None:  # noqa: ANN001
    from farm.run.bundles import from_json

    h = next(x for x in catalog.select(catalog.Filters.parse(primitive="sin", dtype="float32"))
             if x.fingerprint == stamped.fingerprint).describe()
    env = dict(stamped.stamp.environment)
    path = str(tmp_path / "b.json.gz")
    bundles.write(path, environment=env, run={"name": "r"}, harnesses=[h], outcomes=[stamped])
    (o,) = [from_json(d) for d in bundles.read(path)["outcomes"]]
    assert o.to_dict() == stamped.replace(stamp=None).to_dict()
    j = journal.Journal(journal.path_for(path), {"job": "j", "run": {"name": "r"}})
    j.append(h, stamped, env)
    j.close()
    (o,) = [from_json(d) for d in journal.read(journal.path_for(path))["outcomes"]]
    assert o.to_dict() == stamped.replace(stamp=None).to_dict()


class _H:
    fingerprint, name, family, group, dtype = "fp0", "h0", "f", "g", "float32"


def test_the_driver_reads_the_stamp_and_buffers_the_outcome_for_the_store(monkeypatch) -> None:  # noqa: ANN001
    sw = Sweep([_H()], Options(), "farm", SweepConfig(workers=1, progress=False, rss_budget=10_000),  # type: ignore[list-item]
               lambda os_, w: None)
    sw.pending["cpu"] = deque()
    sw.progress = Progress(1, False)
    slot = Worker(None, batch=[_H()], fresh=False)  # type: ignore[list-item]
    out = Outcome("fp0", "h0", (Record("trace", "any", "ok"),), worker="ray:n:7",
                  stamp=Stamp(7, 20_000, {"host": "n", "platform": "cpu"}))
    replaced: list[Worker] = []
    monkeypatch.setattr(sw, "_replace", lambda s: (replaced.append(s), s)[1])
    sw._collect(slot, decode(encode([out])), 1000.0)  # what cluster.fetch hands over: a decoded chunk
    assert sw.stats.worker_envs["ray:n:7"]["host"] == "n" and "fingerprint" in sw.stats.worker_envs["ray:n:7"]
    assert sw.stats.peak_rss == {7: 20_000}
    assert replaced == [slot]  # past its memory budget: recycled
    (buffered,) = sw.buffer
    assert buffered.records == out.records and buffered.worker == "ray:n:7"
