"""A team's mailboxes as its admins manage them (docs/architecture.md, "Mail in"): list, create,
update, delete and "test connection", for every face (GraphQL, REST, pages).

Only the team's admins manage mailboxes; to anyone else — staff, customers, outsiders — a team's
mailboxes and each mailbox answer exactly as a missing one does (NotFound). The password is
write-only: it is encrypted on the way in (desk/work/mailboxes.py) and no view carries it;
an update without a password keeps the stored one. Every value is checked here, so a bad one is
a ValidationProblem naming the field whatever the face."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core import inputs
from desk.core.errors import NotFound, ValidationProblem
from desk.core.runtime import Runtime
from desk.ledger.sql import one, rows
from desk.people import access
from desk.work import mailbox_check, mailboxes

CADENCE_MIN, CADENCE_MAX = 5, 86_400
PASSWORD_MAX = 1000
MAX_PER_TEAM = 50
# The dev mail page's "send as a customer" mailbox (desk/work/dev_inbound.py): never fetched.
DEV_HOST = "send-as-customer.dev.invalid"
_LABEL = r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
_HOST = re.compile(rf"{_LABEL}(\.{_LABEL})*\.?")

VIEW = (
    "SELECT m.id, m.team_id, m.host, m.port, m.use_tls, m.username, m.folder, "
    " m.cadence_seconds, m.enabled, m.staff_only, m.last_fetch_at, m.last_error, m.created_at, "
    " (SELECT count(*) FROM inbound_mail i WHERE i.mailbox_id = m.id AND i.outcome = 'held') "
    " AS held_count FROM mailbox m"
)


@dataclass(frozen=True)
class MailboxView:
    """A mailbox as people see it: everything but the password."""

    id: int
    team_id: int
    host: str
    port: int
    use_tls: bool
    username: str
    folder: str
    cadence_seconds: int
    enabled: bool
    staff_only: bool
    last_fetch_at: datetime | None
    last_error: str | None
    created_at: datetime
    held_count: int
    lag_seconds: float | None  # since the last fetch (or the creation) while enabled

    @property
    def is_dev(self) -> bool:
        return self.host == DEV_HOST


def _view(row: dict[str, Any], now: datetime) -> MailboxView:
    since = row["last_fetch_at"] or row["created_at"]
    lag = max(0.0, (now - since).total_seconds()) if row["enabled"] else None
    return MailboxView(**row, lag_seconds=lag)


def host_of(value: object) -> str:
    raw = inputs.line("host", value, max_len=253)
    if not raw:
        raise ValidationProblem("host", "required: the IMAP server's name, e.g. imap.example.com")
    try:
        return str(ipaddress.ip_address(raw.strip("[]")))
    except ValueError:
        pass
    if not _HOST.fullmatch(raw):
        raise ValidationProblem(
            "host", "not a host name: letters, digits, '-' and dots only (e.g. imap.example.com)"
        )
    return raw.lower()


def _flag(field: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    raise ValidationProblem(field, "must be true or false")


_CHECKS: dict[str, Callable[[object], Any]] = {
    "host": host_of,
    "port": lambda v: inputs.integer("port", v, lo=1, hi=65535),
    "use_tls": lambda v: _flag("use_tls", v),
    "username": lambda v: _required("username", inputs.line("username", v, max_len=320)),
    "folder": lambda v: _required("folder", inputs.line("folder", v, max_len=200)),
    "cadence_seconds": lambda v: inputs.integer(
        "cadence_seconds", v, lo=CADENCE_MIN, hi=CADENCE_MAX
    ),
    "enabled": lambda v: _flag("enabled", v),
    "staff_only": lambda v: _flag("staff_only", v),
}
DEFAULTS: dict[str, Any] = {
    "port": 993, "use_tls": True, "folder": "INBOX", "cadence_seconds": 30, "enabled": True,
    "staff_only": False,
}  # fmt: skip


def _required(field: str, value: str) -> str:
    if not value:
        raise ValidationProblem(field, "required")
    return value


def password_of(value: object) -> str:
    raw = inputs.text("password", value, max_len=PASSWORD_MAX)
    if not raw:
        raise ValidationProblem("password", "required: the mailbox account's password")
    return raw


def clean(raw: dict[str, Any], *, partial: bool) -> dict[str, Any]:
    """The checked values of `raw` (unknown keys refused); with `partial`, only those given.
    A password of None or "" on an update keeps the stored one."""
    unknown = set(raw) - set(_CHECKS) - {"password"}
    if unknown:
        raise ValidationProblem(sorted(unknown)[0], "not a mailbox setting")
    out = {} if partial else dict(DEFAULTS)
    for key, check in _CHECKS.items():
        if raw.get(key) is not None:
            out[key] = check(raw[key])
        elif not partial and key not in out:
            raise ValidationProblem(key, "required")
    if raw.get("password") not in (None, ""):
        out["password"] = password_of(raw["password"])
    elif not partial:
        raise ValidationProblem("password", "required: the mailbox account's password")
    return out


async def require_admin(conn: AsyncConnection, user_id: int, team_id: object) -> int:
    """The team's id when `user_id` administers it; NotFound for anyone else, as for no team."""
    team = inputs.optional_id(team_id)
    member = await access.membership(conn, user_id, team) if team else None
    if member is None or not member.is_admin:
        raise NotFound("Team not found.")
    return member.team_id


