"""Who opens a subscription (docs/graphql.md, "Subscriptions"), by the credentials the POST
endpoint takes (web/auth.py): an API token or the session cookie.

- A WebSocket: the token in the `connection_init` payload (`{"authorization": "Bearer tdk_…"}`:
  browsers cannot set a WebSocket's headers) or the handshake's `Authorization` header, else the
  session cookie. A browser sends its cookies with a WebSocket opened by a page of any site, and
  no CORS preflight stands in the way (cross-site WebSocket hijacking), so a cookie signs in only
  when the handshake's `Origin` is this host (or `Sec-Fetch-Site: same-origin`): the WebSocket's
  equivalent of the pages' CSRF token. A client that sends no Origin is not a browser and carries
  no ambient cookie.
- An event stream: the `Authorization` header or the cookie. A POST must be JSON (a CORS
  preflight, never granted), and a cookie from another origin is refused here too.

A refusal names its WebSocket close code (4401, 4403; 1011 while the database is away), its HTTP
status and its `extensions.code`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from strawberry.http.websocket_origin import is_same_origin

from schema.context import Context
from schema.errors import SERVICE_UNAVAILABLE, database_trouble
from schema.live import Credential
from web.auth import Caller, session_secret

UNAUTHENTICATED = "UNAUTHENTICATED"


@dataclass(frozen=True)
class Refusal:
    close_code: int  # the WebSocket's
    status: int  # the event stream's
    code: str  # extensions.code
    reason: str  # short: a close frame carries at most 123 bytes of it


NO_CREDENTIAL = Refusal(
    4401, 401, UNAUTHENTICATED, "Unauthorized: sign in, or send an API token (Bearer tdk_...)."
)
BAD_TOKEN = Refusal(
    4401, 401, UNAUTHENTICATED, "Unauthorized: that API token is unknown or revoked."
)
NO_SESSION = Refusal(4401, 401, UNAUTHENTICATED, "Unauthorized: the session has ended; sign in.")
NOT_BEARER = Refusal(4401, 401, UNAUTHENTICATED, "Unauthorized: send `Bearer <token>`.")
CROSS_SITE = Refusal(
    4403, 403, "FORBIDDEN", "Forbidden: a session cookie counts only from this site's pages."
)
UNAVAILABLE = Refusal(1011, 503, SERVICE_UNAVAILABLE, "The database is unavailable; try again.")


def authorization(payload: Mapping[str, object]) -> str:
    """The `authorization` entry of a connection_init payload (any case), else ""."""
    for key, value in payload.items():
        if key.lower() == "authorization" and isinstance(value, str):
            return value
    return ""


def same_origin(headers: Mapping[str, str]) -> bool:
    """Whether a browser could have sent these headers only from this site's own pages."""
    origin = headers.get("origin")
    if origin is None:
        return True
    return headers.get("sec-fetch-site") == "same-origin" or is_same_origin(
        origin, headers.get("host")
    )


async def sign_in(ctx: Context, payload: Mapping[str, object]) -> Refusal | Credential:
    """Identify the caller of `ctx.request` (with a WebSocket's `connection_init` payload):
    sets `ctx.caller` and returns the credential to ask again later, or the refusal."""
    conn = ctx.request
    assert conn is not None
    given = authorization(payload) or conn.headers.get("authorization", "")
    try:
        if given:
            if not given.lower().startswith("bearer "):
                return NOT_BEARER
            credential = Credential("token", given[7:].strip())
        else:
            secret = session_secret(ctx.rt, conn)
            if secret is None:
                return NO_CREDENTIAL
            if not same_origin(conn.headers):
                return CROSS_SITE
            credential = Credential("cookie", secret)
        user_id = await credential.user_id(ctx.rt)
    except Exception as exc:
        if database_trouble(exc) is None:
            raise
        return UNAVAILABLE
    if user_id is None:
        return BAD_TOKEN if credential.via == "token" else NO_SESSION
    ctx.caller = Caller(user_id, credential.via)
    return credential
