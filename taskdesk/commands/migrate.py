"""`taskdesk migrate`: bring the database schema up to date (Alembic)."""

from __future__ import annotations

import argparse
import sys

from taskdesk.commands import Subparsers, add_data_dir
from taskdesk.config import resolve_settings


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "migrate",
        help="apply database migrations",
        description="Apply the Alembic migrations up to --revision (default: the newest). "
        "Safe to run again; run it once before starting new web/worker versions.",
    )
    p.add_argument("--revision", default="head", help="target revision (default: %(default)s)")
    p.add_argument(
        "--check",
        action="store_true",
        help="do not migrate; fail if the models and the migrations disagree",
    )
    add_data_dir(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from alembic.util.exc import CommandError

    settings = resolve_settings(args.data_dir)
    try:
        _run(settings.direct_sqlalchemy_url, args)  # a session: never through a pooler
    except CommandError as exc:
        print(f"taskdesk migrate: {exc}", file=sys.stderr)
        return 1
    return 0


def _run(url: str, args: argparse.Namespace) -> None:
    from taskdesk import migrate

    if args.check:
        migrate.check(url)
        print("taskdesk: models and migrations agree", file=sys.stderr)
    else:
        migrate.upgrade(url, args.revision)
        print(f"taskdesk: database migrated to {args.revision}", file=sys.stderr)
