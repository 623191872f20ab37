"""`taskdesk invite --team NAME --email E --role R`: invite an address to a team with a role as the
command line's operator, and print the one-time link (also e-mailed). Inviting the same address
again replaces the earlier link. Written to the console's audit trail as done by "cli"."""

from __future__ import annotations

import argparse
from typing import Any

from taskdesk.commands import Subparsers, add_data_dir, with_runtime
from taskdesk.commands.teams import print_link


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "invite",
        help="invite an e-mail address to a team with a role; prints the link",
        description="Invites the address to the team with the role (ADMIN, STAFF or CUSTOMER) "
        "and prints the one-time link; inviting the address again replaces the earlier link.",
    )
    p.add_argument("--team", required=True, metavar="NAME")
    p.add_argument("--email", required=True, metavar="EMAIL")
    p.add_argument("--role", required=True, metavar="ROLE", help="ADMIN, STAFF or CUSTOMER")
    add_data_dir(p)
    p.set_defaults(func=with_runtime(_invite))


async def _invite(rt: Any, args: argparse.Namespace) -> int:
    from desk.work import onboarding

    print_link(rt, await onboarding.invite_by_team_name(rt, args.team, args.email, args.role))
    return 0
