"""The lowered-on × run-on tables (pure functions over result rows)."""
from __future__ import annotations

from farm.analysis.crosshost import matrix, slowest, summarize


def _row(harness: str, stage: str, platform: str, status: str, *, dtype: str = "float32", facts=None,  # noqa: ANN001
         metrics=None) -> dict:  # noqa: ANN001
    return {"harness": harness, "primitive": harness.split("_")[0], "dtype": dtype, "stage": stage,
            "platform": platform, "status": status, "facts": facts or {}, "metrics": metrics or {}, "error": None}


def _x(harness: str, dtype: str = "float32", **vs: str) -> dict:
    st = "fail" if "fail" in vs.values() and vs.get("invariant") != "ok" else "ok"
    return _row(harness, "xhost", "cuda", st, dtype=dtype, facts={f"vs_{k}": v for k, v in vs.items()},
                metrics={"cpu_host_max_rel_err": 0.5})


def test_matrix_counts_each_comparison_and_lists_real_disagreements() -> None:
    rows = [
        _row("sin_f32", "compare", "cuda", "ok"), _row("dot_f32", "compare", "cuda", "fail"),
        _x("sin_f32", reference="ok", cpu_host="ok", native="ok"),
        _x("dot_f32", reference="fail", cpu_host="fail", native="ok"),
        _x("svd_f32", reference="skipped", cpu_host="fail", native="ok", invariant="ok"),
        _x("exp_f16", dtype="float16", reference="ok", cpu_host="ok", native="ok"),
        _row("broken", "xhost", "cuda", "error"),
    ]
    m = matrix(rows)
    assert m["device_lowering"]["reference"] == {"ok": 1, "fail": 1}
    assert m["cpu_host_artifact"]["cpu_host"] == {"ok": 2, "fail": 2, "error": 1}
    assert m["cpu_host_artifact"]["invariant"] == {"ok": 1}
    assert m["cpu_host_artifact_vs_cpu_host_by_dtype"]["float16"] == {"ok": 1}
    # svd differs from the CPU host only by sign (its invariant holds): not a disagreement
    assert sorted(f["harness"] for f in m["disagreements"]) == ["broken", "dot_f32"]
    assert next(f for f in m["disagreements"] if f["harness"] == "dot_f32")["against"] == "reference,cpu_host"


def test_slowest_orders_by_compile_plus_execute_on_the_platform() -> None:
    rows = [_row("a", "compile", "cuda", "ok", metrics={"compile_s": 0.1}),
            _row("a", "execute", "cuda", "ok", metrics={"execute_s": 0.01, "device_peak_bytes_in_use": 1024}),
            _row("b", "compile", "cuda", "ok", metrics={"compile_s": 0.3}),
            _row("c", "compile", "cpu", "ok", metrics={"compile_s": 9.0})]
    assert [d["harness"] for d in slowest(rows, "cuda")] == ["b", "a"]
    assert slowest(rows, "cuda")[1]["device_peak_bytes"] == 1024
    s = summarize(rows)
    assert s["worst"] == {"ok": 3} and s["stages"]["compile/cuda"] == {"ok": 2}
