"""A cap on every request body, counted while it is read — with a Content-Length or chunked.

web/edge.py wraps the ASGI `receive` channel: each chunk is counted before the application
sees it, and the chunk that crosses the route's limit raises `BodyTooLarge` instead of being
delivered — so nothing beyond the limit is buffered, parsed or spooled to disk, and the rest of
the body is never pulled from the client (the answer says `Connection: close`, so the server
drops the connection instead of draining it). A declared Content-Length over the limit fails on the
first read, before any byte is taken.

`BodyTooLarge` is a `DeskError` (413): the pages (ui.route) render it as their form message,
the plain routes and GraphQL answer it as JSON; its message names the route's limit, not the
bytes that happened to arrive.
"""

from __future__ import annotations

import re

from starlette.types import Scope

from desk.core.errors import DeskError
from desk.core.settings import Settings

GRAPHQL_MAX_BYTES = 64 * 1024  # the only cap of a GraphQL request (schema.app counts none)
LOGIN_MAX_BYTES = 16 * 1024  # an e-mail, a password, a token and `next`
UPLOAD_SLACK = 64 * 1024  # multipart framing and the small fields around the file
# The page's import form, the uploads of its JavaScript, and the REST API's import.
UPLOAD_ROUTES = re.compile(r"^/(imports|teams/[^/]+/imports/uploads|api/v1/imports)/?$")
# Where a message and its files arrive: the new-ticket and reply forms, the REST API's messages
# and the two-step upload GraphQL's replyToTicket(attachmentIds) uses.
MESSAGE_ROUTES = re.compile(
    r"^/(tickets|tickets/\d+/messages|api/v1/tickets/\d+/messages|api/v1/uploads)/?$"
)
API_PREFIX = "/api/"


class BodyTooLarge(DeskError):
    """The request is too large."""

    code = "PAYLOAD_TOO_LARGE"
    http_status = 413

    def __init__(self, limit: int, what: str) -> None:
        self.limit = limit
        super().__init__(f"{what} can be at most {size_text(limit)}.")


def size_text(n: int) -> str:
    """50 MiB, 64 KiB: a limit as people read it (binary units, as the defaults are set)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


def route_limit(settings: Settings, path: str) -> tuple[int, int, str]:
    """(bytes the body may have, the limit to name, what is limited) for a request path."""
    if path == "/graphql":
        return GRAPHQL_MAX_BYTES, GRAPHQL_MAX_BYTES, "A GraphQL request"
    if path == "/login":
        return LOGIN_MAX_BYTES, LOGIN_MAX_BYTES, "The sign-in form"
    if UPLOAD_ROUTES.match(path):
        # The file may be IMPORT_MAX_BYTES; the form around it gets a little room on top.
        limit = settings.import_max_bytes
        return limit + UPLOAD_SLACK, limit, "An import file"
    if MESSAGE_ROUTES.match(path):
        limit = settings.message_max_bytes
        return limit + UPLOAD_SLACK, limit, "A message with its files"
    what = "A request body" if path.startswith(API_PREFIX) else "A form"
    return settings.form_max_bytes, settings.form_max_bytes, what


def declared_length(scope: Scope) -> int | None:
    """The request's Content-Length, None when absent or not a plain number."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() and len(value) < 20 else None
    return None
