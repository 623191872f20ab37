"""CSRF protection for the pages: every state-changing request must carry the session's token.

htmx sends it as the `X-CSRF-Token` header (set once on <body> with `hx-headers`); plain forms
send it as the hidden input `csrf_token`. The sign-in form has no session yet, so it carries a
token from a short-lived signed cookie instead (login CSRF).
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass

from fastapi import Request
from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.responses import Response

from desk.core.errors import DeskError, Unauthenticated
from desk.core.runtime import Runtime
from web.auth import read_session, secure_cookies

HEADER = "x-csrf-token"
FIELD = "csrf_token"
LOGIN_COOKIE = "taskdesk_login"
LOGIN_MAX_AGE = 2 * 3600
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class CsrfRefused(DeskError):
    """This form is out of date or came from another site. Reload the page and try again."""

    code = "CSRF"
    http_status = 403


def _matches(expected: str, given: str | None) -> bool:
    if not expected or not given:
        return False
    # compare_digest refuses non-ASCII str (a TypeError, so a 500): compare the bytes instead.
    # A lone surrogate from a form field must still encode, hence surrogatepass.
    return hmac.compare_digest(
        expected.encode("utf-8", "surrogatepass"), given.encode("utf-8", "surrogatepass")
    )


async def submitted_token(request: Request) -> str | None:
    """The token from the header, else from a form body (read once; Starlette caches it)."""
    header = request.headers.get(HEADER)
    if header:
        return header
    content_type = request.headers.get("content-type", "")
    if content_type.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
        value = (await request.form()).get(FIELD)
        return value if isinstance(value, str) else None
    return None


async def require_csrf(rt: Runtime, request: Request) -> None:
    """Refuse a state-changing request whose token does not match the signed-in session's."""
    session = await read_session(rt, request)
    if session is None:
        raise Unauthenticated()
    if not _matches(session.csrf, await submitted_token(request)):
        raise CsrfRefused()


# Forms shown before sign-in carry a token kept in a signed cookie of their own: the sign-in
# form's, and the other signed-out forms' (accepting an invitation, asking for and using a
# password-reset link). One mechanism, two cookies.
@dataclass(frozen=True)
class _SignedOut:
    cookie: str
    salt: str
    path: str

    def _serializer(self, rt: Runtime) -> URLSafeTimedSerializer:
        return URLSafeTimedSerializer(rt.settings.secret_key, salt=self.salt)

    def expected(self, rt: Runtime, request: Request) -> str:
        """The token in this cookie, or "" when there is none or it is forged or stale."""
        raw = request.cookies.get(self.cookie, "")
        try:
            token = self._serializer(rt).loads(raw, max_age=LOGIN_MAX_AGE) if raw else ""
        except BadSignature:
            return ""
        return token if isinstance(token, str) else ""

    def issue(self, rt: Runtime, request: Request, response: Response) -> str:
        """Reuse the cookie's token, or set a fresh one on `response`."""
        if token := self.expected(rt, request):
            return token
        token = secrets.token_urlsafe(24)
        response.set_cookie(
            self.cookie,
            self._serializer(rt).dumps(token),
            max_age=LOGIN_MAX_AGE,
            httponly=True,
            samesite="lax",
            secure=secure_cookies(rt),
            path=self.path,
        )
        return token


FORM_COOKIE = "taskdesk_form"
_LOGIN = _SignedOut(LOGIN_COOKIE, "taskdesk-login-csrf", "/login")
_FORM = _SignedOut(FORM_COOKIE, "taskdesk-form-csrf", "/")


def issue_login_token(rt: Runtime, request: Request, response: Response) -> str:
    """The sign-in form's token: reuse the one in the cookie, or set a fresh one."""
    return _LOGIN.issue(rt, request, response)


async def require_login_csrf(rt: Runtime, request: Request) -> None:
    if not _matches(_LOGIN.expected(rt, request), await submitted_token(request)):
        raise CsrfRefused("The sign-in form expired. Please try again.")


def issue_form_token(rt: Runtime, request: Request, response: Response) -> str:
    """A signed-out form's token, kept in FORM_COOKIE (set on `response` when new). A page
    shown to someone signed in uses their session's token instead."""
    return _FORM.issue(rt, request, response)


async def require_form_csrf(rt: Runtime, request: Request) -> None:
    """A signed-out form's post: the session's token when signed in, else FORM_COOKIE's."""
    session = await read_session(rt, request)
    expected = session.csrf if session is not None else _FORM.expected(rt, request)
    if not _matches(expected, await submitted_token(request)):
        raise CsrfRefused("This form expired. Reload the page and try again.")
