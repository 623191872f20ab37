"""/dev/mail: the mail `taskdesk dev`'s sink caught (desk/work/mail_sink.py), so a person can
follow an invitation or a password reset link on a machine that sends no real mail.

Development only: any other environment answers 404, as for an unknown address (GraphiQL and
the API docs are gated the same way). No sign-in is needed — the person an invitation is for has
no account yet — and the HTML part is served under the pages' strict Content Security Policy
(no script runs; inline styles are dropped), its links clickable.

/dev/send: "send as a customer" — a signed-in developer (the form carries the session's CSRF
token) types a customer's mail to a team, or their answer to a ticket; desk/work/dev_inbound.py
puts it into the team's inbound path as a fetched mail, and /dev/send/{id} follows its parse to
the ticket it made or joined.
"""

from __future__ import annotations

import html
import re
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from desk.core import inputs
from desk.core.errors import NotFound, ValidationProblem
from desk.core.settings import Env
from desk.work import dev_inbound, mail_sink
from ui.render import is_htmx, render
from ui.route import UiRoute, redirect
from ui.viewer import page_viewer
from web.auth import RuntimeDep

router = APIRouter(route_class=UiRoute)
URL = re.compile(r"https?://[^\s<>\"']+")


def _dev_only(rt: RuntimeDep) -> str:
    if rt.settings.taskdesk_env is not Env.DEV:
        raise NotFound()
    return rt.settings.data_dir


def linked(text: str) -> Markup:
    """Plain text, escaped, with its web addresses made links."""
    out, last = [], 0
    for m in URL.finditer(text):
        out.append(html.escape(text[last : m.start()]))
        url = html.escape(m.group(0))
        out.append(f'<a href="{url}" rel="noreferrer">{url}</a>')
        last = m.end()
    out.append(html.escape(text[last:]))
    return Markup("".join(out))


@router.get("/dev/mail")
async def mail_list(request: Request, rt: RuntimeDep) -> Response:
    messages = mail_sink.caught(_dev_only(rt))
    return render(request, "devmail.html", {"messages": messages, "shown": None})


@router.get("/dev/mail/{number}")
async def mail_one(request: Request, number: int, rt: RuntimeDep) -> Response:
    shown = mail_sink.one(_dev_only(rt), number)
    if shown is None:
        raise NotFound("No such message.")
    context = {"messages": None, "shown": shown, "text": linked(shown.text)}
    return render(request, "devmail.html", context)


@router.get("/dev/mail/{number}/html")
async def mail_html(number: int, rt: RuntimeDep) -> Response:
    shown = mail_sink.one(_dev_only(rt), number)
    if shown is None or shown.html is None:
        raise NotFound("No such message.")
    return HTMLResponse(shown.html, headers={"Cache-Control": "no-store"})


# --- send as a customer ---------------------------------------------------------------------


async def _send_page(
    request: Request, rt: Any, form: dict[str, Any], problem: ValidationProblem | None = None
) -> Response:
    v = await page_viewer(request, rt)
    context = {
        "v": v, "compose": True, "teams": await dev_inbound.teams(rt), "form": form,
        "problem": problem,
    }  # fmt: skip
    return render(request, "devmail.html", context, status=400 if problem else 200)


@router.get("/dev/send")
async def send_form(
    request: Request,
    rt: RuntimeDep,
    team: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
    ticket: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
) -> Response:
    _dev_only(rt)
    form = {"team": team, "ticket": ticket or "", "address": "customer@example.com"}
    return await _send_page(request, rt, form)


@router.post("/dev/send")
async def send(request: Request, rt: RuntimeDep) -> Response:
    _dev_only(rt)
    raw = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
    try:
        sent = await dev_inbound.send(rt, dev_inbound.draft(raw))
    except ValidationProblem as exc:
        return await _send_page(request, rt, raw, exc)
    return redirect(request, f"/dev/send/{sent.inbound_id}?task={sent.task_id or ''}")


@router.get("/dev/send/{inbound_id}")
async def sent_one(
    request: Request,
    inbound_id: int,
    rt: RuntimeDep,
    task: Annotated[str, Query(max_length=12)] = "",
) -> Response:
    _dev_only(rt)
    v = await page_viewer(request, rt)
    found = await dev_inbound.status(rt, inbound_id)
    context = {"v": v, "sent": found, "task_id": inputs.optional_id(task)}
    block = "sent_status" if is_htmx(request) else None
    return render(request, "devmail.html", context, block=block)
