"""The `taskdesk` subcommands, one module each, and the one way a command reaches the product.

A module exposes `register(subparsers)`, which adds its parser and sets `func` (called with the
parsed arguments, returning the exit code). `taskdesk/cli.py` lists the modules in COMMANDS.

A command that works on the database and Redis hands its action to `with_runtime`: settings
resolved (the environment, else a running `taskdesk dev`'s private servers), one Runtime
opened with the pool the action needs, the action run, the Runtime closed whatever happens,
and the action's status returned (None is success). Failures are turned into messages and exit
codes in one place, `taskdesk.cli.main`.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from desk.core.runtime import Runtime
    from desk.core.settings import Settings

# argparse's private _SubParsersAction is what add_subparsers() returns.
Subparsers = Any

# An action gets the open runtime and the parsed arguments; it returns its exit status
# (None: 0) and prints its own output.
Action = Callable[["Runtime", argparse.Namespace], Awaitable[int | None]]

DATA_DIR_HELP = (
    "folder where `taskdesk dev` keeps its private PostgreSQL and Redis; used only when "
    "DATABASE_URL or REDIS_URL is empty (default: $DATA_DIR, else .taskdesk)"
)


def add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)


def with_runtime(
    action: Action,
    *,
    pool_size: int | None = 1,
    quiet: bool = True,
    refuse: Callable[[Settings, argparse.Namespace], None] | None = None,
) -> Callable[[argparse.Namespace], int]:
    """`func` for a subparser: run `action` on a Runtime of `pool_size` connections (one
    statement at a time needs one; an action that reads while it writes or follows a task
    needs two; None: the settings' DB_POOL_SIZE). `refuse` may stop the command (by raising
    ConfigError) on the settings alone, before any connection is made."""

    def run(args: argparse.Namespace) -> int:
        from taskdesk.config import resolve_settings

        settings = resolve_settings(getattr(args, "data_dir", None), quiet=quiet)
        if refuse is not None:
            refuse(settings, args)
        return asyncio.run(_run(settings, action, args, pool_size))

    return run


async def _run(
    settings: Any, action: Action, args: argparse.Namespace, pool_size: int | None
) -> int:
    from desk.core.runtime import Runtime

    rt = await Runtime.open(settings, pool_size=pool_size, application_name="taskdesk-cli")
    try:
        status = await action(rt, args)
    finally:
        await rt.close()
    return 0 if status is None else int(status)
