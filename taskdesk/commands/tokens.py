"""`taskdesk tokens`: API tokens for operators and automation — create one for a user (printed
once), list a user's tokens, revoke one. The same desk functions as the createApiToken and
revokeApiToken mutations."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from taskdesk.commands import Subparsers, add_data_dir, with_runtime


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "tokens",
        help="create, list or revoke API tokens",
        description="API tokens authenticate scripts against /graphql with "
        "`Authorization: Bearer <token>`. A token acts as its user, with that user's roles.",
    )
    sub = p.add_subparsers(dest="tokens_command", metavar="ACTION", required=True)
    create = sub.add_parser(
        "create", help="create a token for a user and print it (only this once)"
    )
    create.add_argument("--user", required=True, metavar="EMAIL")
    create.add_argument(
        "--name", required=True, help="what the token is for, e.g. 'nightly export'"
    )
    create.set_defaults(func=with_runtime(_create))
    ls = sub.add_parser("list", help="a user's tokens (never the secrets)")
    ls.add_argument("--user", required=True, metavar="EMAIL")
    ls.set_defaults(func=with_runtime(_list))
    revoke = sub.add_parser("revoke", help="revoke a user's token; it stops working at once")
    revoke.add_argument("--user", required=True, metavar="EMAIL")
    revoke.add_argument("token", metavar="ID|PREFIX", help="token id or prefix (tdk_…), see `list`")
    revoke.set_defaults(func=with_runtime(_revoke))
    for parser in (p, create, ls, revoke):
        add_data_dir(parser)


async def _create(rt: Any, args: argparse.Namespace) -> int:
    from desk.console import task_admin
    from desk.people import users

    user_id = await task_admin.user_id_by_email(rt, args.user)
    row, token = await users.create_token(rt, user_id, args.name)
    # The token alone on stdout, so `TOKEN=$(taskdesk tokens create ...)` works.
    print(
        f"created token {row.id} ({row.prefix}…) for {args.user}; it is shown only now",
        file=sys.stderr,
    )
    print(token)
    return 0


async def _list(rt: Any, args: argparse.Namespace) -> int:
    from desk.console import task_admin
    from desk.people import users

    rows = await users.list_tokens(rt, await task_admin.user_id_by_email(rt, args.user))
    print(f"{'id':>5}  {'prefix':<14} {'state':<8} {'last used':<17} name")
    for t in rows:
        used = f"{t.last_used_at:%Y-%m-%d %H:%M}" if t.last_used_at else "never"
        print(
            f"{t.id:>5}  {t.prefix:<14} {'revoked' if t.revoked_at else 'active':<8} {used:<17} {t.name}"
        )
    if not rows:
        print("(no tokens)")
    return 0


async def _revoke(rt: Any, args: argparse.Namespace) -> int:
    from desk.console import task_admin
    from desk.core.errors import NotFound
    from desk.people import users

    user_id = await task_admin.user_id_by_email(rt, args.user)
    wanted = args.token.strip()
    if wanted.isdigit():
        token_id = int(wanted)
    else:
        matches = [t.id for t in await users.list_tokens(rt, user_id) if t.prefix == wanted]
        if not matches:
            raise NotFound(f"{args.user} has no token {wanted!r} (see `taskdesk tokens list`).")
        token_id = matches[0] or 0
    row = await users.revoke_token(rt, user_id, token_id)
    print(f"revoked token {row.id} ({row.prefix}…) of {args.user}")
    return 0
