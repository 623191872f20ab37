"""A message's files, kept in PostgreSQL with the conversation (docs/architecture.md,
"Conversation"): written and read a chunk at a time, so no process holds a whole file; the type
is sniffed from the bytes, never taken from the sender; the name is cleaned of path parts and of
characters that could fool a reader. Who may read a file is who may read its message."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import psycopg
import sqlalchemy as sa
from psycopg.rows import dict_row
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core import inputs
from desk.core.db import driver
from desk.core.errors import TooLarge, ValidationProblem

CHUNK = 256 * 1024  # bytes per attachment_chunk row (and per read)
MAX_NAME = 200
# Magic numbers of what people attach; anything else is served as bytes.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
)
IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_BIDI = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069]")


class Readable(Protocol):
    async def read(self, size: int = -1) -> bytes: ...


class InMemory:
    """A file already in memory (a fetched e-mail's part, a demo screenshot), read as an upload
    is; `seek(0)` reads it again from its start, as a post's second try does."""

    def __init__(self, data: bytes) -> None:
        self._data, self._at = data, 0

    async def read(self, size: int = -1) -> bytes:
        end = len(self._data) if size < 0 else self._at + size
        out, self._at = self._data[self._at : end], min(end, len(self._data))
        return out

    async def seek(self, at: int) -> None:
        self._at = at


@dataclass(frozen=True, slots=True)
class Attachment:
    id: int
    message_id: int | None
    team_id: int
    uploader_id: int
    filename: str
    content_type: str
    size: int
    created_at: datetime

    @property
    def is_image(self) -> bool:
        return self.content_type in IMAGES


COLUMNS = (
    "a.id, a.message_id, a.team_id, a.uploader_id, a.filename, a.content_type, a.size, a.created_at"
)


def sniff(head: bytes) -> str:
    """The content type the first bytes show: a known format, UTF-8 text, or plain bytes."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if b"\x00" not in head:
        try:
            head.decode("utf-8")
            return "text/plain"
        except UnicodeDecodeError as exc:
            if exc.start >= len(head) - 3:  # a character cut by the chunk's end
                return "text/plain"
    return "application/octet-stream"


def too_many(cap: int) -> TooLarge:
    """The refusal of a message with more than `cap` files, whichever face it came through."""
    return TooLarge("files", f"at most {cap} files per message")


def clean_name(raw: str) -> str:
    """A file name safe to show and to offer for download: no folders (`../x`, `C:\\x`), no
    control or direction-changing characters (`exe.txt` shown for `txt.exe`), at most MAX_NAME."""
    base = re.split(r"[\\/]", raw or "")[-1]
    base = _BIDI.sub("", unicodedata.normalize("NFC", base))
    name = inputs.label(base, max_len=MAX_NAME, default="file").strip(". ")
    return name or "file"


async def store(
    conn: AsyncConnection | psycopg.AsyncConnection[Any],
    source: Readable,
    *,
    filename: str,
    team_id: int,
    uploader_id: int,
    message_id: int | None,
    max_bytes: int,
    now: datetime,
) -> Attachment:
    """Write one file, a chunk per statement, in the caller's transaction; a file over
    `max_bytes` raises TooLarge (the caller's rollback leaves nothing)."""
    name = clean_name(filename)
    first = await source.read(CHUNK)
    pg = await driver(conn)
    cur = pg.cursor(row_factory=dict_row)
    await cur.execute(_INSERT, {"m": message_id, "t": team_id, "u": uploader_id, "n": name,
                                "ct": sniff(first), "now": now})  # fmt: skip
    row = await cur.fetchone()
    size, seq, data = 0, 0, first
    while data:
        size += len(data)
        if size > max_bytes:
            raise TooLarge("file", f"{name} is larger than {inputs.size_text(max_bytes)}")
        await pg.execute(_ADD_CHUNK, (row["id"], seq, data))
        seq += 1
        data = await source.read(CHUNK)
    await pg.execute(_SIZE, (size, row["id"]))
    return Attachment(**(row | {"size": size}))


_INSERT = (
    "INSERT INTO message_attachment (message_id, team_id, uploader_id, filename, content_type, "
    "size, created_at) VALUES (%(m)s, %(t)s, %(u)s, %(n)s, %(ct)s, 0, %(now)s) "
    f"RETURNING {COLUMNS.replace('a.', '')}"
)
_ADD_CHUNK = "INSERT INTO attachment_chunk (attachment_id, seq, data) VALUES (%s, %s, %s)"
_SIZE = "UPDATE message_attachment SET size = %s WHERE id = %s"
_BIND = (
    "UPDATE message_attachment a SET message_id = %(m)s WHERE a.id = ANY(%(ids)s) "
    "AND a.message_id IS NULL AND a.uploader_id = %(u)s AND a.team_id = %(t)s "
    f"RETURNING {COLUMNS}"
)


async def bind_staged(
    conn: AsyncConnection | psycopg.AsyncConnection[Any],
    ids: list[int],
    *,
    uploader_id: int,
    team_id: int,
    message_id: int,
) -> list[Attachment]:
    """Attach the uploader's own staged files (`stage`) to their new message; an id that is not
    one of them is refused as if it did not exist."""
    if not ids:
        return []
    cur = (await driver(conn)).cursor(row_factory=dict_row)
    await cur.execute(_BIND, {"m": message_id, "ids": ids, "u": uploader_id, "t": team_id})
    rows = await cur.fetchall()
    if len(rows) != len(set(ids)):
        raise ValidationProblem("attachment_ids", "not uploads of yours waiting for a message")
    return [Attachment(**r) for r in rows]


async def of_messages(conn: AsyncConnection, message_ids: list[int]) -> dict[int, list[Attachment]]:
    """The files of these messages, by message, in upload order (one statement)."""
    out: dict[int, list[Attachment]] = {m: [] for m in message_ids}
    if not message_ids:
        return out
    rows = await conn.execute(
        sa.text(f"SELECT {COLUMNS} FROM message_attachment a WHERE a.message_id = ANY(:ids) "
                "ORDER BY a.message_id, a.id"),
        {"ids": message_ids},
    )  # fmt: skip
    for r in rows:
        out[r.message_id].append(Attachment(**r._mapping))
    return out


async def chunks(conn: AsyncConnection, attachment_id: int) -> AsyncIterator[bytes]:
    """The file's bytes, CHUNKS_A_READ chunks per statement (a 20 MB file is 20 reads of 1 MiB,
    not one of 20 MB: memory stays bounded, and a round trip per 256 KiB chunk held the download
    to ~0.65 of PostgreSQL's own read of the same bytes; bench/ attachment-20mb). Read in binary:
    in text a bytea comes as hex, twice its size to send and decode."""
    pg = await driver(conn)  # psycopg's, inside the caller's transaction
    seq = 0
    async with pg.cursor(binary=True) as cur:
        while True:
            await cur.execute(_CHUNKS, (attachment_id, seq, seq + CHUNKS_A_READ))
            rows = await cur.fetchall()
            for (data,) in rows:
                yield data
            if len(rows) < CHUNKS_A_READ:
                return
            seq += CHUNKS_A_READ


CHUNKS_A_READ = 4
_CHUNKS = (
    "SELECT data FROM attachment_chunk WHERE attachment_id = %s AND seq >= %s AND seq < %s "
    "ORDER BY seq"
)


def as_dict(a: Attachment) -> dict[str, Any]:
    return {"id": a.id, "filename": a.filename, "content_type": a.content_type, "size": a.size,
            "created_at": a.created_at}  # fmt: skip
