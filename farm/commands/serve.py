"""farm serve: the web dashboard, on waitress (a production WSGI server); Flask's own
development server only with --debug."""
from __future__ import annotations

import argparse
import os
import sys

from farm.commands import add_db, number


#: open connections waitress serves at once (its default, 100, lets 100 slow clients starve the rest)
CONNECTION_LIMIT = 1000


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the web dashboard (read-only unless FARM_TOKEN is set)",
                       description="Serve the dashboard with waitress, a multi-threaded production WSGI "
                                   "server. --debug uses Flask's development server instead (reloader, "
                                   "tracebacks in the browser; never on a shared network).")
    add_db(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=number("--port", minimum=1, maximum=65535), default=8000,
                   help="TCP port to listen on")
    p.add_argument("--threads", type=number("--threads", minimum=1, maximum=256), default=8,
                   help="worker threads answering requests (waitress)")
    p.add_argument("--debug", action="store_true", help="Flask's development server with the debugger")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dashboards.app import create_app  # deferred: dashboards.app (flask+store); not needed by farm --help
    from farm.store import open_store  # deferred: farm.store (with sqlalchemy); not needed by farm --help

    open_store(args.db, must_exist=True, upgrade=False).dispose()  # a typo'd SQLite path is an error, not a new file
    app = create_app(args.db, token=os.environ.get("FARM_TOKEN"))
    if args.debug:
        print(f"farm: dashboard on http://{args.host}:{args.port}/ (Flask development server, --debug)")
        app.run(host=args.host, port=args.port, debug=True, threaded=True, use_reloader=False)
        return 0
    import waitress  # deferred: waitress; only a serving dashboard needs it

    print(f"farm: dashboard on http://{args.host}:{args.port}/ (waitress, {args.threads} threads; Ctrl-C to stop)",
          file=sys.stderr)
    # Slow or idle clients hold connections, not threads: past waitress's default of 100 open
    # connections it stops accepting, and 100 clients trickling headers starve everyone else
    # (docs/reliability.md). Allow many more, and drop a connection idle for 30 s.
    waitress.serve(app, host=args.host, port=args.port, threads=args.threads, ident="farm", _quiet=True,
                   connection_limit=CONNECTION_LIMIT, channel_timeout=30, cleanup_interval=10)
    return 0
