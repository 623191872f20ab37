"""Pages only a team's admins may use: members, API tokens, imports.

Anyone else — staff, customers, people of no team — gets exactly what an unknown address answers,
whatever the method, as the operators' console does: a page a role may not use does not exist
for it (docs/architecture.md, "Visibility"). The desk checks the role again in every call it
makes for these pages; this is only how the pages refuse.
"""

from __future__ import annotations

from fastapi import Request, Response
from starlette.exceptions import HTTPException

from desk.core.errors import NotAllowed, NotFound
from desk.core.models import Role
from desk.core.runtime import Runtime
from desk.people import members
from ui.viewer import Viewer
from web.errors import not_found


async def as_missing(request: Request) -> Response:
    """Exactly what an unknown address answers (`web.errors.not_found`), header and all."""
    request.state.viewer = None
    return await not_found(request, HTTPException(404))


async def is_admin(rt: Runtime, v: Viewer, team_id: int) -> bool:
    known = next((t for t in v.teams if t.team_id == team_id), None)
    if known is not None:
        return known.role is Role.ADMIN  # read with the session, by this request
    try:
        await members.require_team_admin(rt, v.user_id, team_id)
    except (NotAllowed, NotFound):
        return False
    return True


async def admin_team(rt: Runtime, v: Viewer, team_id: int | None = None) -> int | None:
    """The team the page is for (`team_id`, else the viewer's current team) when the viewer is
    one of its admins; None when the page must answer `as_missing`."""
    team = team_id or v.team_id
    if team is None or not await is_admin(rt, v, team):
        return None
    return team
