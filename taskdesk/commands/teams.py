"""`taskdesk teams create NAME [--admin EMAIL]`: the command line acts as a site operator
(desk.work.onboarding). With `--admin` it invites the team's first admin and prints the one-time
link (also e-mailed), which works until it expires (INVITATION_TTL_HOURS). Written to the
console's audit trail as done by "cli"."""

from __future__ import annotations

import argparse
from typing import Any

from taskdesk.commands import Subparsers, add_data_dir, with_runtime


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "teams",
        help="create a team (and invite its first admin)",
        description="Teams are created by site operators: here, or in the operators' console.",
    )
    sub = p.add_subparsers(dest="teams_command", metavar="ACTION", required=True)
    create = sub.add_parser("create", help="create a team; --admin invites its first admin")
    create.add_argument("name", metavar="NAME")
    create.add_argument("--admin", metavar="EMAIL", help="invite this address as the team's admin")
    create.set_defaults(func=with_runtime(_create))
    for parser in (p, create):
        add_data_dir(parser)


def print_link(rt: Any, new: Any) -> None:
    from desk.work import mail

    inv = new.invitation
    print(f"invited {inv.email} to {inv.team_name} as {inv.role.value}")
    print(f"link (works once, until {inv.expires_at:%Y-%m-%d %H:%M} UTC):")
    print(mail.absolute(new.path, rt.settings.public_url))


async def _create(rt: Any, args: argparse.Namespace) -> int:
    from desk.work import onboarding

    created = await onboarding.create_team(rt, None, args.name, args.admin)
    print(f"team {created.team.name!r} created (id {created.team.id})")
    if created.invitation is not None:
        print_link(rt, created.invitation)
    return 0
