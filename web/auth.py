"""Who is calling: the session cookie (pages, GraphiQL) or an API bearer token.

The session cookie carries a signed, random session secret; the session itself (user, CSRF
token, expiry, revocation) lives in PostgreSQL (`desk.people.sessions`), so logout, a password change
and a member's removal end it server-side. The cookie is HttpOnly, SameSite=Lax, Secure in
production. Membership is never cached here: desk/ reads it from the database on every call.

One exception to reading the session on every request: an accept (`identify(accepting=True)`,
GraphQL's `createExport`) names its caller from the change feed's memory of sessions when it
knows them (docs/architecture.md, "Change feed"), because its own statement checks that session
again in the same round trip as the insert (desk/ledger/intake.py): a session that ended a moment
ago and whose notice has not arrived yet inserts nothing and is answered UNAUTHENTICATED.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated

from fastapi import Depends, Request
from fastapi.requests import HTTPConnection
from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.responses import Response

from desk.core.errors import Unauthenticated
from desk.core.runtime import Runtime
from desk.core.settings import Env
from desk.people import sessions, users
from desk.people.sessions import SESSION_MAX_AGE, Session
from desk.reads import tasks as reads
from desk.reads.memory import CallerMemo, Memory
from desk.reads.tasks import TaskHit

SESSION_COOKIE = "taskdesk_session"
_CACHE = "taskdesk_session"  # request.state: one lookup per request, however many readers


@dataclass(frozen=True)
class Caller:
    user_id: int
    via: str  # "cookie" or "token"
    csrf: str = ""
    task: TaskHit | None = None  # the task asked for with `identify(task_id=…)`, if read with it
    # The session digest an accept must check again in its statement (named from memory).
    session: str | None = None


def get_runtime(conn: HTTPConnection) -> Runtime:
    return conn.app.state.runtime  # type: ignore[no-any-return]


async def _runtime(conn: HTTPConnection) -> Runtime:
    # async on purpose: FastAPI runs a plain `def` dependency in its threadpool, a thread
    # hand-off on every request for one attribute read.
    return get_runtime(conn)


RuntimeDep = Annotated[Runtime, Depends(_runtime)]


def _serializer(rt: Runtime) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(rt.settings.secret_key, salt="taskdesk-session")


def session_secret(rt: Runtime, conn: HTTPConnection) -> str | None:
    """The session secret of a validly signed cookie (the signature spares forged cookies a
    database read), else None. Cookies of the old format (a bare user id) no longer sign in."""
    raw = conn.cookies.get(SESSION_COOKIE)
    if not raw or len(raw) > 512:
        return None
    signed = _verified(rt.settings.secret_key, raw)
    if signed is None:
        return None
    sid, signed_at = signed
    age = time.time() - signed_at  # checked on every request: only the signature is remembered
    return sid if 0 <= age <= SESSION_MAX_AGE else None


@lru_cache(maxsize=4096)
def _verified(secret_key: str, raw: str) -> tuple[str, float] | None:
    """(session secret, signing time) of a cookie whose signature holds, else None.

    Remembered per (key, cookie) because a browser polls with the same cookie many times a
    minute and checking the HMAC was a tenth of a row poll's time; the same input always gives
    the same answer, the age is checked by the caller every time."""
    serializer = URLSafeTimedSerializer(secret_key, salt="taskdesk-session")
    try:
        data, signed_at = serializer.loads(raw, return_timestamp=True)
    except BadSignature:
        return None
    sid = data.get("sid") if isinstance(data, dict) else None
    return (sid, signed_at.timestamp()) if isinstance(sid, str) else None


async def read_session(rt: Runtime, conn: HTTPConnection) -> Session | None:
    """The live session behind the request's cookie (looked up once per request)."""
    state = conn.scope.setdefault("state", {})
    if _CACHE in state:
        return state[_CACHE]  # type: ignore[no-any-return]
    secret = session_secret(rt, conn)
    found = await sessions.lookup(rt, secret) if secret else None
    state[_CACHE] = found
    return found


