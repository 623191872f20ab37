"""Fetching one mailbox over IMAP (docs/architecture.md, "Mail in"): store first, then parse.

The folder is selected read-only and messages are read with `BODY.PEEK[]`, so nothing is
flagged or moved on the server. UIDs above the mailbox's watermark (`last_uid`, valid under
`uidvalidity`) are fetched in batches of `BATCH`; each batch is handed to `commit`, which stores
the raw messages (ON CONFLICT DO NOTHING on (mailbox, uidvalidity, uid)) together with the new
watermark in one fenced transaction. A fetch killed anywhere re-fetches at most the batch that
was not committed, and storing it again changes nothing.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

import aioimaplib

from desk.ledger.sql import Db, rows
from desk.work.mailboxes import Mailbox

BATCH = 50
TIMEOUT = 30.0  # seconds for each IMAP step
_UIDVALIDITY = re.compile(rb"\[UIDVALIDITY (\d+)\]")
_FETCHED = re.compile(rb"FETCH \(.*UID (\d+)")
_MESSAGE_ID = re.compile(rb"^message-id:[ \t]*(<[^>\r\n]{1,900}>)", re.IGNORECASE | re.MULTILINE)


class ImapProblem(Exception):
    """The server refused or could not be reached: the text says which step and why."""


@dataclass(frozen=True)
class Fetched:
    uid: int
    raw: bytes


Commit = Callable[[int, list[Fetched]], Awaitable[None]]


def _check(step: str, response: aioimaplib.Response) -> aioimaplib.Response:
    if response.result != "OK":
        said = b" ".join(bytes(x) for x in response.lines[-1:]).decode("utf-8", "replace")
        raise ImapProblem(f"{step} refused: {said[:200]}")
    return response


async def _client(box: Mailbox, password: str) -> aioimaplib.IMAP4:
    if box.use_tls:
        imap: aioimaplib.IMAP4 = aioimaplib.IMAP4_SSL(
            box.host, box.port, timeout=TIMEOUT, ssl_context=ssl.create_default_context()
        )
    else:
        imap = aioimaplib.IMAP4(box.host, box.port, timeout=TIMEOUT)
    try:
        await imap.wait_hello_from_server()
    except (OSError, TimeoutError) as exc:
        raise ImapProblem(f"could not connect to {box.host}:{box.port}: {exc}") from None
    _check("login", await imap.login(box.username, password))
    return imap


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


async def fetch_new(box: Mailbox, password: str, commit: Commit) -> int:
    """Fetch what is above the watermark, batch by batch, each committed by `commit` before the
    next is asked for; returns how many messages were fetched. ImapProblem: what failed."""
    try:
        return await _fetch(box, password, commit)
    except (aioimaplib.Abort, aioimaplib.CommandTimeout, OSError) as exc:
        raise ImapProblem(f"{type(exc).__name__}: {exc}"[:300] or "connection lost") from None


async def _fetch(box: Mailbox, password: str, commit: Commit) -> int:
    imap = await _client(box, password)
    try:
        # SELECT, not EXAMINE (aioimaplib runs no SEARCH after it); PEEK still sets no flag.
        chosen = _check("select", await imap.select(box.folder))
        validity = uidvalidity_of(chosen)
        after = box.last_uid if box.uidvalidity == validity else 0  # a new UIDVALIDITY: all again
        found = _check("search", await imap.uid_search(f"UID {after + 1}:*"))
        uids = sorted(
            u for line in found.lines[:-1] for u in map(int, bytes(line).split()) if u > after
        )  # "n:*" always names the last message, even one at or below the watermark
        for start in range(0, len(uids), BATCH):
            part = uids[start : start + BATCH]
            got = _check(
                "fetch", await imap.uid("fetch", ",".join(map(str, part)), "(UID BODY.PEEK[])")
            )
            await commit(validity, [f for f in parse_fetch(got.lines) if f.uid > after])
        if not uids:
            await commit(validity, [])
        return len(uids)
    finally:
        # The fetch's outcome is decided: a failed goodbye changes nothing.
        with contextlib.suppress(Exception):
            await imap.logout()


def message_id(raw: bytes) -> str | None:
    found = _MESSAGE_ID.search(raw[:65536])
    return found.group(1).decode("ascii", "replace") if found else None


_STORE = (
    "INSERT INTO inbound_mail (mailbox_id, uidvalidity, uid, message_id, raw, received_at) "
    "SELECT %(box)s, %(validity)s, u.uid, u.mid, u.raw, %(now)s "
    "FROM unnest(%(uids)s::bigint[], %(mids)s::text[], %(raws)s::bytea[]) AS u(uid, mid, raw) "
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
