"""farm show / farm runs: a run's matrix (harness x platform x stage), the list of runs."""
from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict

from farm.commands import add_db, number, statuses, store_from
from farm.results import BAD, BROKEN, SEVERITY

ABBREV = {"ok": ".", "fail": "F", "error": "E", "expected_fail": "x", "unexpected_pass": "U", "skipped": "-",
          "not_runnable_here": "n", "crashed": "C", "timeout": "T"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="print a run's matrix of harness x platform x stage status")
    p.add_argument("run", nargs="?", default="latest", help="run id, name, latest or previous")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--status", help="only harnesses with a result of these statuses (comma list)")
    p.add_argument("--shapes", choices=("static", "symbolic", "both"), default="both",
                   help="only the static stages' records, or only the symbolic variant's (default both)")
    add_db(p)
    p.set_defaults(func=show)
    p = sub.add_parser("runs", help="list runs with their environment and totals")
    p.add_argument("--limit", type=number("--limit", minimum=1), default=20, help="newest N runs")
    p.add_argument("--format", choices=("table", "json"), default="table")
    add_db(p)
    p.set_defaults(func=list_runs)


def show(args: argparse.Namespace) -> int:
    wanted = ",".join(statuses(args.status)) or None  # an unknown status is an error, not an empty matrix
    return print_run(store_from(args), args.run, args.format, wanted, shapes=args.shapes)


def run_json(store, ref: str, only_bad: bool = False) -> dict:  # noqa: ANN001
    """The run's rows by harness; ``only_bad`` loads just the bad results (big runs)."""
    from farm.store import queries  # deferred: farm.store.queries (sqlalchemy); not needed by farm --help
    from farm.analysis.workers import group_results
    from farm.store.workers import result_counts, worker_environments  # deferred with farm.store.queries (sqlalchemy)

    with store.session() as s:
        run = queries.resolve_run(s, ref)
        rows = queries.results(s, run.id, status=",".join(BAD) if only_bad else None)
        info = queries.run_dict(s, run)
        by_env = group_results(worker_environments(run), result_counts(s, run))
    harnesses: dict[str, dict] = {}
    for r in rows:
        h = harnesses.setdefault(r["harness"], {"harness": r["harness"], "fingerprint": r["fingerprint"],
                                                "primitive": r["primitive"], "dtype": r["dtype"], "reused": None,
                                                "reused_from": None, "platforms": {}})
        h["platforms"].setdefault(r["platform"], {})[r["stage"]] = {
            "status": r["status"], "seconds": r["seconds"], "error_type": r["error_type"], "error": r["error"],
            "metrics": r["metrics"], "reused": r["reused"], "reused_from": r["reused_from"]}
        if r["reused"] and h["reused"] != "whole":
            h["reused"], h["reused_from"] = r["reused"], r["reused_from"]
    return {"run": info, "harnesses": list(harnesses.values()), "worker_environments": by_env}


def _size(store, ref: str) -> int:  # noqa: ANN001
    from sqlalchemy import func, select  # deferred: sqlalchemy; not needed by farm --help

    from farm.store import queries  # deferred: farm.store.queries (sqlalchemy); not needed by farm --help
    from farm.store.models import OutcomeRow  # deferred: farm.store.models (over sqlalchemy); not needed by farm --help

    with store.session() as s:
        run = queries.resolve_run(s, ref)
        return s.scalar(select(func.count()).select_from(OutcomeRow).where(OutcomeRow.run_id == run.id)) or 0


def print_run(store, ref: str, fmt: str = "table", status: str | None = None,  # noqa: ANN001
              max_rows: int | None = None, shapes: str = "both") -> int:
    """The run's matrix. With ``max_rows``, a big run shows only its bad results; ``shapes``:
    the static stages' records or the symbolic variant's alone."""
    big = fmt != "json" and max_rows is not None and not status and _size(store, ref) > max_rows
    data = run_json(store, ref, only_bad=big)
    if shapes != "both":
        from farm.analysis.shapes import kind_of  # deferred with the rows

        for h in data["harnesses"]:
            h["platforms"] = {p: kept for p, st in h["platforms"].items()
                              if (kept := {k: v for k, v in st.items() if kind_of(k) == shapes})}
        data["harnesses"] = [h for h in data["harnesses"] if h["platforms"]]
    if status:
        wanted = set(status.split(","))
        data["harnesses"] = [h for h in data["harnesses"]
                             if any(st["status"] in wanted for p in h["platforms"].values() for st in p.values())]
    if fmt == "json":
        print(json.dumps(data, indent=1, default=str))
        return 0
    run = data["run"]
    platforms, stages_of = _columns(data["harnesses"])
    rows = data["harnesses"]
    hidden = 0
    if big:
        hidden = (data["run"].get("done") or 0) - min(len(rows), max_rows)
        rows = rows[:max_rows]
    _print_matrix(run, rows, platforms, stages_of)
    if hidden:
        print(f"... {hidden} more harnesses not shown (a big run lists only its bad results; "
              f"`farm show {run['name']}` prints every row)")
    print("stages per platform: " + "; ".join(f"{p}: {' '.join(stages_of[p])}" for p in platforms))
    print("legend: " + "  ".join(f"{v}={k}" for k, v in ABBREV.items()))
    _print_reuse(data["harnesses"])
    _print_totals(data)
    _print_environments(data["worker_environments"])
    return 0


