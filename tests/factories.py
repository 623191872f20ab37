"""Small, explicit test data: two teams and their people, a few tickets (not the demo seed)."""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa

from desk.core.runtime import Runtime


@dataclass
class World:
    team: int
    other_team: int
    admin: int
    staff: int
    customer: int
    customer2: int
    outsider: int  # a member of the other team only
    tickets: dict[str, int] = field(default_factory=dict)


async def _user(conn: sa.ext.asyncio.AsyncConnection, email: str, name: str) -> int:
    return int(
        (
            await conn.execute(
                sa.text("INSERT INTO app_user (email, display_name) VALUES (:e, :n) RETURNING id"),
                {"e": email, "n": name},
            )
        ).scalar_one()
    )


async def add_ticket(
    rt: Runtime,
    team: int,
    creator: int,
    title: str,
    *,
    status: str = "OPEN",
    priority: str = "NORMAL",
    assignee: int | None = None,
) -> int:
    async with rt.engine.begin() as conn:
        return int(
            (
                await conn.execute(
                    sa.text(
                        "INSERT INTO ticket (team_id, title, status, priority, creator_id, assignee_id) "
                        "VALUES (:t, :title, :s, :p, :c, :a) RETURNING id"
                    ),
                    {
                        "t": team,
                        "title": title,
                        "s": status,
                        "p": priority,
                        "c": creator,
                        "a": assignee,
                    },
                )
            ).scalar_one()
        )


async def make_world(rt: Runtime) -> World:
    async with rt.engine.begin() as conn:
        team = (
            await conn.execute(sa.text("INSERT INTO team (name) VALUES ('Acme') RETURNING id"))
        ).scalar_one()
        other = (
            await conn.execute(sa.text("INSERT INTO team (name) VALUES ('Globex') RETURNING id"))
        ).scalar_one()
        ids = {}
        for key, email, role, t in [
            ("admin", "zhou@acme.test", "ADMIN", team),
            ("staff", "chen@acme.test", "STAFF", team),
            ("customer", "lin@acme.test", "CUSTOMER", team),
            ("customer2", "wang@acme.test", "CUSTOMER", team),
            ("outsider", "olga@globex.test", "ADMIN", other),
        ]:
            ids[key] = await _user(conn, email, key.title())
            await conn.execute(
                sa.text("INSERT INTO membership (user_id, team_id, role) VALUES (:u, :t, :r)"),
                {"u": ids[key], "t": t, "r": role},
            )
    w = World(team=team, other_team=other, **ids)
    w.tickets["login"] = await add_ticket(rt, team, w.customer, "Cannot log in", assignee=w.staff)
    w.tickets["printer"] = await add_ticket(
        rt, team, w.customer2, "Printer on fire", priority="URGENT"
    )
    w.tickets["resolved"] = await add_ticket(
        rt, team, w.customer, "Old issue", status="RESOLVED", assignee=w.staff
    )
    w.tickets["formula"] = await add_ticket(rt, team, w.customer, '=HYPERLINK("http://x","click")')
    w.tickets["globex"] = await add_ticket(rt, other, w.outsider, "Globex only")
    return w


async def bulk_tickets(
    rt: Runtime, team: int, creator: int, n: int, *, assignee: int | None = None
) -> None:
    """Many tickets in one statement (for exports long enough to interrupt)."""
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "INSERT INTO ticket (team_id, title, status, priority, creator_id, assignee_id) "
                "SELECT :t, 'Bulk ticket number ' || g, (ARRAY['OPEN','PENDING','RESOLVED','CLOSED'])[1 + g % 4], "
                " (ARRAY['LOW','NORMAL','HIGH','URGENT'])[1 + g % 4], :c, :a FROM generate_series(1, :n) g"
            ),
            {"t": team, "c": creator, "a": assignee, "n": n},
        )
