"""`taskdesk lanes`: list the lanes (kinds, slots, pause state), pause or resume one.

A paused lane keeps accepting tasks; they wait, unsent, until it is resumed (desk/ledger/lanes.py)."""

from __future__ import annotations

import argparse
import getpass
from typing import Any

from taskdesk.commands import Subparsers, add_data_dir, with_runtime


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "lanes",
        help="list, pause or resume the lanes tasks run in",
        description="Short tasks (reminders) and long ones (exports, imports) run in separate "
        "lanes with their own worker slots. Pausing a lane stops sending its tasks; they are "
        "still accepted and wait until it is resumed.",
    )
    sub = p.add_subparsers(dest="lanes_command", metavar="ACTION", required=True)
    ls = sub.add_parser("list", help="every lane with its kinds, slots and pause state")
    ls.set_defaults(func=with_runtime(_list))
    for action, fn, helptext in (
        ("pause", _pause, "stop sending a lane's tasks"),
        ("resume", _resume, "send again"),
    ):
        sp = sub.add_parser(action, help=helptext)
        sp.add_argument("lane", help="short or long")
        sp.set_defaults(func=with_runtime(fn))
    for sp in (p, ls, sub.choices["pause"], sub.choices["resume"]):
        add_data_dir(sp)


async def _list(rt: Any, args: argparse.Namespace) -> None:
    from desk.ledger import lanes

    _print(await lanes.states(rt))


async def _pause(rt: Any, args: argparse.Namespace) -> None:
    from desk.ledger import lanes

    _print([await lanes.pause(rt, args.lane, None, f"cli ({_login()})")])


async def _resume(rt: Any, args: argparse.Namespace) -> None:
    from desk.ledger import lanes

    _print([await lanes.resume(rt, args.lane, None, f"cli ({_login()})")])


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        return "unknown"


def _print(states: list[Any]) -> None:
    print(f"{'lane':<6} {'state':<8} {'slots/worker':>12}  {'team max':>8}  kinds")
    for s in states:
        state = "PAUSED" if s.paused else "running"
        since = f"  (paused {s.paused_at:%Y-%m-%d %H:%M:%S} UTC)" if s.paused_at else ""
        team = s.team_max_running or "-"
        print(f"{s.name:<6} {state:<8} {s.slots:>12}  {team:>8}  {', '.join(s.kinds)}{since}")
