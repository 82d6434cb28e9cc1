"""Search: harnesses by name (every word must match) in a run, with status and platform
filters, server-side order and pages; everything in the URL, so a search is a link.

``/search?q=cumsum+float32&status=fail&platform=cpu&sort=-dtype&page=2``
"""
from __future__ import annotations

from typing import Any

from flask import Flask, request

from dashboards.views import FIXED_VALUES, one_of, page_args, pager, store, twin, url_filters
from farm.errors import ConfigError, RunNotFound
from farm.platforms import parse_list
from farm.store import queries, search
from farm.store.search import MAX_WORDS, SORTS

#: The longest search text accepted (a 400 beyond).
MAX_TEXT = 200


def text_arg() -> str:
    """``?q=``: at most MAX_TEXT characters and MAX_WORDS words (ConfigError: a 400)."""
    text = request.args.get("q", "").strip()
    if len(text) > MAX_TEXT:
        raise ConfigError(f"q must be at most {MAX_TEXT} characters, not {len(text)}")
    if len(search.words(text)) > MAX_WORDS:
        raise ConfigError(f"q must have at most {MAX_WORDS} words, not {len(search.words(text))}")
    return text


def context() -> dict[str, Any]:
    text = text_arg()
    filters = url_filters()  # status and platform checked against the valid values (400 otherwise)
    sort = one_of("sort", SORTS, "name")
    page, limit, offset = page_args()
    ref = request.args.get("run", "latest")
    status, platform = (parse_list(filters.get(k), FIXED_VALUES[k], k) for k in ("status", "platform"))
    with store().session() as s:
        try:
            run = queries.run_dict(s, queries.resolve_run(s, ref), with_counts=False)
        except RunNotFound:
            if ref != "latest":
                raise
            run = None  # no runs yet: search the harnesses the database knows
        total, rows = search.harnesses(s, text, run_id=run["id"] if run else None, status=status,
                                       platform=platform, sort=sort, limit=limit, offset=offset)
    platforms = sorted({p for r in rows for p in r["platforms"]})
    return {"q": text, "run": run, "filters": {k: v for k, v in filters.items() if k in ("status", "platform")},
            "sort": sort, "harnesses": rows, "platforms": platforms, "pager": pager(page, limit, total)}


def register(app: Flask) -> None:
    twin(app, "/search", "/search.json", "search", "search.html", context,
         params=("q", "run", "status", "platform", "sort", "page"))
