"""The primitive × target support matrix (``farm.analysis.pallas_matrix``, docs/pallas.md): the pure
function on hand-made records, two runs' matrices diffed, and its faces, ``farm pallas-matrix``
(md and json, ``--against``) and the ``/pallas/prims`` page's JSON, over records written to a store."""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from farm.analysis import pallas_matrix as pm


def _rec(harness: str, stage: str, platform: str, status: str, *, primitive: str = "exp", dtype: str = "float32",
         family: str = "pallas_prims", limitation: str | None = None, error: str | None = None) -> dict[str, Any]:
    return {"harness": harness, "stage": stage, "platform": platform, "status": status, "primitive": primitive,
            "dtype": dtype, "family": family, "error_type": "NotImplementedError" if error else None, "error": error,
            "facts": {"limitation": limitation} if limitation else {}}


def _records() -> list[dict[str, Any]]:
    out = []
    for h, dt in (("exp_tile", "float32"), ("exp_lane", "float32"), ("exp_bf16", "bfloat16")):
        out += [_rec(h, "trace", "any", "ok", dtype=dt), _rec(h, "compare", "cpu", "ok", dtype=dt),
                _rec(h, "pallas_export", "tpu:v5e", "ok", dtype=dt), _rec(h, "pallas_export", "tpu:v4", "ok", dtype=dt),
                _rec(h, "pallas_export", "cuda:mosaic_gpu", "skipped", dtype=dt, error="no switch"),
                _rec(h, "lower", "tpu", "ok", dtype=dt)]  # not a matrix record: ordinary cross-lowering
    out += [_rec("exp_tile", "pallas_export", "cuda:triton", "ok"),
            _rec("exp_lane", "pallas_export", "cuda:triton", "expected_fail", limitation="Triton needs power-of-two"),
            _rec("exp_bf16", "pallas_export", "cuda:triton", "error", dtype="bfloat16", error="unsupported types")]
    out += [_rec("cbrt_tile", "trace", "any", "ok", primitive="cbrt"),
            _rec("cbrt_tile", "compare", "cpu", "fail", primitive="cbrt", error="3 elements differ"),
            _rec("cbrt_tile", "pallas_export", "tpu:v5e", "expected_fail", primitive="cbrt",
                 limitation="Mosaic TPU has no lowering rule for cbrt"),
            _rec("cbrt_tile", "pallas_export", "tpu:v4", "expected_fail", primitive="cbrt",
                 limitation="Mosaic TPU has no lowering rule for cbrt"),
            _rec("other", "pallas_export", "tpu:v5e", "error", primitive="softmax", family="pallas_ops", error="x")]
    return out


def test_rows_are_primitive_by_dtype_columns_interpret_then_targets_and_cells_count_with_reasons() -> None:
    m = pm.matrix(_records())
    assert m["columns"] == [pm.INTERPRET, "tpu:v4", "tpu:v5e", "cuda:mosaic_gpu", "cuda:triton"]
    labels = [pm.row_label(r) for r in m["rows"]]
    assert labels == ["cbrt float32", "exp bfloat16", "exp float32"]  # another family's kernel is not a row
    exp32 = m["rows"][2]
    assert exp32["harnesses"] == 2
    assert exp32["cells"]["cuda:triton"]["counts"] == {"ok": 1, "expected_fail": 1}
    assert exp32["cells"]["cuda:triton"]["worst"] == "expected_fail"
    assert exp32["cells"]["cuda:triton"]["why"] == {"Triton needs power-of-two": 1}
    assert exp32["cells"][pm.INTERPRET] == {"worst": "ok", "counts": {"ok": 2}, "why": {}}  # one per harness
    cbrt = m["rows"][0]
    assert cbrt["cells"][pm.INTERPRET]["worst"] == "fail"  # the harness's worst interpret-mode record
    assert cbrt["cells"]["tpu:v5e"]["why"] == {"Mosaic TPU has no lowering rule for cbrt": 1}
    assert "cuda:triton" not in cbrt["cells"]  # not lowered for it: no cell
    assert m["rows"][1]["cells"]["cuda:triton"]["worst"] == "error"
    assert m["totals"]["tpu:v5e"] == {"ok": 3, "expected_fail": 1}
    assert m["reasons"]["Mosaic TPU has no lowering rule for cbrt"] == 2
    collapsed = pm.matrix(_records(), by="primitive")
    assert [r["primitive"] for r in collapsed["rows"]] == ["cbrt", "exp"]
    assert collapsed["rows"][1]["harnesses"] == 3
    assert collapsed["rows"][1]["cells"]["cuda:triton"]["counts"] == {"ok": 1, "expected_fail": 1, "error": 1}
    assert pm.matrix(_records(), family=None)["rows"][-1]["primitive"] == "softmax"
    with pytest.raises(ValueError):
        pm.matrix(_records(), by="layout")


