"""One module per page; each registers an HTML route and its .json twin.

Shared here: the twin registration, URL filters, pagination, the write-token check
and the template helpers (status colours, module-text highlighting, plots).
"""
from __future__ import annotations

import hmac
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from flask import (Flask, abort, current_app, g, has_request_context, jsonify, make_response, render_template,
                   request, url_for)
from markupsafe import Markup, escape

from dashboards import cache, plots
from farm.analysis.shapes import SHAPE_FILTERS
from farm.errors import ConfigError, UnknownName
from farm.platforms import parse_list
from farm.results import LOWERING_PLATFORMS, SEVERITY, STATUSES

FILTERS = ("primitive", "dtype", "platform", "status", "catalog")
PAGE_SIZE = 100
#: Platforms a result row can carry ("any": before lowering; "export": the multi-platform export).
RESULT_PLATFORMS = ("any", *LOWERING_PLATFORMS, "export")
#: Filters whose valid values do not depend on the run.
FIXED_VALUES = {"status": STATUSES, "platform": RESULT_PLATFORMS}


def store() -> Any:
    return current_app.config["STORE"]


def twin(app: Flask, rule: str, json_rule: str, endpoint: str, template: str,
         context: Callable[..., dict[str, Any]], params: tuple[str, ...] | None = None) -> None:
    """Register ``rule`` (HTML from ``template``) and ``json_rule`` (JSON) over one context.

    ``params``: the query parameters the page reads; any other is a 400 naming the valid
    ones (None: not checked). Both faces answer through ``dashboards.cache.conditional``:
    ETag/Last-Modified, 304s and a page cache while every run is finished."""

    def html(**kw: Any) -> Any:
        check_params(params)
        return cache.conditional(lambda: make_response(fill_plots(render_template(template, page=endpoint,
                                                                                **context(**kw)))))

    def as_json(**kw: Any) -> Any:
        check_params(params)
        return cache.conditional(lambda: jsonify(context(**kw)))

    app.add_url_rule(rule, endpoint, html, methods=["GET"])
    app.add_url_rule(json_rule, endpoint + "_json", as_json, methods=["GET"])


def check_params(params: tuple[str, ...] | None) -> None:
    """A query parameter the page does not read is a typo (``?stauts=fail``): UnknownName, a 400."""
    if params is None:
        return
    for name in request.args:
        if name not in params:
            raise UnknownName("query parameter", name, params)


def url_filters() -> dict[str, str]:
    """The page's filters from the query string (comma lists), empty ones dropped.

    Raises:
        UnknownName: a status or platform that does not exist (a 400 naming the valid ones).
    """
    filters = {k: v for k in FILTERS if (v := request.args.get(k, "").strip())}
    for k, valid in FIXED_VALUES.items():
        if k in filters:
            parse_list(filters[k], valid, k)
    return filters


def check_filters(filters: dict[str, str], choices: dict[str, list[str]]) -> None:
    """Filters against the values a run holds (``queries.filter_values``): a primitive, dtype
    or catalog the run lacks is an UnknownName naming the nearest ones, not an empty page."""
    for k in ("primitive", "dtype", "catalog"):
        if k in filters:
            parse_list(filters[k], tuple(choices.get(k, ())), k)


def one_of(name: str, valid: tuple[str, ...], default: str) -> str:
    """Query parameter ``name``, which must be one of ``valid`` (UnknownName otherwise)."""
    value = request.args.get(name, "").strip() or default
    if value not in valid:
        raise UnknownName(name, value, valid)
    return value


def shapes_arg() -> str:
    """``?shapes=``: the records of static shapes, of the symbolic variant, or both (the
    default: what a page showed before there were symbolic records)."""
    return one_of("shapes", SHAPE_FILTERS, "both")


def page_args(size: int = PAGE_SIZE) -> tuple[int, int, int]:
    """(page, limit, offset) from ``?page=`` (1-based); app config PAGE_SIZE overrides ``size``.

    Raises:
        ConfigError: a page that is not a whole number >= 1 (a 400).
    """
    size = current_app.config.get("PAGE_SIZE") or size
    text = request.args.get("page", "1").strip() or "1"
    try:
        page = int(text)
    except ValueError:
        page = 0
    if page < 1:
        raise ConfigError(f"page must be a whole number >= 1, not {text!r}")
    return page, size, (page - 1) * size