async def _row(
    conn: AsyncConnection, team_id: int, mailbox_id: object, now: datetime
) -> MailboxView:
    mid = inputs.optional_id(mailbox_id)
    found = await one(
        conn, VIEW + " WHERE m.id = %(id)s AND m.team_id = %(t)s", {"id": mid or 0, "t": team_id}
    )
    if found is None:
        raise NotFound("Mailbox not found.")
    return _view(found, now)


async def team_of(rt: Runtime, mailbox_id: object) -> int | None:
    """The team a mailbox belongs to, for faces that address a mailbox by its id alone (REST's
    /mailboxes/{id}); no access check: every call made with it checks the admin."""
    mid = inputs.optional_id(mailbox_id)
    if mid is None:
        return None
    async with rt.engine.connect() as conn:
        found = await one(conn, "SELECT team_id FROM mailbox WHERE id = %(id)s", {"id": mid})
    return int(found["team_id"]) if found else None


async def list_mailboxes(rt: Runtime, user_id: int, team_id: object) -> list[MailboxView]:
    now = rt.clock()
    async with rt.engine.connect() as conn:
        team = await require_admin(conn, user_id, team_id)
        found = await rows(conn, VIEW + " WHERE m.team_id = %(t)s ORDER BY m.id", {"t": team})
    return [_view(r, now) for r in found]


async def get_mailbox(
    rt: Runtime, user_id: int, team_id: object, mailbox_id: object
) -> MailboxView:
    async with rt.engine.connect() as conn:
        team = await require_admin(conn, user_id, team_id)
        return await _row(conn, team, mailbox_id, rt.clock())


async def create_mailbox(
    rt: Runtime, user_id: int, team_id: object, raw: dict[str, Any]
) -> MailboxView:
    """A new mailbox; its first fetch is due now when it is enabled."""
    now = rt.clock()
    async with rt.engine.begin() as conn:
        team = await require_admin(conn, user_id, team_id)
        values = clean(raw, partial=False)
        if values["host"] == DEV_HOST:
            raise ValidationProblem("host", "reserved for the dev mail page's mailbox")
        count = await one(
            conn, "SELECT count(*) AS n FROM mailbox WHERE team_id = %(t)s", {"t": team}
        )
        if count and count["n"] >= MAX_PER_TEAM:
            raise ValidationProblem("host", f"a team has at most {MAX_PER_TEAM} mailboxes")
        box = await mailboxes.create(
            conn, rt.settings, team_id=team, created_by_id=user_id, host=values["host"],
            port=values["port"], use_tls=values["use_tls"], username=values["username"],
            password=values["password"], folder=values["folder"],
            cadence_seconds=values["cadence_seconds"], now=now,
        )  # fmt: skip
        await _set(
            conn,
            rt,
            team,
            box.id,
            {"enabled": values["enabled"], "staff_only": values["staff_only"]},
        )
        return await _row(conn, team, box.id, now)


