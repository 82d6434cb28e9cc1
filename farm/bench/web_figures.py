"""``farm bench``'s dashboard figures: page server times and the loopback load test, on a
database given with ``--dashboard-db`` (see ``farm.bench.db`` and ``farm.bench.web``)."""
from __future__ import annotations

import statistics
from collections.abc import Callable

from farm.bench.figure import Figure


def dashboard_figures(db_url: str, repeats: int = 5, log: Callable[[str], None] = lambda s: None) -> list[Figure]:
    """Server time of the overview, trends, compare (previous vs latest), harness and search
    pages on ``db_url`` through Flask's test client (``farm.bench.web.page_times``): the
    value is the median render with the page cache and plot memo emptied; the spread
    names the first request of a fresh app, the cached answer and the SQL statements."""
    from farm.bench import web  # deferred: farm.bench.web imports dashboards when it runs; farm --help needs none

    times = web.page_times(db_url, repeats=repeats, log=log)
    store_desc = _db_size(db_url)
    figs = []
    for t in times:
        med = statistics.median(t.render_s)
        figs.append(Figure(f"dashboard {t.page} page, server time ({store_desc})", 1000 * med, "ms", 300.0,
                           spread=f"{1000 * min(t.render_s):.0f}-{1000 * max(t.render_s):.0f} ms uncached, "
                                  f"first {1000 * t.first_s:.0f} ms, cached {1000 * statistics.median(t.cached_s):.1f} ms, "
                                  f"{t.statements} SQL statements"))
    return figs


def _db_size(db_url: str) -> str:
    from sqlalchemy import func, select  # deferred: sqlalchemy; farm --help imports this module

    from farm.store import open_store  # deferred: farm.store; not needed by farm --help
    from farm.store.models import ResultRow, Run  # deferred: as above

    store = open_store(db_url, upgrade=False)
    try:
        with store.session() as s:
            n = s.scalar(select(func.count()).select_from(Run))
            last = s.scalar(select(func.max(Run.id)))
            per = s.scalar(select(func.count()).select_from(ResultRow).where(ResultRow.run_id == last))
    finally:
        store.dispose()
    return f"{n} runs x {per} results"


def load_figures(db_url: str, quick: bool, log: Callable[[str], None] = lambda s: None) -> list[Figure]:
    """The bounded loopback load test (``farm.bench.web.load``): 20 clients over the five
    pages against ``farm serve`` (waitress, 8 threads), 10 s quick, 30 s otherwise."""
    from farm.bench import web  # deferred: farm.bench.web imports dashboards when it runs

    r = web.load(db_url, clients=20, seconds=10.0 if quick else 30.0, threads=8, log=log)
    what = f"{r.clients} clients, {r.seconds:.0f} s, farm serve --threads {r.threads}"
    per_page = ", ".join(f"{p} {1000 * r.quantile(0.95, xs):.0f}" for p, xs in sorted(r.by_page.items()))
    return [Figure(f"load test requests/s ({what})", r.requests / r.seconds, "req/s"),
            Figure("load test p50 latency", 1000 * r.quantile(0.5), "ms"),
            Figure("load test p95 latency", 1000 * r.quantile(0.95), "ms", 500.0,
                   spread=f"per page p95 (ms): {per_page}"),
            Figure("load test max latency", 1000 * max(r.latencies, default=float("nan")), "ms"),
            Figure("load test errors", float(len(r.errors)), "", 0.0,
                   spread="; ".join(sorted(set(r.errors))[:3]))]