def remember_session(conn: HTTPConnection, user_id: int | None, csrf: str) -> None:
    """Record a session read elsewhere (ui.viewer reads it with the user in one statement), so
    later readers of this request (`read_session`) do not look it up again."""
    found = Session(user_id, csrf) if user_id is not None else None
    conn.scope.setdefault("state", {})[_CACHE] = found


def secure_cookies(rt: Runtime) -> bool:
    return rt.settings.taskdesk_env is Env.PROD


async def start_session(rt: Runtime, response: Response, user_id: int) -> str:
    """Sign the user in on `response` (a new server-side session); returns its CSRF token."""
    secret, session = await sessions.open_session(rt, user_id)
    response.set_cookie(
        SESSION_COOKIE,
        _serializer(rt).dumps({"sid": secret}),
        max_age=SESSION_MAX_AGE,
        httponly=True,
        samesite="lax",
        secure=secure_cookies(rt),
        path="/",
    )
    return session.csrf


async def end_session(rt: Runtime, conn: HTTPConnection, response: Response) -> None:
    """Logout: the session is revoked server-side, so a copy of the cookie is worthless."""
    secret = session_secret(rt, conn)
    if secret:
        await sessions.revoke(rt, secret)
    conn.scope.setdefault("state", {})[_CACHE] = None
    response.delete_cookie(
        SESSION_COOKIE, path="/", secure=secure_cookies(rt), httponly=True, samesite="lax"
    )


async def identify(
    rt: Runtime, conn: HTTPConnection, task_id: int | None = None, *, accepting: bool = False
) -> Caller | None:
    """The caller behind a request or websocket, or None when anonymous. With `task_id` (a
    status read), a cookie's session and that task are read in one statement (`Caller.task`);
    `accepting`: for an accept that checks the session itself (`Caller.session`)."""
    header = conn.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        uid = await users.user_for_token(rt, header[7:].strip())
        if uid is None:
            raise Unauthenticated("That API token is unknown or revoked.")
        return Caller(uid, "token")
    if task_id is not None:
        secret = session_secret(rt, conn)
        found = await reads.viewer(rt.pg, secret, rt.clock(), task_id=task_id) if secret else None
        remember_session(conn, found.person.id if found else None, found.csrf if found else "")
        return Caller(found.person.id, "cookie", found.csrf, found.task) if found else None
    if accepting:
        return await _accepting(rt, conn)
    session = await read_session(rt, conn)
    if session is None:
        return None
    return Caller(session.user_id, "cookie", session.csrf)


async def _accepting(rt: Runtime, conn: HTTPConnection) -> Caller | None:
    """A cookie's caller for an accept: from the memory of sessions when it knows the session
    (no statement; the accept checks it again), else read as ever and remembered."""
    secret = session_secret(rt, conn)
    memory: Memory | None = getattr(conn.app.state, "memory", None)
    if not secret or memory is None:
        session = await read_session(rt, conn)
        return Caller(session.user_id, "cookie", session.csrf) if session else None
    digest = sessions.session_digest(secret)
    memo = memory.caller(digest, rt.clock())
    if memo is not None:
        return Caller(memo.user_id, "cookie", memo.csrf, session=digest)
    reading = memory.begin()
    try:
        found = await read_session(rt, conn)
        if found is not None and found.expires_at is not None:
            memo = CallerMemo(found.user_id, found.csrf, found.expires_at)
            memory.learn_caller(reading, digest, memo)
    finally:
        memory.end()
    return Caller(found.user_id, "cookie", found.csrf) if found else None


async def optional_caller(request: Request, rt: RuntimeDep) -> Caller | None:
    return await identify(rt, request)


async def require_caller(request: Request, rt: RuntimeDep) -> Caller:
    caller = await identify(rt, request)
    if caller is None:
        raise Unauthenticated()
    return caller


OptionalCaller = Annotated[Caller | None, Depends(optional_caller)]
CurrentCaller = Annotated[Caller, Depends(require_caller)]
