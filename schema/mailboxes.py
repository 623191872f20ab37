"""A team's mailboxes over GraphQL (docs/architecture.md, "Mail in"): `mailboxes(teamId)`,
`createMailbox`, `updateMailbox`, `deleteMailbox`, `testMailbox`. Every rule lives in
desk.work.mailbox_admin: only the team's admins; to anyone else the team has no mailboxes and a
mailbox is NotFound, as a missing one. No type here has a password field: it is write-only."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import strawberry
from strawberry import ID

from desk.core.errors import NotFound
from desk.work import mailbox_admin
from desk.work.mailbox_admin import MailboxView
from schema import problems as e
from schema.context import Context, ctx_of
from schema.problems import attempt


@strawberry.type(description="An IMAP mailbox the team's mail comes in by (never its password).")
class Mailbox:
    id: ID
    team_id: ID
    host: str
    port: int
    use_tls: bool
    username: str
    folder: str
    cadence_seconds: int = strawberry.field(description="Seconds between fetches.")
    enabled: bool = strawberry.field(description="Fetched on its cadence while true.")
    staff_only: bool = strawberry.field(
        description="Mail from anyone outside the team is held for review, not made a customer."
    )
    is_dev: bool = strawberry.field(
        description="The dev mail page's 'send as a customer' mailbox: no server, never fetched."
    )
    last_fetch_at: datetime | None
    lag_seconds: float | None = strawberry.field(
        description="Seconds since the last fetch (or since it was made) while enabled."
    )
    last_error: str | None = strawberry.field(description="Why the last fetch failed, if it did.")
    held_count: int = strawberry.field(description="Messages held for review.")
    created_at: datetime

    @classmethod
    def from_view(cls, v: MailboxView) -> Mailbox:
        return cls(
            id=ID(str(v.id)), team_id=ID(str(v.team_id)), host=v.host, port=v.port,
            use_tls=v.use_tls, username=v.username, folder=v.folder,
            cadence_seconds=v.cadence_seconds, enabled=v.enabled, staff_only=v.staff_only,
            is_dev=v.is_dev, last_fetch_at=v.last_fetch_at, lag_seconds=v.lag_seconds,
            last_error=v.last_error, held_count=v.held_count, created_at=v.created_at,
        )  # fmt: skip


@strawberry.input(description="A mailbox's settings; on update, only those given change.")
class MailboxInput:
    host: str | None = None
    port: int | None = None
    use_tls: bool | None = None
    username: str | None = None
    password: str | None = strawberry.field(
        default=None, description="Write-only. On update, leave it out to keep the stored one."
    )
    folder: str | None = None
    cadence_seconds: int | None = None
    enabled: bool | None = None
    staff_only: bool | None = None

    def raw(self) -> dict[str, Any]:
        fields = (
            "host", "port", "use_tls", "username", "password", "folder", "cadence_seconds",
            "enabled", "staff_only",
        )  # fmt: skip
        return {k: getattr(self, k) for k in fields if getattr(self, k) is not None}


@strawberry.type
class MailboxDeleted:
    id: ID


@strawberry.type(
    description="What 'test connection' found: `ok`, or `step` (dns, refused, timeout, tls, "
    "login, folder, protocol) and `message` saying exactly what failed."
)
class MailboxTest:
    ok: bool
    step: str
    message: str


CreateMailboxResult = Annotated[
    Mailbox | e.ValidationProblem | e.NotFound, strawberry.union("CreateMailboxResult")
]
UpdateMailboxResult = Annotated[
    Mailbox | e.ValidationProblem | e.NotFound, strawberry.union("UpdateMailboxResult")
]
DeleteMailboxResult = Annotated[
    MailboxDeleted | e.NotFound, strawberry.union("DeleteMailboxResult")
]
TestMailboxResult = Annotated[
    MailboxTest | e.ValidationProblem | e.NotFound, strawberry.union("TestMailboxResult")
]
_CHANGE = (e.ValidationProblem, e.NotFound)


@strawberry.type
class MailboxQuery:
    @strawberry.field(
        description="The team's mailboxes; only its admins see them (anyone else: an empty list)."
    )
    async def mailboxes(self, info: strawberry.Info, team_id: ID) -> list[Mailbox]:
        ctx = ctx_of(info)
        try:
            async with ctx.slot():
                found = await mailbox_admin.list_mailboxes(ctx.rt, ctx.user_id, team_id)
        except NotFound:
            return []
        return [Mailbox.from_view(v) for v in found]


@strawberry.type
class MailboxMutation:
    @strawberry.mutation(description="Connect a mailbox; its first fetch is due at once.")
    async def create_mailbox(
        self, info: strawberry.Info, team_id: ID, input: MailboxInput
    ) -> CreateMailboxResult | None:
        async def run(ctx: Context, user_id: int) -> Mailbox:
            made = await mailbox_admin.create_mailbox(ctx.rt, user_id, team_id, input.raw())
            return Mailbox.from_view(made)

        return await attempt(info, run, _CHANGE)  # type: ignore[return-value]

    @strawberry.mutation(description="Change the settings given; an enabled one is fetched anew.")
    async def update_mailbox(
        self, info: strawberry.Info, team_id: ID, id: ID, input: MailboxInput
    ) -> UpdateMailboxResult | None:
        async def run(ctx: Context, user_id: int) -> Mailbox:
            box = await mailbox_admin.update_mailbox(ctx.rt, user_id, team_id, id, input.raw())
            return Mailbox.from_view(box)

        return await attempt(info, run, _CHANGE)  # type: ignore[return-value]

    @strawberry.mutation(description="Remove the mailbox; the tickets made from its mail stay.")
    async def delete_mailbox(
        self, info: strawberry.Info, team_id: ID, id: ID
    ) -> DeleteMailboxResult | None:
        async def run(ctx: Context, user_id: int) -> MailboxDeleted:
            gone = await mailbox_admin.delete_mailbox(ctx.rt, user_id, team_id, id)
            return MailboxDeleted(id=ID(str(gone.id)))

        return await attempt(info, run, (e.NotFound,))  # type: ignore[return-value]

    @strawberry.mutation(
        description="Connect, log in and open the folder, with a short deadline: of the stored "
        "mailbox `id` (with `input` overriding values not yet saved), or of `input` alone."
    )
    async def test_mailbox(
        self, info: strawberry.Info, team_id: ID, id: ID | None = None,
        input: MailboxInput | None = None,
    ) -> TestMailboxResult | None:  # fmt: skip
        async def run(ctx: Context, user_id: int) -> MailboxTest:
            raw = input.raw() if input else None
            got = await mailbox_admin.test_mailbox(ctx.rt, user_id, team_id, id, raw)
            return MailboxTest(ok=got.ok, step=got.step, message=got.message)

        return await attempt(info, run, _CHANGE)  # type: ignore[return-value]
