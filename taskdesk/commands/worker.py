"""`taskdesk worker`: processors plus dispatcher, rescuer and pruner; run as many as you like."""

from __future__ import annotations

import argparse

from taskdesk.commands import Subparsers, add_data_dir
from taskdesk.config import export_to_environ, resolve_settings


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "worker",
        help="run a background worker",
        description="Run one worker: it executes queued tasks and also dispatches due tasks, "
        "rescues tasks of dead workers and prunes old results. Every claim is safe under "
        "concurrency, so run as many as you like. Stops gracefully on SIGTERM/Ctrl-C.",
    )
    add_data_dir(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = resolve_settings(args.data_dir)
    export_to_environ(settings)
    # Imported here: jobs/ pulls in arq and the processors, which other commands do not need.
    from jobs.worker import run_worker

    run_worker(settings)
    return 0
