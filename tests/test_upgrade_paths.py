"""An upgrade of a database holding data at every earlier revision: each revision's schema gets
a team, people, a ticket and a task written as that release would have written them, then this
release's migrations run; nothing is lost, the ticket gains its conversation (0018), and the
result has no drift from the models."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from taskdesk import migrate
from tests.conftest import Servers

VERSIONS = Path(__file__).resolve().parent.parent / "migrations" / "versions"
REVISIONS = sorted(p.name.split("_", 1)[0] for p in VERSIONS.glob("[0-9]*_*.py"))
EARLIER = REVISIONS[:-1]

# What each release wrote, by column; a column a revision does not have yet is left out, and a
# required one not named here gets a plain value of its type (_plain).
ROWS: list[tuple[str, dict[str, Any]]] = [
    ("team", {"name": "Acme"}),
    ("app_user", {"email": "lin@acme.test", "display_name": "Lin Yu"}),
    ("app_user", {"email": "chen@acme.test", "display_name": "Chen Jing"}),
    ("membership", {"user_id": "@lin", "team_id": "@team", "role": "CUSTOMER"}),
    ("membership", {"user_id": "@chen", "team_id": "@team", "role": "STAFF"}),
    ("ticket", {"team_id": "@team", "title": "Printer on fire", "body": "Since Monday.",
                "status": "OPEN", "priority": "HIGH", "creator_id": "@lin",
                "assignee_id": "@chen", "message_count": 1}),
    # From 0018 a new ticket's body is also its opening message (before, migration 0018 makes it).
    ("ticket_message", {"ticket_id": "@ticket", "team_id": "@team", "author_id": "@lin",
                        "internal": False, "body": "Since Monday."}),
    ("background_task", {"kind": "EXPORT", "status": "WAITING", "team_id": "@team",
                         "owner_id": "@chen", "scope_key": "export:old", "filters": "{}",
                         "run": 1, "attempts": 0, "max_attempts": 5}),
]  # fmt: skip


def _plain(data_type: str) -> Any:
    if data_type in ("integer", "bigint", "smallint", "double precision", "numeric", "real"):
        return 0
    if data_type == "boolean":
        return False
    if data_type.startswith("timestamp"):
        return "2026-01-05T09:00:00+00"
    if data_type in ("json", "jsonb"):
        return "{}"
    if data_type == "bytea":
        return b""
    return "x"


def _fill(url: str) -> None:
    """Write ROWS into the schema as it is at this revision."""
    ids: dict[str, int] = {}
    with psycopg.connect(url) as conn:
        for table, wanted in ROWS:
            cols = conn.execute(
                "SELECT column_name, data_type, is_nullable = 'NO' AND column_default IS NULL "
                "AND is_identity = 'NO' FROM information_schema.columns "
                "WHERE table_schema = 'public' AND table_name = %s",
                (table,),
            ).fetchall()
            if not cols:
                continue  # a table this revision does not have yet
            values = {}
            for name, data_type, required in cols:
                if name in wanted:
                    v = wanted[name]
                    values[name] = ids[v[1:]] if isinstance(v, str) and v.startswith("@") else v
                elif required:
                    values[name] = _plain(data_type)
            query = sql.SQL("INSERT INTO {} ({}) VALUES ({}) RETURNING {}").format(
                sql.Identifier(table),
                sql.SQL(", ").join(map(sql.Identifier, values)),
                sql.SQL(", ").join(sql.Placeholder() * len(values)),
                sql.SQL("id") if any(c[0] == "id" for c in cols) else sql.SQL("1"),
            )
            row = conn.execute(query, list(values.values())).fetchone()
            assert row is not None
            key = {"team": "team", "ticket": "ticket", "background_task": "task"}.get(table)
            if table == "app_user":
                key = str(wanted["email"]).split("@")[0]
            if key:
                ids[key] = row[0]


@pytest.fixture
def fresh_db(servers: Servers) -> Iterator[str]:
    name = f"taskdesk_up_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(servers.admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield servers.db_url(name)
    with psycopg.connect(servers.admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_the_revisions_form_one_line() -> None:
    assert REVISIONS[0] == "0001" and len(set(REVISIONS)) == len(REVISIONS)


@pytest.mark.parametrize("revision", EARLIER)
async def test_upgrade_from_a_database_with_data_at(revision: str, fresh_db: str) -> None:
    await asyncio.to_thread(migrate.upgrade, fresh_db, revision)
    await asyncio.to_thread(_fill, fresh_db)
    await asyncio.to_thread(migrate.upgrade, fresh_db)
    with psycopg.connect(fresh_db) as conn:
        people = conn.execute("SELECT email FROM app_user ORDER BY email").fetchall()
        ticket = conn.execute(
            "SELECT title, status, priority, message_count FROM ticket"
        ).fetchall()
        opening = conn.execute(
            "SELECT m.body, u.email FROM ticket_message m JOIN app_user u ON u.id = m.author_id"
        ).fetchall()
        task = conn.execute("SELECT kind, status, scope_key FROM background_task").fetchall()
        version = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    assert people == [("chen@acme.test",), ("lin@acme.test",)]
    assert ticket == [("Printer on fire", "OPEN", "HIGH", 1)]
    assert opening == [("Since Monday.", "lin@acme.test")], "the body became the first message"
    assert task == [("EXPORT", "WAITING", "export:old")]
    assert version == [(REVISIONS[-1],)]
    await asyncio.to_thread(migrate.check, fresh_db)  # no drift from the models
