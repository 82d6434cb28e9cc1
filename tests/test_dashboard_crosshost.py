"""The cross-host page: an imported device-host run shown as the lowered-on × run-on table."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from farm import catalog

from farm.run import bundles as bundle
from farm.host import describe
from farm.pipeline import run_harness
from farm.results import Options
from farm.stages.xhost import Prior

pytestmark = pytest.mark.skipif(__import__("jax").default_backend() != "cpu", reason="CPU-host path")


def test_crosshost_page_shows_the_matrix_and_a_planted_disagreement(sqlite_url: str, tmp_path) -> None:  # noqa: ANN001
    from dashboards.app import create_app

    opts = Options(platforms=("cpu",), run_on=("cpu",), crossexec=False, repeats=1)
    hs = catalog.select(catalog.Filters.parse(group="sin,exp", dtype="float32"))
    outcomes = []
    for h in hs:
        first = run_harness(h, opts)
        export = next(a for a in first.artifacts if a.kind == "export")
        io_art = next(a for a in first.artifacts if a.kind == "io")
        prior = Prior.from_blobs(export.data, io_art.data, {"jax_version": "0.10.2"})
        if h.primitive == "exp":  # the "CPU host" got other numbers: a disagreement to show
            prior = replace(prior, outputs=[o * np.float32(2) for o in prior.outputs])
        outcomes.append(run_harness(h, opts, prior))
    path = str(tmp_path / "b.json.gz")
    bundle.write(path, environment=describe(), run={"name": "dev", "catalog": "farm", "platforms": ["cpu"],
                                                    "run_on": ["cpu"]},
                 harnesses=[h.describe() for h in hs], outcomes=outcomes)
    from farm.store import open_store

    bundle.import_bundle(open_store(sqlite_url), path, name="device-host")
    client = create_app(sqlite_url).test_client()
    page = client.get("/crosshost?run=device-host&platform=cpu")
    assert page.status_code == 200
    html = page.data.decode()
    assert 'id="matrix"' in html and "CPU host (artifact)" in html
    data = client.get("/crosshost.json?run=device-host&platform=cpu").json
    assert data["matrix"]["cpu_host_artifact"]["cpu_host"] == {"ok": 1, "fail": 1}
    assert [f["harness"] for f in data["matrix"]["disagreements"]] == [h.name for h in hs if h.primitive == "exp"]
    assert data["matrix"]["cpu_host_artifact"]["native"] == {"ok": 2}
