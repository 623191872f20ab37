"""`taskdesk import FILE`: start a ticket import through the same ledger as the page (never
around it) and, with --wait, follow it with a progress bar until it ends."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from desk.core.models import TaskStatus
from taskdesk.commands import Subparsers, add_data_dir, with_runtime

TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "import",
        help="import tickets from a CSV file into a team",
        description="Import tickets from a CSV (the columns taskdesk's export writes, plus an optional "
        "external_id). create: add tickets whose external id is new; upsert: also update title, "
        "status, priority and assignee of existing ones. One import per team at a time; bad rows "
        "are reported, not fatal.",
    )
    p.add_argument("file", type=Path, help="the CSV file (UTF-8)")
    p.add_argument("--team", required=True, metavar="NAME", help="the team that gets the tickets")
    p.add_argument(
        "--mode", choices=("create", "upsert"), default="create", help="default: %(default)s"
    )
    p.add_argument(
        "--user", metavar="EMAIL", help="the admin to act as (default: the team's first admin)"
    )
    p.add_argument("--wait", action="store_true", help="show progress until the import ends")
    p.add_argument(
        "--report", type=Path, metavar="FILE", help="with --wait: write rejected rows here"
    )
    add_data_dir(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.file.is_file():
        print(f"taskdesk import: no such file: {args.file}", file=sys.stderr)
        return 2
    return with_runtime(_run, pool_size=2)(args)


async def _run(rt: Any, args: argparse.Namespace) -> int:
    from desk.console import task_admin
    from desk.core.errors import TaskConflict
    from desk.imports import service as imports

    team = await task_admin.team_id_by_name(rt, args.team)
    user = (
        await task_admin.user_id_by_email(rt, args.user)
        if args.user
        else await task_admin.first_admin(rt, team)
    )
    try:
        task = await imports.submit_import(
            rt, user, team, args.file.name, args.file.read_bytes(), args.mode
        )
    except TaskConflict as exc:
        print(
            f"an import is already running for this team: following task {exc.existing.id}",
            file=sys.stderr,
        )
        task = exc.existing
    print(f"task {task.id}: {task.status}")
    if not args.wait or task.id is None:
        return 0
    return await _follow(rt, user, task.id, args.report)


async def _follow(rt: Any, user: int, task_id: int, report: Path | None) -> int:
    from desk.imports import service as imports
    from desk.work import tasks

    tty = sys.stderr.isatty()
    last_line = 0.0
    while True:
        task = await tasks.get_task(rt, user, task_id)
        if tty or time.monotonic() - last_line > 2 or task.status in TERMINAL:
            _bar(task, tty)
            last_line = time.monotonic()
        if task.status in TERMINAL:
            break
        await asyncio.sleep(0.3)
    if tty:
        print(file=sys.stderr)
    print(f"task {task.id}: {task.status} — {task.result_summary or task.last_error or ''}")
    if report and task.stats.get("rejected"):
        with report.open("wb") as out:
            async for chunk in await imports.open_report(rt, user, task_id):
                out.write(chunk)
        print(f"rejected rows written to {report}")
    return 0 if task.status == TaskStatus.COMPLETED else 1


def _bar(task: Any, tty: bool) -> None:
    total = task.progress_total or 0
    width = 30
    filled = int(width * task.progress)
    text = f"[{'#' * filled}{'.' * (width - filled)}] {task.progress_current:,} / {total:,} rows  {task.status.lower()}"
    print(("\r" + text) if tty else text, end="" if tty else "\n", file=sys.stderr, flush=True)
