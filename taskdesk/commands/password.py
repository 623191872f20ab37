"""`taskdesk password --user EMAIL`: set a person's password (read from stdin, or asked twice
on a terminal) and sign them out everywhere — every session they had ends at once
(desk.people.users.set_password)."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys

from desk.core.settings import Settings
from taskdesk.commands import Subparsers, add_data_dir
from taskdesk.config import resolve_settings


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "password",
        help="set a user's password and end all their sessions",
        description="Sets the password of the user with this e-mail (8 to 1000 characters, "
        "one line on stdin, or typed twice at a terminal) and signs them out everywhere.",
    )
    p.add_argument("--user", required=True, metavar="EMAIL")
    add_data_dir(p)
    p.set_defaults(func=_run)


def _read_password() -> str:
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass("New password: ")
    if getpass.getpass("Again: ") != first:
        raise SystemExit("taskdesk: the two passwords differ; nothing changed")
    return first


def _run(args: argparse.Namespace) -> int:
    settings = resolve_settings(getattr(args, "data_dir", None), quiet=True)
    return asyncio.run(_set(settings, args.user, _read_password()))


async def _set(settings: Settings, email: str, password: str) -> int:
    from desk.console import task_admin as ops
    from desk.core.runtime import Runtime
    from desk.people import users

    rt = await Runtime.open(settings, pool_size=1)
    try:
        user_id = await ops.user_id_by_email(rt, email)
        ended = await users.set_password(rt, user_id, password)
    finally:
        await rt.close()
    print(f"password of {email} changed; {ended} session(s) ended", file=sys.stderr)
    return 0
