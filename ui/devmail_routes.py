"""/dev/mail: the mail `taskdesk dev`'s sink caught (desk/work/mail_sink.py), so a person can
follow an invitation or a password reset link on a machine that sends no real mail.

Development only: any other environment answers 404, as for an unknown address (GraphiQL and
the API docs are gated the same way). No sign-in is needed — the person an invitation is for has
no account yet — and the HTML part is served under the pages' strict Content Security Policy
(no script runs; inline styles are dropped), its links clickable.
"""

from __future__ import annotations

import html
import re

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from desk.core.errors import NotFound
from desk.core.settings import Env
from desk.work import mail_sink
from ui.render import render
from ui.route import UiRoute
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
