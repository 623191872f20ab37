"""Fetching one mailbox over IMAP (docs/architecture.md, "Mail in"): store first, then parse.

The folder is selected read-only and messages are read with `BODY.PEEK[]`, so nothing is
flagged or moved on the server. UIDs above the mailbox's watermark (`last_uid`, valid under
`uidvalidity`) are fetched in batches of `BATCH`; each batch is handed to `commit`, which stores
the raw messages (ON CONFLICT DO NOTHING on (mailbox, uidvalidity, uid)) together with the new
watermark in one fenced transaction. A fetch killed anywhere re-fetches at most the batch that
was not committed, and storing it again changes nothing.
"""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

import aioimaplib

from desk.ledger.sql import Db, rows
from desk.work.imap import ImapProblem, Options, Session, check
from desk.work.mailboxes import Mailbox

BATCH = Options.batch
_UIDVALIDITY = re.compile(rb"\[UIDVALIDITY (\d+)\]")
_FETCHED = re.compile(rb"FETCH \(.*UID (\d+)")
_MESSAGE_ID = re.compile(rb"^message-id:[ \t]*(<[^>\r\n]{1,900}>)", re.IGNORECASE | re.MULTILINE)
_FROM = re.compile(rb"^from:((?:[^\r\n]|\r?\n[ \t]){0,2000})", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class Fetched:
    uid: int
    raw: bytes


@dataclass(frozen=True)
class Outcome:
    fetched: int  # messages fetched (and handed to `commit`)
    idled: bool  # it waited in IDLE, so the next fetch may start at once


Commit = Callable[[int, list[Fetched]], Awaitable[None]]


def uidvalidity_of(response: aioimaplib.Response) -> int:
    for line in response.lines:
        found = _UIDVALIDITY.search(bytes(line))
        if found:
            return int(found.group(1))
    raise ImapProblem("the server named no UIDVALIDITY for the folder")


def parse_fetch(lines: list[bytes | bytearray]) -> list[Fetched]:
    """Each message of a `UID FETCH (UID BODY.PEEK[])` answer: the literal follows its line."""
    out: list[Fetched] = []
    for head, body in itertools.pairwise(lines):
        found = _FETCHED.search(bytes(head))
        if found and isinstance(body, bytearray):
            out.append(Fetched(int(found.group(1)), bytes(body)))
    return out


async def fetch_new(
    box: Mailbox, password: str, commit: Commit, options: Options | None = None
) -> int:
    """Fetch what is above the watermark, batch by batch, each committed by `commit` before the
    next is asked for; returns how many messages were fetched. ImapProblem: what failed."""
    return (await fetch_and_idle(box, password, commit, options)).fetched


async def fetch_and_idle(
    box: Mailbox, password: str, commit: Commit, options: Options | None = None,
    *, idle_seconds: float = 0.0,
) -> Outcome:  # fmt: skip
    """`fetch_new`, then — while `idle_seconds` last and the server offers IDLE — wait in IDLE
    and fetch again as soon as the server announces new mail."""
    opts = options or Options()
    session = Session(box.host, box.port, tls=box.use_tls, options=opts)
    try:
        await session.connect(box.username, password)
        return await _passes(session, box, commit, idle_seconds)
    finally:
        await session.close()


async def _passes(session: Session, box: Mailbox, commit: Commit, idle_seconds: float) -> Outcome:
    # SELECT, not EXAMINE (aioimaplib runs no SEARCH after it); PEEK still sets no flag.
    chosen = check("select", await session.step("select", session.imap.select(box.folder)))
    validity = uidvalidity_of(chosen)
    after = box.last_uid if box.uidvalidity == validity else 0  # a new UIDVALIDITY: all again
    loop = asyncio.get_running_loop()
    until = loop.time() + idle_seconds
    total, idled = 0, False
    while True:
        got, after = await _one_pass(session, validity, after, commit)
        total += got
        left = until - loop.time()
        if left < 1 or not session.offers_idle():
            return Outcome(total, idled)
        if got:
            continue  # look again before waiting: more may have come meanwhile
        idled = True
        if not await session.idle(left):
            return Outcome(total, idled)


async def _one_pass(session: Session, validity: int, after: int, commit: Commit) -> tuple[int, int]:
    """Every message above `after`, in committed batches; (how many, the new watermark)."""
    found = check(
        "search", await session.step("search", session.imap.uid_search(f"UID {after + 1}:*"))
    )
    uids = sorted(
        u for line in found.lines[:-1] for u in map(int, bytes(line).split()) if u > after
    )  # "n:*" always names the last message, even one at or below the watermark
    size = session.options.batch
    for start in range(0, len(uids), size):
        part = uids[start : start + size]
        got = check("fetch", await session.step("fetch", session.imap.uid(
            "fetch", ",".join(map(str, part)), "(UID BODY.PEEK[])"
        )))  # fmt: skip
        await commit(validity, [f for f in parse_fetch(got.lines) if f.uid > after])
    if not uids:
        await commit(validity, [])
    return len(uids), max(uids, default=after)


def _head(raw: bytes) -> bytes:
    """The header section (at most its first 64 KiB): where Message-ID and From are read."""
    head = raw[:65536]
    for blank in (b"\r\n\r\n", b"\n\n"):
        cut = head.find(blank)
        if cut >= 0:
            return head[:cut]
    return head


def message_id(raw: bytes) -> str | None:
    found = _MESSAGE_ID.search(_head(raw))
    return found.group(1).decode("ascii", "replace") if found else None


def sender(raw: bytes) -> str | None:
    """The From address, lower-cased (None when there is no readable one): cheap, from the
    header text alone; the parse reads the message properly."""
    found = _FROM.search(_head(raw))
    if not found:
        return None
    text = found.group(1).decode("utf-8", "replace").replace("\r", "").replace("\n", "")
    address = email.utils.parseaddr(text)[1].strip().lower()
    return address if "@" in address and len(address) <= 320 and "\x00" not in address else None


_STORE = (
    "INSERT INTO inbound_mail (mailbox_id, uidvalidity, uid, message_id, sender, raw, "
    " received_at) SELECT %(box)s, %(validity)s, u.uid, u.mid, u.sender, u.raw, %(now)s "
    "FROM unnest(%(uids)s::bigint[], %(mids)s::text[], %(senders)s::text[], %(raws)s::bytea[]) "
    " AS u(uid, mid, sender, raw) "
    "ON CONFLICT (mailbox_id, uidvalidity, uid) DO NOTHING RETURNING id"
)
# The watermark never goes back (a repeat of an older batch leaves it), except under a new
# UIDVALIDITY, when the server's old UIDs mean nothing any more.
_WATERMARK = (
    "UPDATE mailbox SET last_uid = CASE WHEN uidvalidity IS DISTINCT FROM %(validity)s "
    " THEN %(top)s ELSE greatest(last_uid, %(top)s) END, uidvalidity = %(validity)s, "
    " last_fetch_at = %(now)s, last_error = NULL WHERE id = %(box)s"
)


async def store_batch(
    db: Db, box: Mailbox, validity: int, batch: list[Fetched], *, now: datetime
) -> int:
    """The batch's raw messages and the new watermark, in the caller's transaction; returns
    how many were new."""
    stored = []
    if batch:
        params = {
            "box": box.id, "validity": validity, "now": now, "uids": [f.uid for f in batch],
            "mids": [message_id(f.raw) for f in batch], "raws": [f.raw for f in batch],
            "senders": [sender(f.raw) for f in batch],
        }  # fmt: skip
        stored = await rows(db, _STORE, params)
    top = max((f.uid for f in batch), default=box.last_uid if box.uidvalidity == validity else 0)
    await rows(db, _WATERMARK, {"box": box.id, "validity": validity, "top": top, "now": now})
    return len(stored)


async def has_unparsed(db: Db, mailbox_id: int) -> bool:
    found = await rows(
        db, "SELECT 1 FROM inbound_mail WHERE mailbox_id = %(b)s AND parsed_at IS NULL LIMIT 1",
        {"b": mailbox_id},
    )  # fmt: skip
    return bool(found)
