"""Helpers of the mail-in parse tests: messages, a mailbox, rows stored as a fetch stores them
(desk/work/fetch.py `store_batch`, on the real database), and queries."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from desk.core.runtime import Runtime
from desk.work import fetch, mailboxes
from desk.work.mailboxes import Mailbox


def mail(sender: str, subject: str, body: str, mid: str, **headers: str) -> bytes:
    extra = "".join(f"{k.replace('_', '-')}: {v}\r\n" for k, v in headers.items())
    return (
        f"From: Customer <{sender}>\r\nTo: help@acme.test\r\nSubject: {subject}\r\n"
        f"Message-ID: {mid}\r\nDate: Mon, 07 Dec 2026 10:00:00 +0000\r\n{extra}"
        f"Content-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n"
    ).encode()


async def mailbox(
    rt: Runtime, team: int, admin: int, *, host: str = "127.0.0.1", port: int = 1,
    folder: str = "INBOX", staff_only: bool = False, username: str = "desk",
    password: str = "x",
) -> Mailbox:  # fmt: skip
    async with rt.engine.begin() as conn:
        box = await mailboxes.create(
            conn, rt.settings, team_id=team, created_by_id=admin, host=host, port=port,
            use_tls=False, username=username, password=password, folder=folder, now=rt.clock(),
        )  # fmt: skip
        if staff_only:
            await conn.execute(
                sa.text("UPDATE mailbox SET staff_only = true WHERE id = :b"), {"b": box.id}
            )
    return box


async def store(rt: Runtime, box: Mailbox, raws: list[bytes], *, validity: int = 1) -> None:
    """The messages stored as one fetched batch, UIDs after those already stored."""
    found = await q(
        rt, "SELECT coalesce(max(uid), 0) AS top FROM inbound_mail WHERE mailbox_id = :b "
        "AND uidvalidity = :v", b=box.id, v=validity,
    )  # fmt: skip
    top = found[0].top
    batch = [fetch.Fetched(top + n + 1, raw) for n, raw in enumerate(raws)]
    async with rt.engine.begin() as conn:
        fresh = await mailboxes.get(conn, box.id)
        assert fresh is not None
        await fetch.store_batch(conn, fresh, validity, batch, now=rt.clock())


async def q(rt: Runtime, sql: str, **params: Any) -> list[Any]:
    async with rt.engine.connect() as conn:
        return list((await conn.execute(sa.text(sql), params)).all())


async def outcomes(rt: Runtime, box: Mailbox) -> list[tuple[str | None, int | None]]:
    found = await q(
        rt, "SELECT outcome, ticket_id FROM inbound_mail WHERE mailbox_id = :b ORDER BY id",
        b=box.id,
    )  # fmt: skip
    return [(r.outcome, r.ticket_id) for r in found]
