"""Regression analysis: pure functions over plain data (result rows and run dicts).

No Ray, database or web imports: the CLI and the dashboard load rows through
``farm.store.queries`` and hand them here.

- ``report(base_run, base_rows, cand_run, cand_rows, history=None, threshold=0.2,
  selection=None)``: the whole comparison as one JSON-able dict (``render_text`` / ``render_markdown`` print it);
- ``failing(report, kinds)``: which chosen kinds of regression it holds (a CI gate);
- ``signature(record)``, ``clusters.clusters(rows, runs, focus)``: failing records grouped by
  cause (``farm triage``, the dashboard's Failures page, ``report``'s ``clusters``);
- building blocks: ``flips`` (status changes per stage), ``gate`` (worst status per
  harness x platform: crashes, timeouts, vanished results), ``drift`` (numeric error growth),
  ``perf`` (performance verdicts), ``flaky``, ``steps`` (step detection), ``stats``.

Report shape (``format_version`` 4)::

    {"format_version": 2,
     "base": {id, name, kind, status, started_at, finished_at, environment},
     "candidate": {...same...},
     "environment": {"same": bool, "differences": {key: {"base": v, "candidate": v}}},
     "settings": {threshold, drift_factor, z, alpha, min_history, history_runs},
     "harnesses": {base, candidate, compared, added: [name], removed: [name], redefined: [name],
                   vanished: [name], pending: [name]},
     "gate": {"selection": "catalog" | "run counts", "selected": int | None, "skipped_platforms": [p]},
     "summary": {new_error, vanished, new_failure, unexpected_pass, missing, changed, fixed, new_result,
                 exceeds_tolerance, grew, shrank, back_in_tolerance,
                 perf: {regression, improvement, noise, "insufficient data"}, flaky, results_compared},
     "regressions": {"status": [harness], "numeric": [harness], "perf": [harness]},
     "clusters": {"appeared": [entry], "gone": [entry], "spread": [entry], "base": int, "candidate": int},
     "primitives": [{"primitive", "worst", "regressions", "harnesses", "findings": [finding]}],  # worst first
     "findings": [finding]}                                                                    # worst first

Every finding has kind ("status" | "numeric" | "perf" | "flaky"), regression (bool),
severity, harness, fingerprint, primitive, dtype, platform, stage, a regression whose
candidate result fails its failure ``cluster`` key (``farm.analysis.clusters``; what an
acknowledgement matches), and by kind:
  status:  change (new_error | vanished | new_failure | unexpected_pass | missing | changed |
           fixed | new_result), base, candidate (statuses; None: no result), error,
           flaky ({rate, runs} if flaky); per stage, or from the gate with stage "*" and
           scope ("platform": the worst of one harness x platform, or "harness": the whole
           harness vanished, platform "*" and platforms [p]), base_at, candidate_at;
  numeric: verdict (exceeds_tolerance | grew | shrank | back_in_tolerance), max_ratio,
           tolerance {rtol, atol}, against, mismatches {base, candidate},
           metrics {max_abs_err|max_rel_err|max_ulp_err: {base, candidate, ratio, history}};
  perf:    metric (execute_s | compile_s | lower_s | artifact_bytes | peak_memory_bytes), unit,
           verdict (regression | improvement | changed (a deterministic metric moved less than 1%) |
           noise | insufficient data | unchanged), base, candidate,
           reference, change, rel_change, ratio, method (mann-whitney | history |
           deterministic | pair | none) and p_value, or z, level, n_history, steps;
  flaky:   rate, runs, transitions, usual, statuses, environment, run_ids.
Infinite numbers are strings ("inf"), as the store keeps them.
"""
from farm.analysis.clusters import Cluster
from farm.analysis.flaky import flaky
from farm.analysis.render import render_markdown, render_text
from farm.analysis.report import FORMAT_VERSION, KINDS, failing, report
from farm.analysis.signatures import Signature, signature
from farm.analysis.steps import detect_steps, significant_steps

__all__ = ["Cluster", "FORMAT_VERSION", "KINDS", "Signature", "detect_steps", "failing", "flaky",
           "render_markdown", "render_text", "report", "signature", "significant_steps"]
