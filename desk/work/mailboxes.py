"""A team's mailboxes (docs/architecture.md, "Mail in"): their stored settings, the password
kept encrypted with MAILBOX_KEY (Fernet) and never read back by any face, and the ledger tasks
that fetch and parse them — one active MAIL_FETCH and one active MAIL_PARSE per mailbox, the
ledger's scope index (`mailbox:<id>`) refusing a second."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from desk.core.settings import Settings
from desk.ledger.sql import Db, one, rows

FETCH = "MAIL_FETCH"
PARSE = "MAIL_PARSE"


@dataclass(frozen=True)
class Mailbox:
    id: int
    team_id: int
    created_by_id: int
    host: str
    port: int
    use_tls: bool
    username: str
    folder: str
    cadence_seconds: int
    uidvalidity: int | None
    last_uid: int
    enabled: bool
    password_enc: bytes  # only `password()` turns it into text, for the IMAP login

    def password(self, settings: Settings) -> str:
        try:
            return (
                Fernet(settings.mailbox_secret.encode()).decrypt(bytes(self.password_enc)).decode()
            )
        except InvalidToken:
            raise ValueError(
                "the mailbox's password was stored under another MAILBOX_KEY"
            ) from None


def encrypt(settings: Settings, password: str) -> bytes:
    return Fernet(settings.mailbox_secret.encode()).encrypt(password.encode())


COLUMNS = (
    "id, team_id, created_by_id, host, port, use_tls, username, folder, cadence_seconds, "
    "uidvalidity, last_uid, enabled, password_enc"
)
_INSERT = (
    "INSERT INTO mailbox (team_id, created_by_id, host, port, use_tls, username, password_enc, "
    " folder, cadence_seconds, created_at) VALUES (%(team)s, %(by)s, %(host)s, %(port)s, %(tls)s,"
    " %(user)s, %(pw)s, %(folder)s, %(cadence)s, %(now)s) "
    f"RETURNING {COLUMNS}"
)


async def create(
    db: Db, settings: Settings, *, team_id: int, created_by_id: int, host: str, port: int,
    use_tls: bool, username: str, password: str, folder: str = "INBOX", cadence_seconds: int = 30,
    now: datetime,
) -> Mailbox:  # fmt: skip
    """A new mailbox and its first fetch, due now, in the caller's transaction."""
    params = {
        "team": team_id, "by": created_by_id, "host": host, "port": port, "tls": use_tls,
        "user": username, "pw": encrypt(settings, password), "folder": folder,
        "cadence": cadence_seconds, "now": now,
    }  # fmt: skip
    row = await one(db, _INSERT, params)
    assert row is not None
    box = Mailbox(**row)
    await queue(db, FETCH, box, run_at=now, now=now)
    return box


async def get(db: Db, mailbox_id: int, *, lock: bool = False) -> Mailbox | None:
    sql = f"SELECT {COLUMNS} FROM mailbox WHERE id = %(id)s" + (" FOR UPDATE" if lock else "")
    row = await one(db, sql, {"id": mailbox_id})
    return Mailbox(**row) if row else None


def scope(mailbox_id: int) -> str:
    return f"mailbox:{mailbox_id}"


# ON CONFLICT on the ledger's partial unique index: a fetch (or parse) already WAITING or
# RUNNING for this mailbox is the one that will do it, so a second is not made.
_QUEUE = (
    "INSERT INTO background_task (kind, team_id, owner_id, scope_key, filters, run_at, "
    " max_attempts, sends, created_at, updated_at) VALUES (%(kind)s, %(team)s, %(owner)s, "
    " %(scope)s, %(filters)s::jsonb, %(run_at)s, %(attempts)s, 0, %(now)s, %(now)s) "
    "ON CONFLICT (kind, team_id, scope_key) WHERE status IN ('WAITING', 'RUNNING') DO NOTHING "
    "RETURNING id"
)


async def queue(
    db: Db, kind: str, box: Mailbox, *, run_at: datetime, now: datetime, attempts: int = 5
) -> int | None:
    """Insert the mailbox's task of `kind` (the dispatcher sends it), or None when one is
    already active."""
    params: dict[str, Any] = {
        "kind": kind, "team": box.team_id, "owner": box.created_by_id, "scope": scope(box.id),
        "filters": f'{{"mailbox_id": {box.id}}}', "run_at": run_at, "attempts": attempts,
        "now": now,
    }  # fmt: skip
    row = await one(db, _QUEUE, params)
    return int(row["id"]) if row else None


async def queue_next_fetch(db: Db, box: Mailbox, *, now: datetime) -> int | None:
    """The mailbox's next fetch, one cadence from now (while it is enabled)."""
    if not box.enabled:
        return None
    return await queue(db, FETCH, box, run_at=now + timedelta(seconds=box.cadence_seconds), now=now)


async def note_error(db: Db, mailbox_id: int, error: str | None) -> None:
    """Why the last fetch failed. `last_fetch_at` stays the last fetch that worked, so the
    mailbox's lag keeps growing while its server refuses (the console and `lagSeconds`)."""
    await rows(
        db,
        "UPDATE mailbox SET last_error = %(e)s WHERE id = %(id)s",
        {"e": error, "id": mailbox_id},
    )


# Every enabled mailbox with no active fetch gets one (one cadence from now): a fetch that
# failed for good (its last attempt used) ends its chain, and this restarts it, so no mailbox
# stops being fetched silently. The scope index makes concurrent passes insert one.
_ENSURE = (
    "INSERT INTO background_task (kind, team_id, owner_id, scope_key, filters, run_at, "
    " max_attempts, sends, created_at, updated_at) "
    "SELECT 'MAIL_FETCH', m.team_id, m.created_by_id, 'mailbox:' || m.id, "
    " jsonb_build_object('mailbox_id', m.id), %(now)s + make_interval(secs => m.cadence_seconds),"
    " 5, 0, %(now)s, %(now)s FROM mailbox m WHERE m.enabled AND NOT EXISTS (SELECT 1 FROM "
    " background_task t WHERE t.kind = 'MAIL_FETCH' AND t.team_id = m.team_id "
    " AND t.scope_key = 'mailbox:' || m.id AND t.status IN ('WAITING', 'RUNNING')) "
    "ON CONFLICT (kind, team_id, scope_key) WHERE status IN ('WAITING', 'RUNNING') DO NOTHING "
    "RETURNING id"
)


async def ensure_fetches(db: Db, *, now: datetime) -> list[int]:
    """The fetches this pass queued (the dispatcher sends them when due)."""
    return [int(r["id"]) for r in await rows(db, _ENSURE, {"now": now})]
