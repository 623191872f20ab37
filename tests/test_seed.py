"""Demo data (idempotent, both teams, the right people) and bulk tickets through COPY."""

from __future__ import annotations

import psycopg
import pytest

from desk.core.errors import NotFound
from desk.core.runtime import Runtime
from desk.people import users
from desk.seed import demo as seed

TABLES = (
    "team",
    "app_user",
    "membership",
    "ticket",
    "ticket_message",
    "message_attachment",
    "ticket_history",
)


def snapshot(url: str) -> dict[str, list[tuple[object, ...]]]:
    """Every row of the tables the demo writes, in a stable order."""
    with psycopg.connect(url) as conn:
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in TABLES}


async def test_demo_seed_twice_changes_nothing(rt: Runtime) -> None:
    first = await seed.seed_demo(rt)
    assert (first.teams, first.users, first.memberships, first.tickets) == (2, 7, 7, 230)
    assert first.messages > 230  # an opening message each, and replies
    before = snapshot(rt.settings.libpq_url)

    again = await seed.seed_demo(rt)

    assert again == seed.SeedReport(teams=0, users=0, memberships=0, tickets=0, messages=0)
    assert snapshot(rt.settings.libpq_url) == before


async def test_demo_teams_people_and_roles(rt: Runtime) -> None:
    await seed.seed_demo(rt)
    with psycopg.connect(rt.settings.libpq_url) as conn:
        roles = dict(
            conn.execute(
                "SELECT u.email || ' ' || t.name, m.role FROM membership m "
                "JOIN app_user u ON u.id = m.user_id JOIN team t ON t.id = m.team_id"
            ).fetchall()
        )
        tz = dict(conn.execute("SELECT email, timezone FROM app_user").fetchall())
    assert roles["zhou@acme.test Acme Support"] == "ADMIN"
    assert roles["chen@acme.test Acme Support"] == "STAFF"
    assert roles["lin@acme.test Acme Support"] == "CUSTOMER"
    assert roles["wang@acme.test Acme Support"] == "CUSTOMER"
    globex = {k.split()[0]: v for k, v in roles.items() if k.endswith(" Globex")}
    assert sorted(globex.values()) == ["ADMIN", "CUSTOMER", "STAFF"]
    assert not any(email.endswith("@acme.test") for email in globex)  # isolation
    assert tz["zhou@acme.test"] == "Asia/Shanghai"
    for email, password, _, _ in seed.DEMO_LOGINS:
        assert await users.authenticate(rt, email, password) is not None, email


async def test_demo_tickets_look_like_a_real_helpdesk(rt: Runtime) -> None:
    await seed.seed_demo(rt)
    with psycopg.connect(rt.settings.libpq_url) as conn:
        rows = conn.execute(
            "SELECT t.name, k.title, k.status, k.priority, c.email, a.email, "
            "  (SELECT role FROM membership WHERE user_id = k.creator_id AND team_id = t.id), "
            "  (SELECT role FROM membership WHERE user_id = k.assignee_id AND team_id = t.id) "
            "FROM ticket k JOIN team t ON t.id = k.team_id JOIN app_user c ON c.id = k.creator_id "
            "LEFT JOIN app_user a ON a.id = k.assignee_id"
        ).fetchall()
    acme = [r for r in rows if r[0] == seed.ACME]
    assert len(acme) == 200 and len(rows) - len(acme) == 30
    assert all(r[6] is not None for r in rows), "every creator is a member of the ticket's team"
    assert all(r[5] is None or r[7] in ("ADMIN", "STAFF") for r in rows), "assignees are staff"
    assert {r[2] for r in acme} == {"OPEN", "PENDING", "RESOLVED", "CLOSED"}
    assert {r[3] for r in acme} == {"LOW", "NORMAL", "HIGH", "URGENT"}
    assert {r[5] for r in acme} == {"chen@acme.test", "zhou@acme.test", None}
    customers = sum(r[4] in ("lin@acme.test", "wang@acme.test") for r in acme)
    assert customers > len(acme) * 0.7, "customers write most tickets"
    titles = [r[1] for r in acme]
    assert any("cannot log in" in t.lower() for t in titles)
    assert any("无法登录" in t for t in titles)
    assert sum(any("\u4e00" <= ch <= "\u9fff" for ch in t) for t in titles) > 30