async def _set(
    conn: AsyncConnection, rt: Runtime, team: int, mid: int, values: dict[str, Any]
) -> bool:
    if "password" in values:
        # A copy without the password, then its cipher text: the column is password_enc only.
        values = dict(values)
        values["password_enc"] = mailboxes.encrypt(rt.settings, values.pop("password"))
    if not values:
        return True
    assigns = ", ".join(f"{k} = %({k})s" for k in values)  # keys are _CHECKS' own names
    sql = f"UPDATE mailbox SET {assigns} WHERE id = %(id)s AND team_id = %(t)s RETURNING id"
    return await one(conn, sql, {**values, "id": mid, "t": team}) is not None


async def update_mailbox(
    rt: Runtime, user_id: int, team_id: object, mailbox_id: object, raw: dict[str, Any]
) -> MailboxView:
    """Change what is given; an enabled mailbox is fetched again at once with its new settings
    (an active fetch already queued is the one that will)."""
    now = rt.clock()
    async with rt.engine.begin() as conn:
        team = await require_admin(conn, user_id, team_id)
        before = await _row(conn, team, mailbox_id, now)
        values = clean(raw, partial=True)
        if before.is_dev and values.get("enabled"):
            raise ValidationProblem("enabled", "the dev mailbox is never fetched; it has no server")
        if values.get("host") == DEV_HOST and not before.is_dev:
            raise ValidationProblem("host", "reserved for the dev mail page's mailbox")
        if not await _set(conn, rt, team, before.id, values):
            raise NotFound("Mailbox not found.")
        box = await mailboxes.get(conn, before.id)
        if box is not None and box.enabled:
            await mailboxes.queue(conn, mailboxes.FETCH, box, run_at=now, now=now)
        return await _row(conn, team, before.id, now)


async def delete_mailbox(
    rt: Runtime, user_id: int, team_id: object, mailbox_id: object
) -> MailboxView:
    """Gone with its fetched messages; the tickets made from them stay. A fetch or parse still
    queued finds no mailbox and ends (jobs/processors/mailbox.py)."""
    async with rt.engine.begin() as conn:
        team = await require_admin(conn, user_id, team_id)
        before = await _row(conn, team, mailbox_id, rt.clock())
        await rows(
            conn, "DELETE FROM mailbox WHERE id = %(id)s AND team_id = %(t)s RETURNING id",
            {"id": before.id, "t": team},
        )  # fmt: skip
        return before


async def test_mailbox(
    rt: Runtime, user_id: int, team_id: object, mailbox_id: object | None,
    raw: dict[str, Any] | None = None,
) -> mailbox_check.CheckResult:  # fmt: skip
    """Test a stored mailbox (`raw` may override its values, e.g. an edit form not yet saved,
    a blank password meaning the stored one) or, with no `mailbox_id`, the values in `raw`."""
    async with rt.engine.connect() as conn:
        team = await require_admin(conn, user_id, team_id)
        stored = None
        if mailbox_id is not None:
            view = await _row(conn, team, mailbox_id, rt.clock())
            stored = await mailboxes.get(conn, view.id)
    values = clean(raw or {}, partial=stored is not None)
    if stored is None:
        password = values["password"]
    else:
        password = values.get("password") or stored.password(rt.settings)
        base = {k: getattr(stored, k) for k in ("host", "port", "use_tls", "username", "folder")}
        values = {**base, **values}
    if values["host"] == DEV_HOST:
        return mailbox_check.CheckResult(False, mailbox_check.DNS, "the dev mailbox has no server")
    target = mailbox_check.Target(
        values["host"], values["port"], values["use_tls"], values["username"], values["folder"]
    )
    return await mailbox_check.check(target, password, ca_file=rt.settings.mail_ca_file)
