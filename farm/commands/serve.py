"""farm serve: the web dashboard."""
from __future__ import annotations

import argparse
import os

from farm.commands import add_db


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the web dashboard (read-only unless FARM_TOKEN is set)")
    add_db(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dashboards.app import create_app  # deferred: dashboards.app (~0.6 s, flask+store); not needed by farm --help

    app = create_app(args.db, token=os.environ.get("FARM_TOKEN"))
    print(f"farm: dashboard on http://{args.host}:{args.port}/ (Ctrl-C to stop)")
    app.run(host=args.host, port=args.port, debug=False, threaded=True)
    return 0
