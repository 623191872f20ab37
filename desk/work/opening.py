"""Opening a ticket with files (docs/architecture.md, "Conversation"): the ticket, its opening
message and that message's files in ONE transaction, so a file over a cap (or a lost
connection) leaves no ticket, and a committed ticket has every file it was opened with. Nobody
is mailed: a new ticket is seen on the list, as one made without files is."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from desk.core.db import retrying
from desk.core.errors import TooLarge
from desk.core.inputs import size_text
from desk.core.models import Ticket
from desk.core.runtime import Runtime
from desk.helpdesk import attachments, thread, tickets
from desk.helpdesk.attachments import Attachment
from desk.work.conversation import IncomingFile


@dataclass
class Opened:
    ticket: Ticket
    message: thread.Message
    attachments: list[Attachment] = field(default_factory=list)


async def open_ticket(
    rt: Runtime,
    user_id: int,
    team_id: int,
    title: str,
    body: str = "",
    priority: str = "NORMAL",
    files: Sequence[IncomingFile] = (),
) -> Opened:
    """A new ticket of a member of the team, its opening message carrying `files`. Bad input is
    ValidationProblem or TooLarge (the caps of a message's files) before anything commits."""
    s = rt.settings
    if len(files) > s.message_max_files:
        raise attachments.too_many(s.message_max_files)

    async def once() -> Opened:
        for f in files:  # a second try reads each file again from its start
            seek = getattr(f.source, "seek", None)
            if seek is not None:
                await seek(0)
        async with rt.engine.begin() as conn:
            ticket, member, message = await tickets.insert_ticket(
                conn, rt, user_id, team_id, title, body, priority
            )
            opened = Opened(ticket, message)
            for f in files:
                opened.attachments.append(
                    await attachments.store(
                        conn, f.source, filename=f.filename, team_id=member.team_id,
                        uploader_id=user_id, message_id=message.id,
                        max_bytes=s.attachment_max_bytes, now=message.created_at,
                    )
                )  # fmt: skip
                # Checked after each file: a refusal stops writing the rest to the database.
                if sum(a.size for a in opened.attachments) > s.message_max_bytes:
                    total = size_text(s.message_max_bytes)
                    raise TooLarge("files", f"a message's files can be at most {total} in all")
            if opened.attachments:
                await thread.set_attachment_count(conn, message.id, len(opened.attachments))
            return opened

    return await retrying(once)
