"""Task lists as the pages show them: rows read through `desk.reads.tasks` (one statement per list or
row), reminder rows titled by their ticket."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from desk.core.errors import NotFound
from desk.core.models import BackgroundTask, TaskKind, TaskStatus
from desk.core.runtime import Runtime
from desk.reads import tasks as reads
from desk.reads.tasks import TaskHit, TaskRow
from ui import taskview
from ui.taskview import TaskView

PANEL_SIZE = 8
PAGE_SIZE = 50

Task = TaskRow | BackgroundTask


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


async def ticket_titles(rt: Runtime, user_id: int, items: Sequence[Task]) -> dict[int, str]:
    """Titles of the reminders' tickets `user_id` may see (a deleted or hidden one: left out,
    the row shows the number only)."""
    ids = {t.ticket_id for t in items if t.kind == TaskKind.REMINDER and t.ticket_id}
    return await reads.ticket_titles(rt.pg, user_id, sorted(ids))


async def paused_lanes(rt: Runtime, items: Sequence[Task]) -> frozenset[str]:
    """Lanes an operator paused, read only when a row waits (the rows then say so)."""
    if not any(t.status == TaskStatus.WAITING for t in items):
        return frozenset()
    return await reads.paused_lanes(rt.pg)


async def views(
    rt: Runtime,
    user_id: int,
    items: Sequence[Task],
    *,
    titles: dict[int, str] | None = None,
    paused: frozenset[str] | None = None,
) -> list[TaskView]:
    """Rows for `items`; `titles` and `paused` when the caller read them already."""
    if titles is None:
        titles = await ticket_titles(rt, user_id, items)
    if paused is None:
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


async def row(
    rt: Runtime, user_id: int, task_id: int, since: float | None, *, found: TaskHit | None = None
) -> TaskView:
    """The row of a task `user_id` may see (NotFound otherwise, as for a missing one). `found`:
    the same read done already (`Viewer.task`, read with the session)."""
    hit = found if found is not None else await reads.task(rt.pg, user_id, task_id)
    if hit.task is None:
        raise NotFound("Task not found.")
    return taskview.build(
        hit.task,
        viewer_id=user_id,
        now=rt.clock(),
        since=since,
        ticket_title=hit.ticket_title,
        paused_lanes=hit.paused_lanes,
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
    page = await reads.list_tasks(rt.pg, user_id, team_id, first=limit, after=after, kind=kind)
    return await list_view(rt, user_id, page, limit, after=after, kind=kind, watch_url=watch_url)


async def list_view(
    rt: Runtime,
    user_id: int,
    page: reads.TaskPage,
    limit: int,
    *,
    after: str | None = None,
    kind: TaskKind | None = None,
    watch_url: str = "/tasks",
) -> TaskListView:
    """The list of a page read already (`task_list`, or the page watcher's tick)."""
    rows = await views(rt, user_id, page.items, titles=page.titles, paused=page.paused_lanes)
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
    return await reads.anything_newer(rt.pg, user_id, team_id, newest, kind=kind)
