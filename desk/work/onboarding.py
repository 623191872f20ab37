"""Onboarding actions that also send e-mail: creating a team (and inviting its first admin),
inviting someone, asking for a password reset. GraphQL, the pages and the CLI call these.

The rules and the SQL live in desk.people (teams, invitations, resets); this module opens the
transaction and queues the e-mail in it (`_mail`), so a message exists exactly when its row was
committed. Links handed back (the admin's copy of an invitation, the CLI's print) are the same
as the e-mailed ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.runtime import Runtime
from desk.people import audit, invitations, resets, teams, throttle
from desk.people.invitations import NewInvitation
from desk.people.teams import TeamRow
from desk.work import mail


@dataclass(frozen=True)
class CreatedTeam:
    team: TeamRow
    invitation: NewInvitation | None  # the first admin's, when an address was given


# Every e-mail of onboarding goes through `_mail`, called in the transaction that writes its row,
# with exactly the keyword arguments of desk.work.mail.queue_email (to, template, params, locale,
# timezone, team_id, user_id, now).
async def _mail(conn: AsyncConnection, **kwargs: Any) -> None:
    await mail.queue_email(conn, **kwargs)


def shown_link(base_url: str, path: str) -> str:
    """The link shown to an admin on a page or in GraphQL, under the address the admin uses
    (the e-mailed copy is made absolute from PUBLIC_URL when it is sent)."""
    return base_url.rstrip("/") + path


async def _sender(conn: AsyncConnection, user_id: int | None) -> tuple[str, str, str]:
    """(name, locale, time zone) of whoever sends an invitation: an invitee without an account
    reads it in the inviter's language; the command line writes English, UTC."""
    if user_id is None:
        return "taskdesk", "en", "UTC"
    row = (
        await conn.execute(
            sa.text("SELECT display_name, locale, timezone FROM app_user WHERE id = :u"),
            {"u": user_id},
        )
    ).one()
    return str(row.display_name), str(row.locale), str(row.timezone)


async def _invite(
    conn: AsyncConnection,
    rt: Runtime,
    *,
    team_id: int,
    email: str,
    role: str,
    actor_id: int | None,
    now: datetime,
) -> NewInvitation:
    ttl = timedelta(hours=rt.settings.invitation_ttl_hours)
    new = await invitations.create(
        conn, team_id=team_id, email=email, role=role, actor_id=actor_id, now=now, ttl=ttl
    )
    inv = new.invitation
    name, locale, timezone = await _sender(conn, actor_id)
    reader = (
        await conn.execute(
            sa.text("SELECT id, locale, timezone FROM app_user WHERE lower(email) = lower(:e)"),
            {"e": inv.email},
        )
    ).first()
    if reader is not None:  # an existing account reads it in its own language
        locale, timezone = str(reader.locale), str(reader.timezone)
    await _mail(
        conn,
        to=inv.email,
        template="invitation",
        params={
            "team_name": inv.team_name,
            "inviter_name": name,
            "role": inv.role.value,
            "link": new.path,
            "expires_at": inv.expires_at.isoformat(),
        },
        locale=locale,
        timezone=timezone,
        team_id=inv.team_id,
        user_id=int(reader.id) if reader is not None else None,
        now=now,
    )
    return new


async def invite_member(
    rt: Runtime, user_id: int | None, team_id: int, email: str, role: str
) -> NewInvitation:
    """A team admin (`user_id`; None: the command line) invites `email` with `role`; the link is
    e-mailed and returned (shown to the admin once). Throttled per admin."""
    now = rt.clock()
    async with rt.engine.begin() as conn:
        await invitations.require_inviter(conn, user_id, team_id)
        if user_id is not None:
            await throttle.count_invitation(rt, user_id)
        return await _invite(
            conn, rt, team_id=team_id, email=email, role=role, actor_id=user_id, now=now
        )


async def invite_by_team_name(rt: Runtime, team_name: str, email: str, role: str) -> NewInvitation:
    """The command line's invitation (`taskdesk invite --team NAME`)."""
    async with rt.engine.connect() as conn:
        team = await teams.by_name(conn, team_name)
    return await invite_member(rt, None, team.id, email, role)


async def create_team(
    rt: Runtime, user_id: int | None, name: str, admin_email: str | None = None
) -> CreatedTeam:
    """An operator (`user_id`; None: the command line) creates a team and, with `admin_email`,
    invites its first admin — both or neither."""
    now = rt.clock()
    async with rt.engine.begin() as conn:
        if admin_email:
            invitations.clean_email(admin_email)  # before the team exists: a clear error
        actor = await audit.actor_of(conn, user_id)
        team = await teams.create(conn, name=name, actor_id=user_id, actor=actor, now=now)
        invited = None
        if admin_email:
            invited = await _invite(
                conn,
                rt,
                team_id=team.id,
                email=admin_email,
                role="ADMIN",
                actor_id=user_id,
                now=now,
            )
        return CreatedTeam(team, invited)


async def request_password_reset(rt: Runtime, email: str, client: str) -> None:
    """E-mail a reset link when an account uses `email`; the same answer, after the same work,
    when none does (desk.people.resets). Throttled per address and per client."""
    email = invitations.clean_email(email)
    await throttle.count_password_reset(rt, email, client)
    now = rt.clock()
    ttl = timedelta(minutes=rt.settings.password_reset_ttl_minutes)
    async with rt.engine.begin() as conn:
        to = await resets.issue(conn, email=email, client=client, now=now, ttl=ttl)
        # How long the request takes must not tell whether an account uses the address: for one
        # that none does, the same e-mail is made and written too, in a savepoint taken back
        # (without it, the e-mail's rendering and insert made the known address ~60 % slower).
        sent = to or resets.stand_in(now + ttl)
        async with conn.begin_nested() as saved:
            await _mail(
                conn,
                to=sent.email,
                template="password_reset",
                params={"link": sent.path, "expires_at": sent.expires_at.isoformat()},
                locale=sent.locale,
                timezone=sent.timezone,
                team_id=None,
                user_id=to.user_id if to is not None else None,
                now=now,
            )
            if to is None:
                await saved.rollback()
