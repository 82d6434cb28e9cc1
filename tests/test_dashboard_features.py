"""The export-feature × platform matrix (issue 43): the pure counting (``farm.analysis.features``)
and the dashboard page over a real sweep of the effects and export-features families, HTML
and JSON faces, with the run's own records as the check."""
from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from farm.analysis import features
from tests.helpers.dashboard import html

ROOT = Path(__file__).resolve().parents[1]


def _row(stage: str, platform: str, status: str, primitive: str = "sin", harness: str = "h", **facts: Any) -> dict:
    return {"stage": stage, "platform": platform, "status": status, "primitive": primitive, "harness": harness,
            "facts": facts}


def test_each_feature_is_a_row_each_platform_a_column_and_a_cell_is_coloured_by_its_worst() -> None:
    rows = [_row("export", "export", "ok"), _row("export", "export", "ok", harness="g"),
            _row("symbolic_call", "cpu", "ok"), _row("symbolic_call", "cpu", "fail", harness="g"),
            _row("effects_export", "cpu+cuda+rocm+tpu", "expected_fail", primitive="debug_print"),
            _row("export_feature", "cpu", "ok", primitive="donation", kind="donation"),
            _row("compile", "cpu", "fail")]  # not an export feature: not in the matrix
    m = features.matrix(rows)
    assert m["features"] == ["export (static shapes)", "symbolic shapes: calls", "effects: debug_print",
                             "export feature: donation"]
    assert m["columns"] == ["cpu", "export", "cpu+cuda+rocm+tpu"]
    assert m["cells"]["export (static shapes)"] == {"export": {"ok": 2}} and m["harnesses"]["export (static shapes)"] == 2
    assert m["worst"]["symbolic shapes: calls"] == {"cpu": "fail"}
    assert m["worst"]["effects: debug_print"] == {"cpu+cuda+rocm+tpu": "expected_fail"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    db = f"sqlite:///{tmp_path_factory.mktemp('features') / 'f.db'}"
    for family in ("effects", "export_features"):
        p = subprocess.run([sys.executable, "-m", "farm", "sweep", "--family", family, "--db", db, "--workers", "2",
                            "--name", f"f-{family}"],
                           cwd=ROOT, capture_output=True, text=True, timeout=600,
                           env={**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"})
        assert p.returncode == 0, p.stderr[-3000:]
    from dashboards.app import create_app

    app = create_app(db)
    yield app.test_client()
    app.config["STORE"].dispose()


@pytest.mark.slow(reason="its module fixture sweeps the effects and export-features families on Ray")
def test_the_page_counts_every_export_record_of_the_run(client: Any) -> None:
    m = client.get("/features.json?run=f-export_features").get_json()
    kinds = {f for f in m["features"] if f.startswith("export feature: ")}
    assert kinds == {f"export feature: {k}" for k in ("donation", "prng_key", "safety_check", "device_count")}
    assert m["cells"]["export feature: device_count"]["cpu+cuda+rocm+tpu"] == {"ok": 2}
    from farm.store import queries

    store = client.application.config["STORE"]
    with store.session() as sess:
        rows = queries.results(sess, queries.resolve_run(sess, "f-export_features").id)
    want = Counter(r["status"] for r in rows if r["stage"] in features.STAGES)
    got: Counter[str] = Counter()
    for cols in m["cells"].values():
        for counts in cols.values():
            got.update(counts)
    assert got == want and sum(want.values()) > 0
    eff = client.get("/features.json?run=f-effects").get_json()
    assert "effects: debug_print" in eff["features"] and eff["worst"]["effects: platform_dependent"]["cpu"] == "ok"
    page = html(client.get("/features?run=f-effects"))
    assert 'id="features"' in page and "effects: io_callback" in page and 'data-column="cpu+cuda+rocm+tpu"' in page
    assert client.get("/features.json?run=f-effects&status=bogus").status_code == 400
