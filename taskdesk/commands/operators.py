"""`taskdesk operators add EMAIL | remove EMAIL | list`: the site-level operator role, granted
from the command line only (never through a page). Operators see every team in the console at
/ops; each grant and removal is written to the console's audit trail."""

from __future__ import annotations

import argparse
from typing import Any

from taskdesk.commands import Subparsers, add_data_dir, with_runtime


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "operators",
        help="grant, remove or list the site-level operator role",
        description="Operators see and steer every team's tasks, workers and lanes in the "
        "operators' console (/ops). Team admins see the console for their own team only.",
    )
    sub = p.add_subparsers(dest="operators_command", metavar="ACTION", required=True)
    add = sub.add_parser("add", help="make a user an operator")
    add.add_argument("email", metavar="EMAIL")
    add.set_defaults(func=with_runtime(_add))
    remove = sub.add_parser("remove", help="take the operator role away")
    remove.add_argument("email", metavar="EMAIL")
    remove.set_defaults(func=with_runtime(_remove))
    ls = sub.add_parser("list", help="every operator")
    ls.set_defaults(func=with_runtime(_list))
    for parser in (p, add, remove, ls):
        add_data_dir(parser)


async def _add(rt: Any, args: argparse.Namespace) -> int:
    from desk.people import operators

    added = await operators.add(rt, args.email)
    print(f"{args.email} is {'now' if added else 'already'} an operator")
    return 0


async def _remove(rt: Any, args: argparse.Namespace) -> int:
    from desk.people import operators

    removed = await operators.remove(rt, args.email)
    print(f"{args.email} is {'no longer' if removed else 'not'} an operator")
    return 0


async def _list(rt: Any, args: argparse.Namespace) -> int:
    from desk.people import operators

    rows = await operators.list_all(rt)
    for r in rows:
        print(f"{r.email:<40} {r.display_name:<30} since {r.since:%Y-%m-%d %H:%M}")
    if not rows:
        print("(no operators: grant the role with `taskdesk operators add EMAIL`)")
    return 0
