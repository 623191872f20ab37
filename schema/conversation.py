"""The conversation's mutations (docs/graphql.md, "Conversation"): `replyToTicket`,
`addInternalNote`, `redactMessage` and `retryMessageDelivery`. The rules are
desk.work.conversation's (who may reply, note, set a status, redact, retry; the caps on files);
here their expected failures become typed results (`schema.problems.attempt`).

Files go up first, over plain HTTP (`POST /api/v1/uploads`, which keeps multipart off the GraphQL
endpoint, for CSRF safety), and come here as `attachmentIds`: an upload is its uploader's only,
so anybody else's id answers like one that does not exist.
"""

from __future__ import annotations

from typing import Annotated

import strawberry
from strawberry import ID

from desk.core.errors import NotFound, ValidationProblem
from desk.core.models import TicketStatus
from desk.helpdesk import thread
from desk.reads import lookups, threads
from desk.reads.threads import MessageView
from desk.work import conversation
from schema import problems as e
from schema.context import Context
from schema.problems import attempt
from schema.types import Ticket, TicketHistoryEntry, TicketMessage


@strawberry.type(description="A reply or note was posted (and the status it set, if any).")
class MessagePosted:
    # Not `message`: every Problem has a `message` string, and one selection asks for both.
    ticket_message: TicketMessage
    ticket: Ticket = strawberry.field(description="The ticket as the post left it.")
    changes: list[TicketHistoryEntry] = strawberry.field(
        description="What the post changed: a status it set, or a customer's reply reopening it."
    )


PostMessageResult = Annotated[
    MessagePosted | e.ValidationProblem | e.TooLarge | e.NotFound | e.NotAllowed,
    strawberry.union("PostMessageResult"),
]
RedactMessageResult = Annotated[
    TicketMessage | e.NotFound | e.NotAllowed, strawberry.union("RedactMessageResult")
]
RetryDeliveryResult = Annotated[
    TicketMessage | e.ValidationProblem | e.NotFound | e.NotAllowed,
    strawberry.union("RetryDeliveryResult"),
]
POST_PROBLEMS = (e.ValidationProblem, e.TooLarge, e.NotFound, e.NotAllowed)
FILES_ATTACHED = "not uploads of yours waiting for a message"  # desk's words for a foreign id


def _uploads(ids: list[ID] | None) -> list[int]:
    """Upload ids as ints; one that cannot be an id is refused like somebody else's."""
    out = []
    for raw in ids or ():
        found = lookups.parse_id(raw)
        if found is None:
            raise ValidationProblem("attachment_ids", FILES_ATTACHED)
        out.append(found)
    return out


async def _shown(ctx: Context, user_id: int, message: thread.Message) -> TicketMessage:
    """The message as its author now sees it: its files and (staff) its e-mails, read again."""
    found = await threads.messages(ctx.rt, user_id, [message.id])
    return TicketMessage.from_view(found.get(message.id) or MessageView(message))


async def _post(
    ctx: Context,
    user_id: int,
    ticket_id: ID,
    body: str,
    *,
    internal: bool,
    attachment_ids: list[ID] | None,
    set_status: TicketStatus | None = None,
) -> MessagePosted:
    ticket = lookups.parse_id(ticket_id)
    if ticket is None:
        raise NotFound("Ticket not found.")
    posted = await conversation.post_message(
        ctx.rt,
        user_id,
        ticket,
        body,
        internal=internal,
        attachment_ids=_uploads(attachment_ids),
        set_status=set_status.value if set_status is not None else None,
    )
    return MessagePosted(
        ticket_message=await _shown(ctx, user_id, posted.message),
        ticket=Ticket.from_model(posted.ticket),
        changes=[TicketHistoryEntry.from_model(c) for c in posted.changes],
    )


@strawberry.type
class ConversationMutation:
    @strawberry.mutation(
        description="A public reply on a ticket you may see, e-mailed to the other side. A "
        "customer's reply to a RESOLVED or PENDING ticket reopens it; staff may set a status in "
        "the same step (`setStatus`: customers get NotAllowed). `body` may be empty when files "
        "come with it; at most 10 `attachmentIds` (MESSAGE_MAX_FILES), from POST /api/v1/uploads."
    )
    async def reply_to_ticket(
        self,
        info: strawberry.Info,
        ticket_id: ID,
        body: str,
        set_status: TicketStatus | None = None,
        attachment_ids: list[ID] | None = None,
    ) -> PostMessageResult | None:
        async def run(ctx: Context, user_id: int) -> MessagePosted:
            return await _post(
                ctx, user_id, ticket_id, body, internal=False,
                attachment_ids=attachment_ids, set_status=set_status,
            )  # fmt: skip

        return await attempt(info, run, POST_PROBLEMS)  # type: ignore[return-value]

    @strawberry.mutation(
        description="An internal note (staff and admins): never e-mailed, never shown to the "
        "customer — to them it does not exist."
    )
    async def add_internal_note(
        self,
        info: strawberry.Info,
        ticket_id: ID,
        body: str,
        attachment_ids: list[ID] | None = None,
    ) -> PostMessageResult | None:
        async def run(ctx: Context, user_id: int) -> MessagePosted:
            return await _post(
                ctx, user_id, ticket_id, body, internal=True, attachment_ids=attachment_ids
            )

        return await attempt(info, run, POST_PROBLEMS)  # type: ignore[return-value]

    @strawberry.mutation(
        description="Empty a message and delete its files (admins of the ticket's team); who "
        "and when stay, and the audit trail records it. Redacting again changes nothing."
    )
    async def redact_message(self, info: strawberry.Info, id: ID) -> RedactMessageResult | None:
        async def run(ctx: Context, user_id: int) -> TicketMessage:
            message_id = lookups.require_id(id, "Message")
            done = await conversation.redact_message(ctx.rt, user_id, message_id)
            return await _shown(ctx, user_id, done)

        allowed = (e.NotFound, e.NotAllowed)
        return await attempt(info, run, allowed)  # type: ignore[return-value]

    @strawberry.mutation(
        description="Send a message's failed e-mails again (staff and admins); ValidationProblem "
        "when none of them failed."
    )
    async def retry_message_delivery(
        self, info: strawberry.Info, id: ID
    ) -> RetryDeliveryResult | None:
        async def run(ctx: Context, user_id: int) -> TicketMessage:
            message_id = lookups.require_id(id, "Message")
            await conversation.retry_delivery(ctx.rt, user_id, message_id)
            found = await threads.messages(ctx.rt, user_id, [message_id])
            if message_id not in found:  # gone in between: as missing as it is now
                raise NotFound("Message not found.")
            return TicketMessage.from_view(found[message_id])

        allowed = (e.ValidationProblem, e.NotFound, e.NotAllowed)
        return await attempt(info, run, allowed)  # type: ignore[return-value]
