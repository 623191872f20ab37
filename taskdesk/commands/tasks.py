"""`taskdesk tasks`: look into the ledger (list, show with a diagnosis), cancel or retry a task,
and start an export or a reminder as a given user — through the same desk functions as the
pages and GraphQL, never around them."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Any

from taskdesk.commands import Subparsers, add_data_dir, with_runtime

FIELDS = (
    "id", "kind", "status", "team_id", "owner_id", "ticket_id", "filters", "scope_creator_id",
    "reminder_revision", "note", "run_at", "progress", "progress_message", "attempts",
    "max_attempts", "last_error", "cancel_requested", "run", "sends", "execution_id", "dispatched_at",
    "lease_until", "started_at", "result_summary", "result_bytes", "expires_at", "finished_at",
    "created_at",
)  # fmt: skip


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "tasks",
        help="inspect and act on background tasks",
        description="Look into the task ledger (the PostgreSQL table that is the only truth "
        "about every task), cancel or retry a task, or start one as a user.",
    )
    sub = p.add_subparsers(dest="tasks_command", metavar="ACTION", required=True)
    ls = sub.add_parser("list", help="newest tasks first")
    ls.add_argument("--status", help="WAITING, RUNNING, COMPLETED, FAILED or CANCELLED")
    ls.add_argument("--kind", help="EXPORT, REMINDER, IMPORT or NOOP")
    ls.add_argument("--team", metavar="NAME", help="only this team's tasks")
    ls.add_argument("--limit", type=int, default=20, help="how many (default: %(default)s)")
    ls.set_defaults(func=with_runtime(_list, pool_size=2))
    for name, fn, helptext in (
        ("show", _show, "one task's ledger row, with what to do if it keeps waiting"),
        ("cancel", _cancel, "cancel a waiting task, or ask a running one to stop"),
        ("retry", _retry, "start a failed task again with a full set of attempts"),
    ):
        sp = sub.add_parser(name, help=helptext)
        sp.add_argument("id", type=int, help="task id")
        sp.set_defaults(func=with_runtime(fn, pool_size=2))
    ex = sub.add_parser("export", help="export tickets to CSV as a user (like the Export button)")
    ex.add_argument("--user", required=True, metavar="EMAIL")
    ex.add_argument("--team", required=True, metavar="NAME")
    ex.add_argument("--status", action="append", help="ticket status; repeat for several")
    ex.add_argument("--priority", action="append", help="ticket priority; repeat for several")
    ex.add_argument("--assignment", default="anyone", help="anyone, me or unassigned")
    ex.add_argument("--q", default="", help="title contains")
    ex.set_defaults(func=with_runtime(_export, pool_size=2))
    rm = sub.add_parser("remind", help="remind a ticket's assignee later, as a staff user")
    rm.add_argument("--user", required=True, metavar="EMAIL")
    rm.add_argument("--ticket", required=True, type=int, metavar="ID")
    when = rm.add_mutually_exclusive_group(required=True)
    when.add_argument("--in-minutes", type=int, metavar="N")
    when.add_argument(
        "--at", type=datetime.fromisoformat, metavar="ISO", help="e.g. 2026-12-01T09:00+08:00"
    )
    rm.add_argument("--note", default="")
    rm.set_defaults(func=with_runtime(_remind, pool_size=2))
    dl = sub.add_parser("download", help="save a completed export's CSV, as its owner")
    dl.add_argument("id", type=int, help="task id")
    dl.add_argument("--user", required=True, metavar="EMAIL", help="the export's owner")
    dl.add_argument(
        "-o", "--output", metavar="FILE", help="where to write (default: the export's file name)"
    )
    dl.set_defaults(func=with_runtime(_download, pool_size=2))
    for sp in (p, ls, ex, rm, dl, *[sub.choices[n] for n in ("show", "cancel", "retry")]):
        add_data_dir(sp)


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


async def _list(rt: Any, args: argparse.Namespace) -> None:
    from desk.console import task_admin
    from desk.work.tasks import status_label

    rows = await task_admin.list_tasks(
        rt, status=args.status, kind=args.kind, team=args.team, limit=args.limit
    )
    print(
        f"{'id':>7}  {'kind':<8} {'status':<10} {'label':<10} {'team':<14} {'owner':<22} run att  run_at"
    )
    now = rt.clock()
    for r in rows:
        t = r.task
        print(
            f"{t.id:>7}  {t.kind:<8} {t.status:<10} {status_label(t, now):<10} {r.team[:14]:<14} "
            f"{r.owner[:22]:<22} {t.run:>3} {t.attempts:>3}  {_when(t.run_at)}"
        )
    if not rows:
        print("(no tasks)")


async def _show(rt: Any, args: argparse.Namespace) -> None:
    from desk.console import health, task_admin
    from desk.ledger.lanes import lane_of

    task = await task_admin.get(rt, args.id)
    for name in FIELDS:
        value = getattr(task, name)
        print(f"{name:>18}: {_when(value) if isinstance(value, datetime) else value}")
    # Why is it still waiting? What Redis holds for its latest send, next to the ledger row.
    lane = lane_of(task.kind)
    print(f"{'lane':>18}: {lane}")
    print(f"{'in redis':>18}: {await rt.queue.describe(task.id, task.run, task.sends, lane)}")
    report = await health.check(rt)
    print(f"{'diagnosis':>18}: {await task_admin.diagnosis(rt, task, report)}")
    print(f"{'workers alive':>18}: {len(report.workers)}; queue depth {report.queue_depth}")


async def _cancel(rt: Any, args: argparse.Namespace) -> None:
    from desk.console import task_admin

    task = await task_admin.cancel(rt, args.id)
    print(
        f"task {task.id}: {task.status}{' (stop requested)' if task.cancel_requested and task.status == 'RUNNING' else ''}"
    )


async def _retry(rt: Any, args: argparse.Namespace) -> None:
    from desk.console import task_admin

    task = await task_admin.retry(rt, args.id)
    print(f"task {task.id}: {task.status}, run {task.run}")


async def _export(rt: Any, args: argparse.Namespace) -> None:
    from desk.console import task_admin
    from desk.core.errors import TaskConflict
    from desk.work import tasks

    user = await task_admin.user_id_by_email(rt, args.user)
    team = await task_admin.team_id_by_name(rt, args.team)
    filters = {
        "status": args.status or [],
        "priority": args.priority or [],
        "assignment": args.assignment,
        "q": args.q,
    }
    try:
        task = await tasks.create_export(rt, user, team, filters)
    except TaskConflict as exc:
        print(f"already exporting: following task {exc.existing.id}", file=sys.stderr)
        task = exc.existing
    print(f"task {task.id}: {task.status} (follow it with `taskdesk tasks show {task.id}`)")


async def _remind(rt: Any, args: argparse.Namespace) -> None:
    from desk.console import task_admin
    from desk.work import reminders

    user = await task_admin.user_id_by_email(rt, args.user)
    task = await reminders.schedule_reminder(
        rt, user, args.ticket, at=args.at, in_minutes=args.in_minutes, note=args.note
    )
    print(f"task {task.id}: {task.status}, due {_when(task.run_at)} UTC")


async def _download(rt: Any, args: argparse.Namespace) -> None:
    from desk.console import task_admin
    from desk.work import tasks

    user = await task_admin.user_id_by_email(rt, args.user)
    f = await tasks.open_export_result(rt, user, args.id)
    path = args.output or f.filename
    with open(path, "wb") as out:  # noqa: ASYNC230 - a local file, written chunk by chunk
        async for chunk in f.chunks:
            out.write(chunk)
    print(f"wrote {f.size:,} bytes to {path}")