async def test_demo_tickets_have_conversations(rt: Runtime) -> None:
    """Every demo ticket opens with its body; most answered ones have a staff reply; some have
    notes; the figures beside the thread match it; and seeding mails nobody."""
    await seed.seed_demo(rt)
    with psycopg.connect(rt.settings.libpq_url) as conn:
        rows = conn.execute(
            "SELECT t.id, t.body, t.message_count, t.first_response_at, t.last_public_reply_at, "
            "  (SELECT body FROM ticket_message WHERE ticket_id = t.id ORDER BY id LIMIT 1), "
            "  (SELECT count(*) FROM ticket_message WHERE ticket_id = t.id AND NOT internal), "
            "  (SELECT count(*) FROM ticket_message WHERE ticket_id = t.id AND internal), "
            "  (SELECT max(created_at) FROM ticket_message WHERE ticket_id = t.id AND NOT internal) "
            "FROM ticket t"
        ).fetchall()
        mails = conn.execute("SELECT count(*) FROM background_task WHERE kind = 'EMAIL'").fetchone()
        misordered = conn.execute(
            "SELECT count(*) FROM ticket_message m WHERE created_at < (SELECT created_at "
            "FROM ticket_message p WHERE p.ticket_id = m.ticket_id AND p.id < m.id "
            "ORDER BY p.id DESC LIMIT 1)"
        ).fetchone()
    assert len(rows) == 230
    assert all(r[5] == r[1] for r in rows), "the first message is the ticket's body"
    assert all(r[2] == r[6] and r[4] == r[8] for r in rows), "the figures follow the thread"
    assert sum(r[3] is not None for r in rows) > 100, "most tickets have had an answer"
    assert sum(r[7] for r in rows) > 20, "some have internal notes"
    assert mails == (0,) and misordered == (0,)
    with psycopg.connect(rt.settings.libpq_url) as conn:
        files = conn.execute(
            "SELECT a.filename, a.content_type, a.size, m.attachment_count, "
            "  (SELECT sum(length(data)) FROM attachment_chunk WHERE attachment_id = a.id) "
            "FROM message_attachment a JOIN ticket_message m ON m.id = a.message_id"
        ).fetchall()
    assert len(files) > 20, "some demo tickets come with a screenshot and a log"
    assert {(f[0], f[1]) for f in files} == {
        ("screenshot.png", "image/png"), ("error-log.txt", "text/plain")
    }  # fmt: skip
    assert all(f[2] == f[4] and f[3] == 2 for f in files)
    with psycopg.connect(rt.settings.libpq_url) as conn:
        wrong = conn.execute(
            "SELECT count(*) FROM ticket t WHERE status <> 'OPEN' AND NOT EXISTS (SELECT 1 "
            "FROM ticket_history h WHERE h.ticket_id = t.id AND h.field = 'status' "
            "AND h.new_value = t.status)"
        ).fetchone()
    assert wrong == (0,), "a ticket that is not open shows who set its status"


def test_demo_tickets_are_deterministic() -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 1, 1, tzinfo=UTC)
    people = {u.key: i for i, u in enumerate(seed.DEMO_USERS, start=1)}
    plan = seed.TEAM_PLANS[0]
    assert seed.demo_tickets(plan, 1, people, now) == seed.demo_tickets(plan, 1, people, now)


async def test_bulk_seed_adds_exactly_n_tickets_with_copy(rt: Runtime) -> None:
    await seed.seed_demo(rt)
    url = rt.settings.libpq_url
    with psycopg.connect(url) as conn:
        before = conn.execute("SELECT count(*) FROM ticket").fetchone()
    seen: list[int] = []

    report = await seed.seed_bulk(
        rt, seed.GLOBEX, 5000, batch_rows=2000, progress=lambda done, n: seen.append(done)
    )

    # Three batches (2000, 2000, 1000) over two connections: they may finish in either order.
    assert report.rows == 5000 and len(seen) == 3 and seen == sorted(seen) and seen[-1] == 5000
    with psycopg.connect(url) as conn:
        after = conn.execute("SELECT count(*) FROM ticket").fetchone()
        stats = conn.execute(
            "SELECT count(DISTINCT status), count(DISTINCT priority), "
            "  count(*) FILTER (WHERE assignee_id IS NULL), count(DISTINCT assignee_id), "
            "  max(created_at) - min(created_at), count(DISTINCT title) "
            "FROM ticket WHERE team_id = %s AND external_id IS NULL",
            (report.team_id,),
        ).fetchone()
    assert before is not None and after is not None and stats is not None
    assert after[0] - before[0] == 5000
    statuses, priorities, unassigned, assignees, spread, titles = stats
    assert (statuses, priorities, assignees) == (4, 4, 2)
    assert 0 < unassigned < 5000
    assert spread.days > 300  # spread over the last two years
    assert titles > 1000


async def test_bulk_seed_of_an_unknown_team_says_so(rt: Runtime) -> None:
    with pytest.raises(NotFound, match="Nowhere"):
        await seed.seed_bulk(rt, "Nowhere", 10)
