"""The `taskdesk` console command: argparse, the list of subcommands, and error reporting.

Each subcommand lives in its own module exposing `register(subparsers)`; add a new one (or a
group such as `tasks show/list`) by writing the module and adding it to COMMANDS. Expected
failures print one readable message: a configuration error exits 2, anything else 1; only a
real bug shows a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType

from desk.core.errors import DeskError
from desk.core.settings import ConfigError
from taskdesk import dev
from taskdesk.commands import (
    doctor,
    import_tickets,
    invite,
    lanes,
    messages,
    migrate,
    operators,
    password,
    seed,
    serve,
    tasks,
    teams,
    tokens,
    worker,
)
from taskdesk.embedded import EmbeddedError

# The subcommands, in the order `taskdesk --help` lists them.
COMMANDS: list[ModuleType] = [
    dev, serve, worker, migrate, doctor, seed, tasks, messages, lanes, import_tickets, tokens,
    password, operators, teams, invite,
]  # fmt: skip

EPILOG = """\
configuration comes from environment variables (see README.md); with DATABASE_URL and
REDIS_URL unset, `taskdesk dev` runs private servers under .taskdesk/ and the other commands
use them while it runs.

examples:
  taskdesk dev                      everything at once, with demo data
  taskdesk migrate && taskdesk serve --host 0.0.0.0
  taskdesk seed --tickets 1000000   a million tickets for benchmarks
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="taskdesk",
        description="taskdesk: a helpdesk whose slow work runs in the background and is "
        "never lost.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMANDS:
        module.register(subparsers)
    return parser


def _fail(message: str, code: int) -> int:
    print(message, file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns (and, as a console script, exits with) its status."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:  # a SystemExit: catch it before Python prints it as exit 1
        return _fail(str(exc.code), 2)
    except EmbeddedError as exc:
        return _fail(f"taskdesk {args.command}: {exc}", 1)
    except DeskError as exc:
        return _fail(f"taskdesk {args.command}: {exc.message}", 1)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        reason = _unreachable(exc)
        if reason is None:
            raise
        return _fail(f"taskdesk {args.command}: {reason}", 1)


def _unreachable(exc: Exception) -> str | None:
    """A one-line reason when `exc` means a server could not be reached, else None."""
    import psycopg
    from redis.exceptions import ConnectionError as RedisConnectionError
    from sqlalchemy.exc import OperationalError

    if isinstance(exc, OperationalError):
        exc = exc.orig if isinstance(exc.orig, Exception) else exc
    if isinstance(exc, psycopg.OperationalError):
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"cannot reach PostgreSQL (DATABASE_URL): {first}"
    if isinstance(exc, (RedisConnectionError, ConnectionRefusedError)):
        return f"cannot reach Redis (REDIS_URL): {exc}"
    return None