def test_markdown_merges_agreeing_tpu_generations_and_numbers_each_reason() -> None:
    m = pm.matrix(_records())
    md = pm.markdown(m)
    head = md.splitlines()[0]
    assert "tpu v4…v5e (2)" in head and "tpu:v4" not in head  # the two generations agree on every row
    assert "tpu:v4" in pm.markdown(m, merge_tpu=False).splitlines()[0]
    row = next(line for line in md.splitlines() if line.startswith("| exp float32 "))
    assert "ok 1 xf 1 [" in row  # mixed cell: each status with its count, and its note
    note = next(line for line in md.splitlines() if line.endswith("Triton needs power-of-two"))
    assert note.startswith("[")
    assert pm.cell_text(None) == "." and pm.cell_text({"counts": {"skipped": 2}}) == "skip"


def test_the_diff_of_two_runs_names_each_changed_cell_and_the_columns_and_rows_of_one_side_only() -> None:
    before = pm.matrix(_records())
    later = [r for r in _records() if r["platform"] != "cuda:mosaic_gpu"]
    later = [({**r, "status": "ok", "error": None} if r["harness"] == "exp_bf16" and r["platform"] == "cuda:triton"
              else r) for r in later]
    later.append(_rec("log_tile", "pallas_export", "tpu:v5e", "ok", primitive="log"))
    d = pm.diff(before, pm.matrix(later))
    assert d["columns_only_before"] == ["cuda:mosaic_gpu"] and d["columns_only_after"] == []
    assert d["rows_only_after"] == ["log float32"]
    assert d["changed"] == [{"row": "exp bfloat16", "column": "cuda:triton",
                             "before": {"worst": "error", "counts": {"error": 1}},
                             "after": {"worst": "ok", "counts": {"ok": 1}}}]
    assert pm.diff(before, before)["changed"] == []
    assert "1 cells changed" in pm.diff_markdown(d, "a", "b")


# ---- the faces, over real records of three harnesses written to a store

NAMES = ("prims.exp_float32_16x256_layout=tile", "prims.exp_float32_16x130_layout=lane",
         "prims.cbrt_float32_16x256_layout=tile")
#: A kernel of the feature family (its interpret-mode lowering is a limitation: a finding).
FEATURE = "features.named_grid_float32_16x256"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from farm import catalog
    from farm.host import describe
    from farm.pipeline import run_harness
    from farm.results import Options
    from farm.store import open_store, writes

    url = f"sqlite:///{tmp_path_factory.mktemp('prims') / 'p.db'}"
    hs = catalog.select(catalog.Filters(catalog="pallas", family=("pallas_prims",), name=NAMES))
    assert len(hs) == 3
    hs += catalog.select(catalog.Filters(catalog="pallas", family=("pallas_features",), name=(FEATURE,)))
    assert len(hs) == 4
    store = open_store(url)
    for name, targets in (("older", ("tpu:v5e",)), ("newer", ("tpu:v5e", "cuda:triton"))):
        opts = Options(repeats=1, platforms=("cpu", "cuda", "tpu"), crossexec=False, pallas_targets=targets)
        outs = [run_harness(h, opts) for h in hs]
        with store.session() as s:
            run = writes.create_run(s, env=describe(), name=name, platforms=["cpu", "cuda", "tpu"], run_on=["cpu"],
                                    total=len(hs))
            writes.Writer(s, run, writes.harness_ids(s, hs)).write(outs)
            writes.finish_run(s, run, "finished")
    store.dispose()
    yield url


