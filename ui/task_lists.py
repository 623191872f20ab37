"""Task lists as the pages show them: rows built from `desk.tasks`, reminder rows titled by ticket."""

from __future__ import annotations

from dataclasses import dataclass

from desk import lanes, tasks, tickets
from desk.errors import NotFound
from desk.models import BackgroundTask, TaskKind, TaskStatus
from desk.runtime import Runtime
from ui import taskview
from ui.taskview import TaskView

PANEL_SIZE = 8
PAGE_SIZE = 50


@dataclass
class TaskListView:
    rows: list[TaskView]
    newest: int  # highest id shown: the cheap "anything newer?" check asks past it
    limit: int
    end_cursor: str | None = None
    has_next: bool = False
    watch: bool = True  # page two onwards does not look for new tasks
    kind: str | None = None  # a list of one kind (the import page's imports)
    watch_url: str = "/tasks"  # where the "anything newer?" check asks


async def ticket_titles(rt: Runtime, user_id: int, items: list[BackgroundTask]) -> dict[int, str]:
    titles: dict[int, str] = {}
    for tid in {t.ticket_id for t in items if t.kind == TaskKind.REMINDER and t.ticket_id}:
        try:
            titles[tid] = (await tickets.get_ticket(rt, user_id, tid)).title
        except NotFound:
            continue  # deleted since, or no longer visible: the row shows the number only
    return titles


async def paused_lanes(rt: Runtime, items: list[BackgroundTask]) -> frozenset[str]:
    """Lanes an operator paused, read only when a row waits (the rows then say so)."""
    if not any(t.status == TaskStatus.WAITING for t in items):
        return frozenset()
    async with rt.engine.connect() as conn:
        return frozenset(await lanes.paused_lanes(conn))


async def views(rt: Runtime, user_id: int, items: list[BackgroundTask]) -> list[TaskView]:
    titles = await ticket_titles(rt, user_id, items)
    paused = await paused_lanes(rt, items)
    now = rt.clock()
    return [
        taskview.build(
            t,
            viewer_id=user_id,
            now=now,
            ticket_title=titles.get(t.ticket_id or 0),
            paused_lanes=paused,
        )
        for t in items
    ]


async def row(rt: Runtime, user_id: int, task_id: int, since: float | None) -> TaskView:
    task = await tasks.get_task(rt, user_id, task_id)
    titles = await ticket_titles(rt, user_id, [task])
    return taskview.build(
        task,
        viewer_id=user_id,
        now=rt.clock(),
        since=since,
        ticket_title=titles.get(task.ticket_id or 0),
        paused_lanes=await paused_lanes(rt, [task]),
    )


async def task_list(
    rt: Runtime,
    user_id: int,
    team_id: int,
    *,
    limit: int,
    after: str | None = None,
    kind: TaskKind | None = None,
    watch_url: str = "/tasks",
) -> TaskListView:
    page = await tasks.list_tasks(rt, user_id, team_id, first=limit, after=after, kind=kind)
    rows = await views(rt, user_id, page.items)
    newest = max((r.id for r in rows), default=0)
    return TaskListView(
        rows,
        newest,
        limit,
        page.end_cursor,
        page.has_next and limit == PAGE_SIZE,
        after is None,
        kind,
        watch_url,
    )


async def anything_newer(
    rt: Runtime, user_id: int, team_id: int, newest: int, *, kind: TaskKind | None = None
) -> bool:
    """One indexed read: is there a visible task with an id above the newest one shown?"""
    page = await tasks.list_tasks(rt, user_id, team_id, first=1, newer_than=newest, kind=kind)
    return bool(page.items)
