"""People over GraphQL: invitations (an admin invites, lists, withdraws; the link's holder
accepts), password resets by e-mailed link, and an admin's role changes and removals.

The rules are desk's (desk.people.invitations, resets, members; desk.work.onboarding queues the
e-mails). `acceptInvitation`, `requestPasswordReset` and `resetPassword` need no caller: the
link (or the address) is the credential, and they sign nobody in — a client signs in with the
new password afterwards, as the page at the link does for a browser.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import strawberry
from strawberry import ID

from desk.core.errors import NotAllowed, NotFound
from desk.core.models import Role
from desk.people import invitations, members, resets
from desk.people.invitations import InvitationRow
from desk.reads import lookups
from desk.work import onboarding
from schema import problems as e
from schema.context import Context, ctx_of
from schema.problems import attempt, attempt_anonymous


@strawberry.type(description="An invitation to join a team with a role.")
class Invitation:
    id: ID
    team_id: ID
    team_name: str
    email: str
    role: Role
    created_at: datetime
    expires_at: datetime
    link: str | None = strawberry.field(
        default=None,
        description="The one-time link (also e-mailed). Only in inviteMember's answer: the "
        "token is stored hashed and cannot be shown again.",
    )

    @classmethod
    def from_row(cls, row: InvitationRow, link: str | None = None) -> Invitation:
        return cls(
            id=ID(str(row.id)),
            team_id=ID(str(row.team_id)),
            team_name=row.team_name,
            email=row.email,
            role=row.role,
            created_at=row.created_at,
            expires_at=row.expires_at,
            link=link,
        )


@strawberry.type(description="You joined the team. Nobody is signed in by this: sign in next.")
class InvitationAccepted:
    email: str
    team_id: ID
    team_name: str
    role: Role
    new_account: bool = strawberry.field(
        description="True when the account was made now (with the password you gave)."
    )


@strawberry.type(
    description="The same answer whether or not an account uses the address: if one does, a "
    "link is on its way."
)
class PasswordResetRequested:
    message: str


@strawberry.type(description="The password is set; every session of the account has ended.")
class PasswordChanged:
    sessions_ended: int
    message: str


@strawberry.type(description="A member of a team, as its admins manage them.")
class Member:
    user_id: ID
    email: str
    display_name: str
    role: Role

    @classmethod
    def from_row(cls, row: members.MemberRow) -> Member:
        return cls(
            user_id=ID(str(row.user_id)),
            email=row.email,
            display_name=row.display_name,
            role=row.role,
        )


InviteResult = Annotated[
    Invitation | e.NotFound | e.NotAllowed | e.ValidationProblem,
    strawberry.union("InviteMemberResult"),
]
RevokeResult = Annotated[
    Invitation | e.NotFound | e.NotAllowed | e.ValidationProblem,
    strawberry.union("RevokeInvitationResult"),
]
AcceptResult = Annotated[
    InvitationAccepted | e.NotFound | e.NotAllowed | e.ValidationProblem | e.LinkGone,
    strawberry.union("AcceptInvitationResult"),
]
RequestResetResult = Annotated[
    PasswordResetRequested | e.ValidationProblem, strawberry.union("RequestPasswordResetResult")
]
ResetResult = Annotated[
    PasswordChanged | e.NotFound | e.ValidationProblem | e.LinkGone,
    strawberry.union("ResetPasswordResult"),
]
MemberResult = Annotated[
    Member | e.NotFound | e.NotAllowed | e.ValidationProblem, strawberry.union("MemberResult")
]
REQUESTED = "If an account uses that address, a link to set a new password is on its way."


@strawberry.type
class PeopleQuery:
    @strawberry.field(
        description="A team's pending invitations, newest first (its admins only; anyone "
        "else sees none)."
    )
    async def invitations(self, info: strawberry.Info, team_id: ID) -> list[Invitation]:
        ctx = ctx_of(info)
        team = lookups.parse_id(team_id)
        if team is None:
            return []
        try:
            async with ctx.slot():
                rows = await invitations.list_pending(ctx.rt, ctx.user_id, team)
        except (NotFound, NotAllowed):
            return []
        return [Invitation.from_row(r) for r in rows]


@strawberry.type
class PeopleMutation:
    @strawberry.mutation(
        description="Invite an e-mail address to a team with a role (team admins). The answer "
        "carries the one-time link, also e-mailed; inviting the address again replaces it."
    )
    async def invite_member(
        self, info: strawberry.Info, team_id: ID, email: str, role: Role
    ) -> InviteResult | None:
        async def run(ctx: Context, user_id: int) -> Invitation:
            team = lookups.require_id(team_id, "Team")
            new = await onboarding.invite_member(ctx.rt, user_id, team, email, role.value)
            base = str(ctx.request.base_url) if ctx.request is not None else ""
            return Invitation.from_row(new.invitation, onboarding.shown_link(base, new.path))

        allowed = (e.NotFound, e.NotAllowed, e.ValidationProblem)
        return await attempt(info, run, allowed)  # type: ignore[return-value]

    @strawberry.mutation(description="Withdraw a pending invitation: its link stops working.")
    async def revoke_invitation(self, info: strawberry.Info, id: ID) -> RevokeResult | None:
        async def run(ctx: Context, user_id: int) -> Invitation:
            row = await invitations.revoke(ctx.rt, user_id, lookups.require_id(id, "Invitation"))
            return Invitation.from_row(row)

        allowed = (e.NotFound, e.NotAllowed, e.ValidationProblem)
        return await attempt(info, run, allowed)  # type: ignore[return-value]

    @strawberry.mutation(
        description="Accept an invitation with the token from its link. A new address gets an "
        "account with this name and password; an address that has an account joins the team "
        "when that account is the caller (name and password are then ignored). Signs nobody in."
    )
    async def accept_invitation(
        self,
        info: strawberry.Info,
        token: str,
        display_name: str = "",
        password: str = "",
    ) -> AcceptResult | None:
        async def run(ctx: Context) -> InvitationAccepted:
            caller = ctx.caller.user_id if ctx.caller is not None else None
            done = await invitations.accept(
                ctx.rt, token, display_name=display_name, password=password, user_id=caller
            )
            return InvitationAccepted(
                email=done.email,
                team_id=ID(str(done.team_id)),
                team_name=done.team_name,
                role=done.role,
                new_account=done.new_account,
            )

        allowed = (e.NotFound, e.NotAllowed, e.ValidationProblem, e.LinkGone)
        return await attempt_anonymous(info, run, allowed)  # type: ignore[return-value]

    @strawberry.mutation(
        description="E-mail a password-reset link to this address if an account uses it. The "
        "answer is the same either way. Throttled per address and per client (RATE_LIMITED)."
    )
    async def request_password_reset(
        self, info: strawberry.Info, email: str
    ) -> RequestResetResult | None:
        async def run(ctx: Context) -> PasswordResetRequested:
            request = ctx.request
            client = request.client.host if request is not None and request.client else "unknown"
            await onboarding.request_password_reset(ctx.rt, email, client)
            return PasswordResetRequested(message=REQUESTED)

        return await attempt_anonymous(info, run, (e.ValidationProblem,))  # type: ignore[return-value]

    @strawberry.mutation(
        description="Set a new password with the token from a password-reset link; every "
        "session of the account ends. The link works once."
    )
    async def reset_password(
        self, info: strawberry.Info, token: str, password: str
    ) -> ResetResult | None:
        async def run(ctx: Context) -> PasswordChanged:
            done = await resets.reset(ctx.rt, token, password)
            return PasswordChanged(
                sessions_ended=done.sessions_ended,
                message=f"Password changed; {done.sessions_ended} session(s) ended. Sign in "
                "with the new password.",
            )

        allowed = (e.NotFound, e.ValidationProblem, e.LinkGone)
        return await attempt_anonymous(info, run, allowed)  # type: ignore[return-value]

    @strawberry.mutation(
        description="Change a member's role (team admins). It applies from their next request."
    )
    async def change_member_role(
        self, info: strawberry.Info, team_id: ID, user_id: ID, role: Role
    ) -> MemberResult | None:
        async def run(ctx: Context, caller: int) -> Member:
            team, member = (
                lookups.require_id(team_id, "Team"),
                lookups.require_id(user_id, "Member"),
            )
            row = await members.change_role(ctx.rt, caller, team, member, role.value)
            return Member.from_row(row)

        allowed = (e.NotFound, e.NotAllowed, e.ValidationProblem)
        return await attempt(info, run, allowed)  # type: ignore[return-value]

    @strawberry.mutation(
        description="Remove a member from a team (team admins): their sessions end and the team "
        "is closed to their API tokens from their next request."
    )
    async def remove_member(
        self, info: strawberry.Info, team_id: ID, user_id: ID
    ) -> MemberResult | None:
        async def run(ctx: Context, caller: int) -> Member:
            team, member = (
                lookups.require_id(team_id, "Team"),
                lookups.require_id(user_id, "Member"),
            )
            return Member.from_row(await members.remove_member(ctx.rt, caller, team, member))

        allowed = (e.NotFound, e.NotAllowed, e.ValidationProblem)
        return await attempt(info, run, allowed)  # type: ignore[return-value]
