"""A team's mailboxes over REST (docs/rest.md, "Mailboxes"): list and connect a team's
mailboxes, read, change and remove one, test its connection, and the mail it holds for review.

Every rule is desk.work.mailbox_admin's and desk.work.mailbox_held's, as for GraphQL and the
pages: only the team's admins; to anyone else a team answers exactly as a missing team and a
mailbox (or held message) as a missing one. The password is write-only: no answer carries it,
and a refused one is named by its field alone. The bodies' schemas say every rule the desk checks,
so a schema-valid request is never refused for its values (tests/api/test_openapi_fuzz.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Body, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from api.openapi import ERRORS, PLAIN_TEXT, SOME_TEXT
from api.rest import PREFIX, caller_of
from desk.core.errors import NotFound
from desk.core.inputs import optional_id
from desk.work import mailbox_admin, mailbox_held
from desk.work.mailbox_admin import CADENCE_MAX, CADENCE_MIN, PASSWORD_MAX, MailboxView
from web.auth import RuntimeDep

router = APIRouter(prefix=PREFIX, tags=["mailboxes"])

T = TypeVar("T")

# desk.work.mailbox_admin.host_of's rule without look-arounds: dot-separated labels of letters,
# digits and inner hyphens (an IPv4 address is such a name too).
_LABEL = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
HOST = f"^{_LABEL}(\\.{_LABEL})*\\.?$"
Host = Annotated[str, Field(max_length=253, pattern=HOST, description="e.g. imap.example.com")]
Port = Annotated[int, Field(ge=1, le=65535)]
Username = Annotated[str, Field(max_length=320, pattern=SOME_TEXT)]
Password = Annotated[
    str,
    Field(min_length=1, max_length=PASSWORD_MAX, pattern=PLAIN_TEXT,
          description="Write-only: never in any answer"),
]  # fmt: skip
Folder = Annotated[str, Field(max_length=200, pattern=SOME_TEXT)]
Cadence = Annotated[
    int, Field(ge=CADENCE_MIN, le=CADENCE_MAX, description="Seconds between fetches")
]


class MailboxIn(BaseModel):
    """A new mailbox: host, username and password are required."""

    model_config = ConfigDict(extra="forbid")

    host: Host
    port: Port = 993
    use_tls: bool = True
    username: Username
    password: Password
    folder: Folder = "INBOX"
    cadence_seconds: Cadence = 30
    enabled: bool = True
    staff_only: bool = Field(
        False, description="Mail from outside the team is held for review, not made a customer"
    )


class MailboxPatch(BaseModel):
    """The settings to change; those left out stay (the password too)."""

    model_config = ConfigDict(extra="forbid")

    host: Host | None = None
    port: Port | None = None
    use_tls: bool | None = None
    username: Username | None = None
    password: Password | None = None
    folder: Folder | None = None
    cadence_seconds: Cadence | None = None
    enabled: bool | None = None
    staff_only: bool | None = None


class MailboxOut(BaseModel):
    mailbox_id: int
    team_id: int
    host: str
    port: int
    use_tls: bool
    username: str
    folder: str
    cadence_seconds: int
    enabled: bool
    staff_only: bool
    is_dev: bool = Field(description="The dev mail page's mailbox: no server, never fetched")
    last_fetch_at: datetime | None
    lag_seconds: float | None = Field(description="Since the last fetch (or creation), if enabled")
    last_error: str | None = Field(description="Why the last fetch failed, if it did")
    held_count: int = Field(description="Messages held for review")
    created_at: datetime


class MailboxListOut(BaseModel):
    items: list[MailboxOut]


class CheckOut(BaseModel):
    ok: bool
    step: str = Field(
        description="ok, or the step that failed: dns, refused, timeout, tls, login, folder, "
        "protocol"
    )
    message: str = Field(description="What happened, naming host, port and folder")


class HeldOut(BaseModel):
    held_id: int
    mailbox_id: int
    sender: str | None
    subject: str
    received_at: datetime
    problem: str | None


class HeldListOut(BaseModel):
    items: list[HeldOut] = Field(description="Newest first, at most 100")


class HeldDoneOut(BaseModel):
    held_id: int
    outcome: str = Field(description="accepted (the sender is a customer now) or discarded")


def mailbox_json(v: MailboxView) -> dict[str, Any]:
    return {
        "mailbox_id": v.id, "team_id": v.team_id, "host": v.host, "port": v.port,
        "use_tls": v.use_tls, "username": v.username, "folder": v.folder,
        "cadence_seconds": v.cadence_seconds, "enabled": v.enabled, "staff_only": v.staff_only,
        "is_dev": v.is_dev,
        "last_fetch_at": v.last_fetch_at.isoformat() if v.last_fetch_at else None,
        "lag_seconds": v.lag_seconds, "last_error": v.last_error, "held_count": v.held_count,
        "created_at": v.created_at.isoformat(),
    }  # fmt: skip


def held_json(h: mailbox_held.Held) -> dict[str, Any]:
    return {
        "held_id": h.id, "mailbox_id": h.mailbox_id, "sender": h.sender, "subject": h.subject,
        "received_at": h.received_at.isoformat(), "problem": h.problem,
    }  # fmt: skip


async def _as_mailbox(rt: Any, mailbox_id: str, call: Callable[[int], Awaitable[T]]) -> T:
    """`call(team)` for the mailbox's team; a mailbox that is missing or not the caller's to
    manage (the desk's "Team not found." included) is one answer: "Mailbox not found."."""
    team = await mailbox_admin.team_of(rt, mailbox_id)
    try:
        if team is None:
            raise NotFound
        return await call(team)
    except NotFound:
        raise NotFound("Mailbox not found.") from None


@router.get("/teams/{team_id}/mailboxes", response_model=MailboxListOut, responses=ERRORS.read)
async def list_mailboxes(team_id: str, request: Request, rt: RuntimeDep) -> JSONResponse:
    """The team's mailboxes (admins); 404 for anyone else, as for a missing team."""
    caller = await caller_of(rt, request, write=False)
    found = await mailbox_admin.list_mailboxes(rt, caller.user_id, team_id)
    return JSONResponse({"items": [mailbox_json(v) for v in found]})


@router.post(
    "/teams/{team_id}/mailboxes",
    status_code=201,
    response_model=MailboxOut,
    responses=ERRORS.write,
)
async def create_mailbox(
    team_id: str, body: MailboxIn, request: Request, rt: RuntimeDep
) -> JSONResponse:
    """Connect a mailbox (admins); its first fetch is due at once when enabled."""
    caller = await caller_of(rt, request, write=True)
    made = await mailbox_admin.create_mailbox(rt, caller.user_id, team_id, body.model_dump())
    headers = {"Location": f"{PREFIX}/mailboxes/{made.id}"}
    return JSONResponse(mailbox_json(made), status_code=201, headers=headers)


@router.get("/mailboxes/{mailbox_id}", response_model=MailboxOut, responses=ERRORS.read)
async def get_mailbox(mailbox_id: str, request: Request, rt: RuntimeDep) -> JSONResponse:
    """One mailbox (its team's admins); 404 for anyone else, as for a missing one."""
    caller = await caller_of(rt, request, write=False)
    box = await _as_mailbox(
        rt, mailbox_id, lambda t: mailbox_admin.get_mailbox(rt, caller.user_id, t, mailbox_id)
    )
    return JSONResponse(mailbox_json(box))


@router.patch("/mailboxes/{mailbox_id}", response_model=MailboxOut, responses=ERRORS.write)
async def update_mailbox(
    mailbox_id: str, body: MailboxPatch, request: Request, rt: RuntimeDep
) -> JSONResponse:
    """Change the settings given (a password left out keeps the stored one); an enabled
    mailbox is fetched again at once with them."""
    caller = await caller_of(rt, request, write=True)
    raw = body.model_dump(exclude_none=True)
    box = await _as_mailbox(
        rt, mailbox_id,
        lambda t: mailbox_admin.update_mailbox(rt, caller.user_id, t, mailbox_id, raw),
    )  # fmt: skip
    return JSONResponse(mailbox_json(box))


@router.delete("/mailboxes/{mailbox_id}", status_code=204, responses=ERRORS.write)
async def delete_mailbox(mailbox_id: str, request: Request, rt: RuntimeDep) -> Response:
    """Remove the mailbox and the mail fetched into it; the tickets made from it stay."""
    caller = await caller_of(rt, request, write=True)
    await _as_mailbox(
        rt, mailbox_id, lambda t: mailbox_admin.delete_mailbox(rt, caller.user_id, t, mailbox_id)
    )
    return Response(status_code=204)


@router.post("/mailboxes/{mailbox_id}/test", response_model=CheckOut, responses=ERRORS.write)
async def test_mailbox(
    mailbox_id: str,
    request: Request,
    rt: RuntimeDep,
    body: Annotated[MailboxPatch | None, Body()] = None,
) -> JSONResponse:
    """Connect, log in and open the folder as a fetch would, within a few seconds: `ok`, or
    the step that failed and what happened. A body tries values not saved yet (a password left
    out: the stored one)."""
    caller = await caller_of(rt, request, write=True)
    raw = body.model_dump(exclude_none=True) if body else None
    got = await _as_mailbox(
        rt, mailbox_id,
        lambda t: mailbox_admin.test_mailbox(rt, caller.user_id, t, mailbox_id, raw),
    )  # fmt: skip
    return JSONResponse({"ok": got.ok, "step": got.step, "message": got.message})


@router.get("/mailboxes/{mailbox_id}/held", response_model=HeldListOut, responses=ERRORS.read)
async def list_held(mailbox_id: str, request: Request, rt: RuntimeDep) -> JSONResponse:
    """The mail this mailbox holds for review (a staff-only mailbox's mail from outsiders)."""
    caller = await caller_of(rt, request, write=False)
    found = await _as_mailbox(
        rt, mailbox_id, lambda t: mailbox_held.list_held(rt, caller.user_id, t)
    )
    mine = [held_json(h) for h in found if h.mailbox_id == optional_id(mailbox_id)]
    return JSONResponse({"items": mine})


async def _held_action(
    rt: Any, user_id: int, mailbox_id: str, held_id: str, action: str
) -> JSONResponse:
    async def run(team: int) -> None:
        box = await mailbox_admin.get_mailbox(rt, user_id, team, mailbox_id)  # the admin, first
        if not await mailbox_held.held_in(rt, box.id, held_id):
            raise NotFound
        act = mailbox_held.accept if action == "accepted" else mailbox_held.discard
        await act(rt, user_id, team, held_id)

    try:
        await _as_mailbox(rt, mailbox_id, run)
    except NotFound:
        raise NotFound("Held message not found.") from None
    return JSONResponse({"held_id": optional_id(held_id), "outcome": action})


@router.post(
    "/mailboxes/{mailbox_id}/held/{held_id}/accept",
    response_model=HeldDoneOut,
    responses=ERRORS.write,
)
async def accept_held(
    mailbox_id: str, held_id: str, request: Request, rt: RuntimeDep
) -> JSONResponse:
    """Make the sender a customer of the team; the message then becomes a ticket (or a reply)
    as any customer's does."""
    caller = await caller_of(rt, request, write=True)
    return await _held_action(rt, caller.user_id, mailbox_id, held_id, "accepted")


@router.post(
    "/mailboxes/{mailbox_id}/held/{held_id}/discard",
    response_model=HeldDoneOut,
    responses=ERRORS.write,
)
async def discard_held(
    mailbox_id: str, held_id: str, request: Request, rt: RuntimeDep
) -> JSONResponse:
    """Keep the message but never make it a ticket; it leaves the list."""
    caller = await caller_of(rt, request, write=True)
    return await _held_action(rt, caller.user_id, mailbox_id, held_id, "discarded")
