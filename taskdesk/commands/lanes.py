"""`taskdesk lanes`: list the lanes (kinds, slots, pause state), pause or resume one.

A paused lane keeps accepting tasks; they wait, unsent, until it is resumed (desk/ledger/lanes.py)."""

from __future__ import annotations

import argparse
import asyncio
import getpass
from typing import Any

from taskdesk.commands import Subparsers, add_data_dir
from taskdesk.config import resolve_settings


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
    ls.set_defaults(func=_cmd("list"))
    for action, helptext in (("pause", "stop sending a lane's tasks"), ("resume", "send again")):
        sp = sub.add_parser(action, help=helptext)
        sp.add_argument("lane", help="short or long")
        sp.set_defaults(func=_cmd(action))
    for sp in (p, ls, sub.choices["pause"], sub.choices["resume"]):
        add_data_dir(sp)


def _cmd(action: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        settings = resolve_settings(getattr(args, "data_dir", None), quiet=True)
        asyncio.run(_run(settings, action, getattr(args, "lane", None)))
        return 0

    return run


async def _run(settings: Any, action: str, lane: str | None) -> None:
    from desk.core.runtime import Runtime
    from desk.ledger import lanes

    rt = await Runtime.open(settings, pool_size=1)
    try:
        actor = f"cli ({_login()})"
        if action == "pause":
            _print([await lanes.pause(rt, lane or "", None, actor)])
        elif action == "resume":
            _print([await lanes.resume(rt, lane or "", None, actor)])
        else:
            _print(await lanes.states(rt))
    finally:
        await rt.close()


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