def pager(page: int, size: int, total: int) -> dict[str, Any]:
    return {"page": page, "size": size, "total": total, "pages": max(1, -(-total // size))}


def require_token() -> None:
    """403 unless the request carries the app's write token (Bearer header or form field)."""
    want = current_app.config.get("WRITE_TOKEN")
    if not want:
        abort(403, "this dashboard is read-only (start it with FARM_TOKEN set to allow writes)")
    auth = request.headers.get("Authorization", "")
    got = auth[7:] if auth.startswith("Bearer ") else request.form.get("token", "")
    if not hmac.compare_digest(got.encode(), want.encode()):
        abort(403, "a valid write token is required")


# --------------------------------------------------------------------------- template helpers
_CHLO = re.compile(r"\b(chlo\.[A-Za-z_][\w.]*)")
_CUSTOM = re.compile(r"(stablehlo\.custom_call|\bcustom_call)(\s*@)([\w.$-]+)")
_TARGET = re.compile(r"(call_target_name\s*=\s*&#34;)([^&]+)(&#34;)")


def highlight(text: str, extra_ops: list[str] | tuple[str, ...] = (),
              unguaranteed: list[str] | tuple[str, ...] = ()) -> Markup:
    """Module text, escaped, with non-StableHLO ops and custom calls wrapped in spans.

    The text is escaped first and the patterns applied to the escaped text, so nothing
    in a module can inject markup."""
    bad = set(unguaranteed)
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        s = str(escape(line))
        marked = False
        s2 = _CHLO.sub(r'<span class="hl-chlo" title="not StableHLO: crosses the plugin boundary">\1</span>', s)
        marked |= s2 != s
        for op in extra_ops:
            eop = str(escape(op))
            if not eop.startswith("chlo.") and eop in s2:
                s2 = re.sub(rf"(?<![\w.]){re.escape(eop)}(?![\w.])",
                            f'<span class="hl-chlo" title="not StableHLO">{eop}</span>', s2)
                marked = True

        def cc_class(target: str) -> str:
            return "hl-cc hl-cc-bad" if target in bad else "hl-cc"

        s3 = _CUSTOM.sub(lambda m: f'<span class="{cc_class(m.group(3))}" title="custom call">'
                                   f'{m.group(1)}{m.group(2)}{m.group(3)}</span>', s2)
        s3 = _TARGET.sub(lambda m: f'{m.group(1)}<span class="{cc_class(m.group(2))}" title="custom call">'
                                   f'{m.group(2)}</span>{m.group(3)}', s3)
        marked |= s3 != s2
        cls = ' class="hl-line"' if marked else ""
        out.append(f'<span{cls}><span class="ln">{n}</span>{s3}</span>')
    return Markup("".join(out))  # each line is a block span


def status_class(status: str | None) -> str:
    return f"st-{status}" if status in STATUSES else ""


def fmt_s(x: float | None) -> str:
    if x is None:
        return ""
    if x == 0:
        return "0"
    if x < 1e-3:
        return f"{x * 1e6:.0f} µs"
    if x < 1:
        return f"{x * 1e3:.1f} ms"
    return f"{x:.2f} s"


def fmt_num(x: Any) -> str:
    if isinstance(x, float):
        if x == int(x) and abs(x) < 1e15:
            return str(int(x))
        return f"{x:.4g}"
    return str(x)


def counts_title(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -SEVERITY.get(kv[0], 0)))


def with_args(**kw: Any) -> str:
    """The current URL with some query arguments replaced (None drops one)."""
    args = request.args.to_dict()
    for k, v in kw.items():
        if v is None or v == "":
            args.pop(k, None)
        else:
            args[k] = v
    return url_for(request.endpoint, **(request.view_args or {}), **args)


#: Renders a page's plots side by side while its template goes on (vl-convert releases the GIL).
_PLOTS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="farm-plots")


def plot(kind: str, *args: Any, label: str, **kw: Any) -> Markup:
    """Template helper: ``plots.<kind>(*args, **kw)`` as inline SVG labelled ``label``.

    The chart is built here and rendered on a worker thread; the template gets a
    placeholder that ``fill_plots`` replaces once the page is rendered (a page's plots
    render in parallel). Outside a page (no ``g``), it renders at once."""
    if kind not in plots.BUILDERS:
        raise ValueError(f"unknown plot {kind!r} (known: {', '.join(plots.BUILDERS)})")
    chart = getattr(plots, kind)(*args, **kw)
    if not has_request_context():
        return plots.svg(chart, label)
    pending = g.setdefault("farm_plots", [])
    token = f"<!--farm-plot-{len(pending)}-->"
    pending.append((token, _PLOTS.submit(plots.svg, chart, label)))
    return Markup(token)


def fill_plots(body: str) -> str:
    """``body`` with every plot placeholder of this request replaced by its SVG."""
    for token, done in g.pop("farm_plots", []):
        body = body.replace(token, done.result(), 1)
    return body


def install(app: Flask) -> None:
    plots.warm()  # Vega's renderer starts once per process (~0.4 s): before the first page, not during it

    app.jinja_env.globals.update(highlight=highlight, status_class=status_class, fmt_s=fmt_s, fmt_num=fmt_num,
                                 counts_title=counts_title, with_args=with_args, STATUSES=STATUSES,
                                 SEVERITY=SEVERITY, plot=plot,
                                 read_only=lambda: not current_app.config.get("WRITE_TOKEN"))
