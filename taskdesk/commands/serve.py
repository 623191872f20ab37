"""`taskdesk serve`: the web app (FastAPI under uvicorn), stateless; run as many as you like."""

from __future__ import annotations

import argparse

from taskdesk.commands import Subparsers, add_data_dir
from taskdesk.config import export_to_environ, resolve_settings

APP = "api.app:create_served_app"


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "serve",
        help="run the web app (HTTP, GraphQL, pages)",
        description="Run the web app under uvicorn. It is stateless: run several behind a "
        "load balancer if you like. Needs DATABASE_URL and REDIS_URL (or a running "
        "`taskdesk dev`).",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s; "
                   "use 0.0.0.0 in a container)")  # fmt: skip
    p.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    p.add_argument(
        "--workers", type=int, default=1, help="uvicorn worker processes (default: %(default)s)"
    )
    p.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug"],
        help="uvicorn log level (default: %(default)s)",
    )
    add_data_dir(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    settings = resolve_settings(args.data_dir)
    # The factory runs in uvicorn's process(es) and reads settings from the environment.
    export_to_environ(settings)
    uvicorn.run(
        APP,
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=args.log_level,
    )
    return 0
