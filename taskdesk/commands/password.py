"""`taskdesk password --user EMAIL`: set a person's password (read from stdin, or asked twice
on a terminal) and sign them out everywhere — every session they had ends at once
(desk.people.users.set_password)."""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

from taskdesk.commands import Subparsers, add_data_dir, with_runtime


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "password",
        help="set a user's password and end all their sessions",
        description="Sets the password of the user with this e-mail (8 to 1000 characters, "
        "one line on stdin, or typed twice at a terminal) and signs them out everywhere.",
    )
    p.add_argument("--user", required=True, metavar="EMAIL")
    add_data_dir(p)
    p.set_defaults(func=with_runtime(_set))


def _read_password() -> str:
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass("New password: ")
    if getpass.getpass("Again: ") != first:
        raise SystemExit("taskdesk: the two passwords differ; nothing changed")
    return first


async def _set(rt: Any, args: argparse.Namespace) -> None:
    from desk.console import task_admin
    from desk.people import users

    password = _read_password()
    user_id = await task_admin.user_id_by_email(rt, args.user)
    ended = await users.set_password(rt, user_id, password)
    print(f"password of {args.user} changed; {ended} session(s) ended", file=sys.stderr)