def test_the_cli_prints_the_matrix_as_markdown_and_json_and_diffs_two_runs(db: str, capsys: Any) -> None:
    from farm.cli import main

    assert main(["pallas-matrix", "--db", db, "--run", "newer", "--format", "json"]) == 0
    m = json.loads(capsys.readouterr().out)
    assert m["run"] == "newer" and m["columns"] == [pm.INTERPRET, "tpu:v5e", "cuda:triton"]
    cells = {pm.row_label(r): r["cells"] for r in m["rows"]}
    assert cells["exp float32"]["tpu:v5e"]["counts"] == {"ok": 2}
    assert cells["exp float32"]["cuda:triton"]["counts"] == {"ok": 1, "expected_fail": 1}  # (8, 130): not a power of 2
    assert cells["exp float32"][pm.INTERPRET]["counts"] == {"ok": 2}
    assert cells["cbrt float32"]["tpu:v5e"]["why"] == {"Mosaic TPU has no lowering rule for cbrt": 1}
    assert not {s for row in cells.values() for c in row.values() for s in c["counts"]} - {"ok", "expected_fail"}
    assert main(["pallas-matrix", "--db", db, "--run", "newer"]) == 0
    md = capsys.readouterr().out
    assert "| exp float32 | 2 | ok | ok | ok 1 xf 1 [" in md and "Triton needs power-of-two block shapes" in md
    assert main(["pallas-matrix", "--db", db, "--run", "newer", "--against", "older", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["before"] == "older" and d["columns_only_after"] == ["cuda:triton"] and d["changed"] == []


def test_the_page_serves_the_matrix_and_the_diff_as_json(db: str) -> None:
    from dashboards.app import create_app

    app = create_app(db)
    try:
        client = app.test_client()
        m = client.get("/pallas/prims.json?run=newer&by=primitive").get_json()
        assert m["columns"] == [pm.INTERPRET, "tpu:v5e", "cuda:triton"] and m["by"] == "primitive"
        assert [r["label"] for r in m["rows"]] == ["cbrt", "exp"]
        assert m["rows"][1]["cells"]["cuda:triton"]["text"] == "ok 1 xf 1"
        d = client.get("/pallas/prims.json?run=newer&against=older").get_json()
        assert d["against"]["name"] == "older" and d["diff"]["columns_only_after"] == ["cuda:triton"]
        page = client.get("/pallas/prims?run=newer")
        assert page.status_code == 200 and b'id="pallas-prims"' in page.data and b"no lowering rule for cbrt" in page.data
        assert client.get("/pallas/prims.json?run=newer&by=layout").status_code == 400
        # another family's rows: the feature x target matrix; the primitives' page leaves them out
        f = client.get("/pallas/prims.json?run=newer&family=pallas_features&by=primitive").get_json()
        assert f["family"] == "pallas_features" and [r["label"] for r in f["rows"]] == ["named_grid"]
        assert f["rows"][0]["cells"]["tpu:v5e"]["text"] == "ok"
        assert f["rows"][0]["cells"][pm.INTERPRET]["counts"] == {"expected_fail": 1}
        assert "named_grid" not in {r["label"] for r in m["rows"]}
        page = client.get("/pallas/prims?run=newer&family=pallas_features")
        assert page.status_code == 200 and b"family-pallas_features" in page.data and b"named_grid" in page.data
        assert client.get("/pallas/prims.json?run=newer&family=elementwise_unary").status_code == 400
    finally:
        app.config["STORE"].dispose()
