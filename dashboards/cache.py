"""Pages over finished runs never change: HTTP validators and a server-side page cache.

Every page is a function of the database's runs and results, the query string and the
app's settings. While every run is finished, the runs' ids, statuses and finish times,
the newest result id, the acknowledgements of failure clusters (``farm triage ack``) and
the app's own write generation (bumped by ``compare/accept``, the dashboard's one write)
identify the data exactly; a page's ETag is that state plus
its URL. A request whose ``If-None-Match`` carries it (or whose ``If-Modified-Since`` is
not older than the newest finish time) gets 304 without the page being computed, and a
page already rendered for that state is served from a bounded in-memory cache. A new
run, a run that changes status, a new result or an accepted regression is a new state:
nothing stale is served. While any run is still running, pages are neither validated
nor cached.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from flask import Response, current_app, request
from sqlalchemy import func, select

from farm.store.models import AccuracyRow, AcknowledgementRow, Run, StoredResultRow

#: Bytes of rendered pages kept per app (oldest used dropped first).
MAX_BYTES = 64 * 2**20


class PageCache:
    """A thread-safe LRU of rendered bodies, bounded by their total size in bytes."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, tuple[bytes, str]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: str) -> tuple[bytes, str] | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return item

    def clear(self) -> None:
        """Drop every page (benchmarks time pages uncached with it)."""
        with self._lock:
            self._items.clear()
            self._size = 0

    def put(self, key: str, body: bytes, mimetype: str) -> None:
        if len(body) > self.max_bytes // 4:
            return  # one huge page must not flush everything else
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._size -= len(old[0])
            self._items[key] = (body, mimetype)
            self._size += len(body)
            while self._size > self.max_bytes:
                _, (dropped, _) = self._items.popitem(last=False)
                self._size -= len(dropped)


def data_state(store: Any, generation: int) -> tuple[str, datetime | None] | None:
    """(digest, newest finish time) of what the pages read, or None while a run is running.

    One small query: the runs' (id, status, finished_at), each with the newest result id;
    and the newest accuracy row's id (``farm accuracy`` writes rows outside any run)."""
    # the stored table, not the view: an inherited row keeps its base row's id, so the newest id is
    # the same, and the view would resolve every delta run's rows (millions) to find it
    newest = select(func.max(StoredResultRow.id)).scalar_subquery()
    # acknowledgements of failure clusters (``farm triage ack``, from another process): each
    # new, changed (its time is renewed) or removed one changes their count or newest time
    acks = select(func.count(AcknowledgementRow.id)).scalar_subquery()
    acked = select(func.max(AcknowledgementRow.created_at)).scalar_subquery()
    acc_max = select(func.max(AccuracyRow.id)).scalar_subquery()
    acc_n = select(func.count(AccuracyRow.id)).scalar_subquery()
    with store.session() as s:
        runs = s.execute(select(Run.id, Run.status, Run.finished_at, newest.label("newest"), acks.label("acks"),
                                acked.label("acked"), acc_max.label("acc_max"), acc_n.label("acc_n"))
                         .order_by(Run.id)).all()
        # no run to carry them: the accuracy rows' state on its own
        accuracy = (runs[0].acc_max, runs[0].acc_n) if runs else tuple(s.execute(select(acc_max, acc_n)).one())
    newest_result = runs[0].newest if runs else None
    ack_state = (runs[0].acks, str(runs[0].acked)) if runs else None
    if any(r.status == "running" or r.finished_at is None for r in runs):
        return None
    key = repr((generation, newest_result, tuple(accuracy), [(r.id, r.status, r.finished_at.isoformat()) for r in runs],
                ack_state))
    times = [r.finished_at for r in runs] + ([runs[0].acked] if runs and runs[0].acked else [])
    last = max(times, default=None)
    if last is not None and last.tzinfo is None:
        last = last.replace(tzinfo=timezone.utc)
    return hashlib.sha256(key.encode()).hexdigest(), last


def bump_generation() -> None:
    """Call after the dashboard writes to the database: every cached page is stale."""
    current_app.config["DATA_GENERATION"] = current_app.config.get("DATA_GENERATION", 0) + 1


def conditional(render: Callable[[], Response]) -> Response:
    """The response for the current GET: 304, a cached body, or ``render()`` (cached when 200)."""
    app = current_app
    state = data_state(app.config["STORE"], app.config.get("DATA_GENERATION", 0))
    if state is None:
        resp = render()
        resp.headers["Cache-Control"] = "no-cache"
        return resp
    digest, last = state
    settings = (app.config.get("PAGE_SIZE"), bool(app.config.get("WRITE_TOKEN")))
    etag = hashlib.sha256(f"{digest} {request.full_path} {settings}".encode()).hexdigest()[:32]
    modified_since = request.if_modified_since
    if etag in request.if_none_match or (
            not request.if_none_match and modified_since is not None and last is not None
            and last.replace(microsecond=0) <= modified_since):
        resp = Response(status=304)
    else:
        cache: PageCache = app.extensions["farm_page_cache"]  # made by create_app, before any thread
        hit = cache.get(etag)
        if hit is not None:
            resp = Response(hit[0], mimetype=hit[1])
            resp.headers["X-Farm-Cache"] = "hit"
        else:
            resp = render()
            if resp.status_code != 200:
                return resp
            cache.put(etag, resp.get_data(), resp.mimetype)
            resp.headers["X-Farm-Cache"] = "miss"
    resp.set_etag(etag)
    if last is not None:
        resp.last_modified = last
    resp.headers["Cache-Control"] = "no-cache"  # always revalidate: a new run must show at once
    return resp
