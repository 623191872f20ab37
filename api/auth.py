"""Who is calling: the signed session cookie (pages, GraphiQL) or an API bearer token.

The session cookie carries the user id and that session's CSRF token; it is HttpOnly,
SameSite=Lax and signed with SECRET_KEY. Membership is never cached here: desk/ reads it from the
database on every call.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.requests import HTTPConnection
from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.responses import Response

from desk import users
from desk.errors import Unauthenticated
from desk.runtime import Runtime
from desk.settings import Env

SESSION_COOKIE = "taskdesk_session"
SESSION_MAX_AGE = 14 * 24 * 3600


@dataclass(frozen=True)
class Caller:
    user_id: int
    via: str  # "cookie" or "token"
    csrf: str = ""


def get_runtime(conn: HTTPConnection) -> Runtime:
    return conn.app.state.runtime  # type: ignore[no-any-return]


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def _serializer(rt: Runtime) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(rt.settings.secret_key, salt="taskdesk-session")


def read_session(rt: Runtime, conn: HTTPConnection) -> dict[str, Any] | None:
    raw = conn.cookies.get(SESSION_COOKIE)
    if not raw:
        return None
    try:
        data = _serializer(rt).loads(raw, max_age=SESSION_MAX_AGE)
    except BadSignature:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("uid"), int) else None


def start_session(rt: Runtime, response: Response, user_id: int) -> str:
    """Sign the user in on `response`; returns the new session's CSRF token."""
    csrf = secrets.token_urlsafe(24)
    value = _serializer(rt).dumps({"uid": user_id, "csrf": csrf})
    response.set_cookie(
        SESSION_COOKIE,
        value,
        max_age=SESSION_MAX_AGE,
        httponly=True,
        samesite="lax",
        secure=rt.settings.taskdesk_env is Env.PROD,
        path="/",
    )
    return csrf


def end_session(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/")


async def identify(rt: Runtime, conn: HTTPConnection) -> Caller | None:
    """The caller behind a request or websocket, or None when anonymous."""
    header = conn.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        uid = await users.user_for_token(rt, header[7:].strip())
        if uid is None:
            raise Unauthenticated("That API token is unknown or revoked.")
        return Caller(uid, "token")
    session = read_session(rt, conn)
    if session is None:
        return None
    return Caller(int(session["uid"]), "cookie", str(session.get("csrf", "")))


async def optional_caller(request: Request, rt: RuntimeDep) -> Caller | None:
    return await identify(rt, request)


async def require_caller(request: Request, rt: RuntimeDep) -> Caller:
    caller = await identify(rt, request)
    if caller is None:
        raise Unauthenticated()
    return caller


OptionalCaller = Annotated[Caller | None, Depends(optional_caller)]
CurrentCaller = Annotated[Caller, Depends(require_caller)]
