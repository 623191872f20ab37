"""Signed-in sessions for tests and benchmarks, made without a sign-in request: a row in
`web_session` (as desk.people.sessions.open_session writes it) and the cookie the app would set.

Synchronous on purpose: fixtures and `Api.headers()` build cookies outside the event loop.
The sessions last a year, so tests that move the FakeClock forward by days stay signed in."""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime, timedelta

import psycopg
from itsdangerous import URLSafeTimedSerializer

from desk.core.settings import Settings
from web.auth import SESSION_COOKIE


def signed_in(settings: Settings, user_id: int) -> tuple[str, str]:
    """(cookie value for `taskdesk_session`, the session's CSRF token)."""
    secret, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(24)
    now = datetime.now(UTC)
    with psycopg.connect(settings.libpq_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO web_session (id, user_id, csrf, created_at, expires_at) "
            "VALUES (%s, %s, %s, %s, %s)",
            (hashlib.sha256(secret.encode()).hexdigest(), user_id, csrf, now - timedelta(days=1),
             now + timedelta(days=365)),
        )  # fmt: skip
    serializer = URLSafeTimedSerializer(settings.secret_key, salt="taskdesk-session")
    return serializer.dumps({"sid": secret}), csrf


def cookie_header(settings: Settings, user_id: int) -> str:
    return f"{SESSION_COOKIE}={signed_in(settings, user_id)[0]}"
