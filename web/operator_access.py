"""Who may see the operators' view of a web process: `/health` detail, `/metrics`, and the
detail of GraphQL's `health` — one rule for every face, so they cannot disagree.

Allowed: a request with `Authorization: Bearer <OPS_TOKEN>`, or from an address in
`OPS_ALLOWED_ADDRESSES`. With neither setting, dev and test show everything (one command on a
fresh machine) and production shows nobody — anonymous health is then a plain `ok`. `OpsAccess`
is a FastAPI dependency, so whatever `/metrics` becomes keeps the gate.
"""

from __future__ import annotations

import hmac
import ipaddress
from typing import Annotated

from fastapi import Depends, Request
from starlette.requests import HTTPConnection

from desk.core.errors import NotFound
from desk.core.settings import Env, Settings
from web.auth import get_runtime


def ops_allowed(settings: Settings, request: HTTPConnection) -> bool:
    token, networks = settings.ops_token, settings.ops_networks
    if not token and not networks:
        return settings.taskdesk_env is not Env.PROD
    header = request.headers.get("authorization", "")
    given = header[7:].strip() if header.lower().startswith("bearer ") else ""
    if token and given and hmac.compare_digest(given.encode(), token.encode()):
        return True
    if networks and request.client is not None:
        try:
            address = ipaddress.ip_address(request.client.host)
        except ValueError:
            return False
        return any(address in net for net in networks)
    return False


async def ops_viewer(request: Request) -> bool:
    """True when the caller may see operators' detail (for routes that answer both ways)."""
    return ops_allowed(get_runtime(request).settings, request)


async def require_ops(request: Request) -> None:
    """Refuse everyone else exactly as an unknown address is refused."""
    if not ops_allowed(get_runtime(request).settings, request):
        raise NotFound()


OpsViewer = Annotated[bool, Depends(ops_viewer)]
OpsAccess = Depends(require_ops)