def _print_environments(groups: list[dict]) -> None:
    """The run's results by the environment of the worker that produced them: one block per
    environment (what it is, its workers and hosts, its counts per platform and status)."""
    if not groups:
        return
    print(f"by worker environment ({len(groups)}):")
    for g in groups:
        workers = f"{len(g['workers'])} worker{'s' * (len(g['workers']) != 1)}"
        hosts = f" on {', '.join(g['hosts'])}" if g["hosts"] else ""
        print(f"  [{g['key'] or 'none'}] {g['results']} results, {workers}{hosts}")
        print(f"    {g['summary']}")
        for p, counts in g["platforms"].items():
            print(f"    {p}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: SEVERITY[kv[0]])))


def _columns(harnesses: list[dict]) -> tuple[list[str], dict[str, list[str]]]:
    """The matrix columns: platforms in a fixed order, then each platform's stages as first seen.

    Split out of ``print_run`` to keep it short; the order keeps tables comparable across runs."""
    platforms: list[str] = []
    for h in harnesses:
        for p in h["platforms"]:
            if p not in platforms:
                platforms.append(p)
    order = ["any", "cpu", "cuda", "rocm", "tpu", "export"]
    platforms.sort(key=lambda p: (order.index(p) if p in order else 99, p))
    stages_of: dict[str, list[str]] = defaultdict(list)
    for h in harnesses:
        for p, st in h["platforms"].items():
            for s in st:
                if s not in stages_of[p]:
                    stages_of[p].append(s)
    return platforms, stages_of


def _print_matrix(run: dict, rows: list[dict], platforms: list[str], stages_of: dict[str, list[str]]) -> None:
    """The run's title line, the header and one line of status letters per harness.

    Split out of ``print_run``: the layout (column widths, truncated names) lives in one place."""
    width = min(max([len(h["harness"]) for h in rows] + [7]), 70)
    head = f"{'harness':<{width}}  " + "  ".join(f"{p:<{max(len(stages_of[p]), len(p))}}" for p in platforms)
    head += "  reused from"
    print(f"run {run['name']} (id {run['id']}, {run['status']}, {run['done']}/{run['total']} harnesses, "
          f"jax {run['environment'].get('jax_version')})")
    print(head)
    for h in rows:
        cells = []
        for p in platforms:
            st = h["platforms"].get(p, {})
            cell = "".join(ABBREV[st[s]["status"]] if s in st else " " for s in stages_of[p])
            cells.append(f"{cell:<{max(len(stages_of[p]), len(p))}}")
        print(f"{h['harness'][:width]:<{width}}  " + "  ".join(cells) + f"  {_reused_cell(h)}".rstrip())


def _print_reuse(harnesses: list[dict]) -> None:
    """One line counting the harnesses reused from earlier runs, by kind and source run (none if none)."""
    reuse = Counter((h["reused"], h["reused_from"]) for h in harnesses if h["reused"])
    if reuse:
        print("reused: " + ", ".join(f"{n} {'whole' if kind == 'whole' else 'compile/execute/compare'} from run {rid}"
                                     for (kind, rid), n in sorted(reuse.items(), key=str))
              + " (whole: nothing that shapes the result changed; compile/execute/compare: re-lowered to the same "
                "modules)")


def _print_totals(data: dict) -> None:
    """The status totals (the run's own counts, else counted from the rows), then the first 25 bad results.

    Counting from the rows is the fallback for runs stored without ``status_counts``."""
    run = data["run"]
    totals: Counter = Counter(data["run"].get("status_counts") or {})
    if not totals:
        for h in data["harnesses"]:
            for st in h["platforms"].values():
                for v in st.values():
                    totals[v["status"]] += 1
    print("totals: " + ", ".join(f"{k} {v}" for k, v in sorted(totals.items(), key=lambda kv: SEVERITY[kv[0]])))
    bad = [(h["harness"], p, s, v) for h in data["harnesses"] for p, st in h["platforms"].items()
           for s, v in st.items() if v["status"] in BAD]
    for name, p, s, v in bad[:25]:
        print(f"  {v['status']:<15} {name} {p}/{s}: {v['error'] or ''}"[:200])
    if len(bad) > 25:
        print(f"  ... and {len(bad) - 25} more (farm show {run['id']} --status fail,error)")


def _reused_cell(h: dict) -> str:
    if h["reused"] == "whole":
        return f"run {h['reused_from']}"
    if h["reused"] == "downstream":
        return f"run {h['reused_from']} (compile+)"
    return ""


def list_runs(args: argparse.Namespace) -> int:
    from farm.store import queries  # deferred: farm.store.queries (sqlalchemy); not needed by farm --help

    store = store_from(args)
    with store.session() as s:
        runs = queries.list_runs(s, args.limit)
    if args.format == "json":
        print(json.dumps(runs, indent=1, default=str))
        return 0
    print(f"{'id':>4}  {'name':<28} {'kind':<7} {'status':<11} {'done':>6} {'bad':>5}  {'jax':<8} started")
    for r in runs:
        bad = sum(v for k, v in r["status_counts"].items() if k in BROKEN)
        print(f"{r['id']:>4}  {r['name']:<28} {r['kind']:<7} {r['status']:<11} {r['done']:>6} {bad:>5}  "
              f"{r['environment'].get('jax_version', ''):<8} {r['started_at']}")
    return 0
