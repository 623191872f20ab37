"""The mailboxes page `/mailboxes` of the viewer's team (docs/architecture.md, "Mail in"): its
mailboxes with host, user, folder, staff-only, last fetch, lag and last error; connect one, edit
(`/mailboxes/{id}`), delete, "Test connection" (an htmx fragment saying in words which step
failed), and the mail held for review with Accept / Discard.

The rules live in desk.work.mailbox_admin and desk.work.mailbox_held: only the team's admins;
anyone else, and a mailbox or held message of another team, gets exactly what an unknown
address answers (ui/admin_only.py). The password field is never filled in: it is write-only, and
an edit that leaves it blank keeps the stored one."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.datastructures import FormData

from desk.core.errors import NotFound, ValidationProblem
from desk.core.runtime import Runtime
from desk.work import mailbox_admin, mailbox_check, mailbox_held
from desk.work.mailbox_admin import MailboxView
from ui.admin_only import admin_team, as_missing
from ui.render import fragment_or_page, is_htmx, render
from ui.route import UiRoute, redirect
from ui.viewer import PageViewer, Viewer
from web.auth import RuntimeDep

router = APIRouter(route_class=UiRoute)

TEXT_FIELDS = ("host", "port", "username", "password", "folder", "cadence_seconds")
FLAGS = ("use_tls", "enabled", "staff_only")
# Each step of "Test connection" in words (translated by the template); the check's own message,
# naming host, port and folder, follows in English.
STEPS = {
    mailbox_check.OK: "Connected, logged in and opened the folder.",
    mailbox_check.DNS: "The server's name could not be found (DNS).",
    mailbox_check.REFUSED: "The server refused the connection: nothing listens on that port.",
    mailbox_check.TIMEOUT_STEP: "The server did not answer in time.",
    mailbox_check.TLS: "The secure connection (TLS) could not be set up.",
    mailbox_check.LOGIN: "The server rejected the user name or password.",
    mailbox_check.FOLDER: "Logged in, but the folder could not be opened.",
    mailbox_check.PROTOCOL: "Something answered on that port, but it does not speak IMAP.",
}


def form_values(data: FormData) -> dict[str, Any]:
    """The form as desk.work.mailbox_admin.clean reads it: text as typed, a checkbox left
    unticked is false. A blank password is left out (on an edit: keep the stored one)."""
    raw: dict[str, Any] = {k: str(data.get(k) or "") for k in TEXT_FIELDS}
    raw.update({k: data.get(k) is not None for k in FLAGS})
    if not raw["password"]:
        del raw["password"]
    return raw


def shown(raw: dict[str, Any]) -> dict[str, Any]:
    """What a form shows again: never the password."""
    return {k: v for k, v in raw.items() if k != "password"}


def _as_form(box: MailboxView) -> dict[str, Any]:
    keys = ("host", "port", "username", "folder", "cadence_seconds", *FLAGS)
    return {k: getattr(box, k) for k in keys}


NEW_FORM: dict[str, Any] = {
    "host": "", "port": 993, "username": "", "folder": "INBOX", "cadence_seconds": 30,
    "use_tls": True, "enabled": True, "staff_only": False,
}  # fmt: skip


async def _answer(
    request: Request, rt: Runtime, v: Viewer, team: int, *, status: int = 200, **extra: Any
) -> Response:
    # A plain form post that worked goes back to the page; a test's answer is shown on it.
    if request.method == "POST" and not is_htmx(request) and status < 400 and "tested" not in extra:
        return redirect(request, "/mailboxes")
    boxes = await mailbox_admin.list_mailboxes(rt, v.user_id, team)
    held = await mailbox_held.list_held(rt, v.user_id, team)
    context = {
        "v": v, "boxes": boxes, "held": held, "form": NEW_FORM, "editing": None, "steps": STEPS,
        **extra,
    }  # fmt: skip
    return fragment_or_page(request, "mailboxes.html", context, "mailbox_list", status=status)


@router.get("/mailboxes")
async def mailboxes_page(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    if (team := await admin_team(rt, v)) is None:
        return await as_missing(request)
    return await _answer(request, rt, v, team)


@router.post("/mailboxes")
async def create(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    if (team := await admin_team(rt, v)) is None:
        return await as_missing(request)
    raw = form_values(await request.form())
    try:
        made = await mailbox_admin.create_mailbox(rt, v.user_id, team, raw)
    except ValidationProblem as problem:
        return await _answer(request, rt, v, team, status=422, problem=problem, form=shown(raw))
    return await _answer(request, rt, v, team, status=201, done="created", changed=made)


@router.get("/mailboxes/{mailbox_id}")
async def edit_page(request: Request, mailbox_id: int, rt: RuntimeDep, v: PageViewer) -> Response:
    if (team := await admin_team(rt, v)) is None:
        return await as_missing(request)
    try:
        box = await mailbox_admin.get_mailbox(rt, v.user_id, team, mailbox_id)
    except NotFound:
        return await as_missing(request)
    return await _answer(request, rt, v, team, editing=box, form=_as_form(box))


@router.post("/mailboxes/{mailbox_id}")
async def update(request: Request, mailbox_id: int, rt: RuntimeDep, v: PageViewer) -> Response:
    if (team := await admin_team(rt, v)) is None:
        return await as_missing(request)
    raw = form_values(await request.form())
    try:
        box = await mailbox_admin.get_mailbox(rt, v.user_id, team, mailbox_id)
        changed = await mailbox_admin.update_mailbox(rt, v.user_id, team, mailbox_id, raw)
    except NotFound:
        return await as_missing(request)
    except ValidationProblem as problem:
        return await _answer(
            request, rt, v, team, status=422, problem=problem, editing=box, form=shown(raw)
        )
    return await _answer(request, rt, v, team, done="saved", changed=changed)


@router.post("/mailboxes/{mailbox_id}/delete")
async def delete(request: Request, mailbox_id: int, rt: RuntimeDep, v: PageViewer) -> Response:
    if (team := await admin_team(rt, v)) is None:
        return await as_missing(request)
    try:
        gone = await mailbox_admin.delete_mailbox(rt, v.user_id, team, mailbox_id)
    except NotFound:
        return await as_missing(request)
    return await _answer(request, rt, v, team, done="deleted", changed=gone)


@router.post("/mailboxes/{mailbox_id}/test")
async def test_connection(
    request: Request, mailbox_id: int, rt: RuntimeDep, v: PageViewer
) -> Response:
    """The stored mailbox's connection (an edit form's values not saved yet, when it sends
    them), as a fragment for htmx, as the page otherwise."""
    if (team := await admin_team(rt, v)) is None:
        return await as_missing(request)
    data = await request.form()
    raw = form_values(data) if data.get("host") is not None else None
    try:
        got = await mailbox_admin.test_mailbox(rt, v.user_id, team, mailbox_id, raw)
    except NotFound:
        return await as_missing(request)
    except ValidationProblem as problem:
        got = None
        failure: ValidationProblem | None = problem
    else:
        failure = None
    context = {"v": v, "result": got, "problem": failure, "steps": STEPS, "box_id": mailbox_id}
    if is_htmx(request):
        return render(request, "mailbox_test.html", context, status=422 if failure else 200)
    return await _answer(request, rt, v, team, status=422 if failure else 200, tested=context)


async def _held(request: Request, rt: Runtime, v: Viewer, held_id: int, action: str) -> Response:
    if (team := await admin_team(rt, v)) is None:
        return await as_missing(request)
    act = mailbox_held.accept if action == "accepted" else mailbox_held.discard
    try:
        await act(rt, v.user_id, team, held_id)
    except NotFound:
        # Acted on already (another admin, a second click): said in place, the list fresh.
        return await _answer(request, rt, v, team, status=404, refused="gone")
    return await _answer(request, rt, v, team, done=action)


@router.post("/mailboxes/held/{held_id}/accept")
async def accept(request: Request, held_id: int, rt: RuntimeDep, v: PageViewer) -> Response:
    return await _held(request, rt, v, held_id, "accepted")


@router.post("/mailboxes/held/{held_id}/discard")
async def discard(request: Request, held_id: int, rt: RuntimeDep, v: PageViewer) -> Response:
    return await _held(request, rt, v, held_id, "discarded")
