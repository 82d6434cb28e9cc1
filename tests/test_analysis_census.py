"""Stage × platform × status counts and the plugin-boundary census (pure)."""
from __future__ import annotations

from farm.analysis.census import boundary, render_text, stage_table


def test_stage_table_and_boundary_counts() -> None:
    table = stage_table([("lower", "cpu", "ok", 3), ("lower", "tpu", "error", 1), ("census", "cuda", "fail", 2)])
    assert table == {"lower": {"cpu": {"ok": 3}, "tpu": {"error": 1}}, "census": {"cuda": {"fail": 2}}}
    rows = [
        {"platform": "cuda", "primitive": "asin", "facts": {"non_stablehlo": ["chlo.asin"], "custom_calls": []}},
        {"platform": "cuda", "primitive": "eig", "facts": {"non_stablehlo": [], "custom_calls": ["cuhybrid_eig"],
                                                           "unguaranteed": ["cuhybrid_eig"]}},
        {"platform": "export", "primitive": "asin", "facts": {"non_stablehlo": [], "custom_calls": []}},
        {"platform": "cuda", "primitive": "sin", "facts": {}},
    ]
    b = boundary(rows)
    assert list(b) == ["cuda", "export"]
    assert b["cuda"]["modules"] == 3 and b["cuda"]["with_chlo"] == 1 and b["cuda"]["with_unguaranteed"] == 1
    assert b["cuda"]["primitives_with_chlo"] == ["asin"] and b["cuda"]["custom_calls"] == {"cuhybrid_eig": 1}
    assert b["export"]["with_chlo"] == 0
    text = render_text(table, b)
    assert "cuhybrid_eig ×1 (unguaranteed)" in text and "1 with chlo ops" in text
