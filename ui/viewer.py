"""Who is looking at a page: the signed-in user, their teams and the team they are working in.

Pages use the session cookie only (API tokens are for GraphQL and scripts). The current team is
a plain preference cookie: every desk call re-checks membership, so a forged value only ever
yields "not found".
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Annotated
from urllib.parse import quote
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fastapi import Depends, Request

from desk.core import inputs
from desk.core.errors import NotFound
from desk.core.models import Role
from desk.core.runtime import Runtime
from desk.people import users
from desk.people.users import TeamRole
from desk.reads import tasks as reads
from desk.reads.tasks import Person, SessionView, TaskHit
from ui import i18n
from web.auth import RuntimeDep, remember_session, session_secret

TEAM_COOKIE = "taskdesk_team"


class LoginRequired(Exception):
    """No valid session: the page sends the browser to sign in, then back to `next_url`."""

    def __init__(self, next_url: str) -> None:
        self.next_url = next_url
        super().__init__(next_url)


def login_url(next_url: str) -> str:
    return "/login?next=" + quote(next_url, safe="/")


def same_site_path(value: str) -> bool:
    """A path on this site and nothing else: starts with one `/`, no scheme or host (`//`),
    no backslash (browsers read it as `/`), no control or invisible characters (header
    splitting; browsers drop tabs and newlines, so `/<TAB>/evil` would become `//evil`)."""
    if not value.startswith("/") or value.startswith("//") or "\\" in value:
        return False
    return len(value) <= 2000 and value.isprintable()


def safe_next(value: str | None) -> str:
    """Only a path on this site may be a post-login destination; anything else: the tickets."""
    value = value or ""
    if not same_site_path(value) or value.startswith(("/login", "/logout")):
        return "/tickets"
    return value


def zone(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


@dataclass
class Viewer:
    user: Person
    csrf: str
    locale: str
    tz: ZoneInfo
    team_id: int | None  # the preferred team; membership is checked by desk on every call
    teams: list[TeamRole] = field(default_factory=list)  # loaded for whole pages only
    # A GET of `/tasks/{task_id}…` reads that task with the session (desk.reads.tasks.viewer): one
    # statement for the polled row; `ui.task_lists.row(..., found=v.task)` uses it.
    task: TaskHit | None = None
    unread: int | None = None  # read with the session for the bell (`bell_viewer`)

    @property
    def user_id(self) -> int:
        return self.user.id

    def require_team(self) -> int:
        """The team to work in; a user in no team sees "not found", like any outsider."""
        if self.team_id is None:
            raise NotFound("You are not a member of any team yet.")
        return self.team_id

    @property
    def team(self) -> TeamRole | None:
        return next((t for t in self.teams if t.team_id == self.team_id), None)

    @property
    def role(self) -> Role | None:
        return self.team.role if self.team else None

    @property
    def is_staff(self) -> bool:
        return self.role is not None and self.role.is_staff

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN


def _current_url(request: Request) -> str:
    """Where to come back to after signing in; for an htmx call, the page it came from."""
    if request.headers.get("hx-request") == "true" and request.headers.get("hx-current-url"):
        url = request.headers["hx-current-url"]
        host = str(request.base_url).rstrip("/")
        return url[len(host) :] if url.startswith(host) else "/tickets"
    query = f"?{request.url.query}" if request.url.query else ""
    return request.url.path + query


def _prefetch_task(request: Request) -> int | None:
    """The task a GET fragment is about (`/tasks/{task_id}`), read with the session."""
    if request.method != "GET":
        return None  # a change (cancel, retry) reads the row afresh after it
    raw = request.path_params.get("task_id")
    return inputs.optional_id(raw) if isinstance(raw, str) else None


def team_cookie(request: Request) -> int | None:
    """The preferred team: a preference, not a credential — anything but a plain id is ignored
    (the first team is used)."""
    return inputs.optional_id(request.cookies.get(TEAM_COOKIE, ""))


async def _viewer(rt: Runtime, request: Request, *, teams: bool, unread: bool = False) -> Viewer:
    """One statement: the session, its user, their teams (when asked or when no team is
    chosen) and the task the request is about, if any."""
    team_id = team_cookie(request)
    with_teams = teams or team_id is None
    secret = session_secret(rt, request)
    found = None
    if secret:
        task_id = _prefetch_task(request)
        found = await reads.viewer(
            rt.pg, secret, rt.clock(), teams=with_teams, task_id=task_id, unread=unread
        )
    return viewer_of(request, found, team_id)


def viewer_of(request: Request, found: SessionView | None, team_id: int | None) -> Viewer:
    """The Viewer of a session read (by `_viewer`, or with the page watcher's tick); a session
    not found sends the browser to sign in."""
    remember_session(request, found.person.id if found else None, found.csrf if found else "")
    if found is None:
        raise LoginRequired(_current_url(request))
    user = found.person
    viewer = Viewer(
        user=user,
        csrf=found.csrf,
        locale=i18n.pick(user.locale, request.headers.get("accept-language")),
        tz=zone(user.timezone),
        team_id=team_id,
        task=found.task,
        unread=found.unread,
    )
    if found.teams is not None:
        _choose_team(viewer, [TeamRole(t.team_id, t.team_name, t.role) for t in found.teams])
    request.state.viewer = viewer  # error pages show the same header
    return viewer


async def fragment_viewer(request: Request, rt: RuntimeDep) -> Viewer:
    """For polled fragments: the user; the team list only when no team is chosen."""
    return await _viewer(rt, request, teams=False)


async def bell_viewer(request: Request, rt: RuntimeDep) -> Viewer:
    """For the notification bell: the fragment viewer and the unread count, one statement."""
    return await _viewer(rt, request, teams=False, unread=True)


async def page_viewer(request: Request, rt: RuntimeDep) -> Viewer:
    """For whole pages: also the user's teams, and a valid current team when they have one."""
    return await _viewer(rt, request, teams=True)


def _choose_team(viewer: Viewer, teams: list[TeamRole]) -> Viewer:
    viewer.teams = teams
    if viewer.team is None:
        viewer.team_id = viewer.teams[0].team_id if viewer.teams else None
    return viewer


async def load_teams(rt: Runtime, viewer: Viewer) -> Viewer:
    if viewer.teams:
        return viewer  # read with the session already
    return _choose_team(viewer, await users.teams_of(rt, viewer.user_id))


async def viewer_for_error(request: Request) -> None:
    """An error page of a route that has no viewer (a download's 404, an unknown address, a
    500) still speaks the signed-in person's language and shows their header. Best effort:
    the error may be the database itself, so any trouble leaves the page anonymous."""
    if getattr(request.state, "viewer", None) is not None:
        return
    try:
        # Bounded: a database that hangs must not hold the error page too.
        await asyncio.wait_for(page_viewer(request, request.app.state.runtime), timeout=2)
    except Exception:  # signed out (LoginRequired), or the database is the trouble
        return


FragmentViewer = Annotated[Viewer, Depends(fragment_viewer)]
BellViewer = Annotated[Viewer, Depends(bell_viewer)]
PageViewer = Annotated[Viewer, Depends(page_viewer)]
