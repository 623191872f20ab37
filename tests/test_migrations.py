"""Migrations: upgrade on an empty database, and no drift between models and migrations."""

import asyncio
import uuid

import psycopg
import pytest

from taskdesk import migrate
from tests.conftest import Servers


@pytest.fixture
def empty_db(servers: Servers):
    name = f"taskdesk_empty_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(servers.admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield servers.db_url(name)
    with psycopg.connect(servers.admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


async def test_upgrade_on_empty_database_then_no_drift(empty_db: str) -> None:
    await asyncio.to_thread(migrate.upgrade, empty_db)
    with psycopg.connect(empty_db) as conn:
        tables = {
            r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname='public'")
        }
        ext = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'").fetchone()
    assert {
        "app_user",
        "team",
        "membership",
        "ticket",
        "notification",
        "api_token",
        "background_task",
        "task_result_chunk",
        "alembic_version",
    } <= tables
    assert ext is not None
    await asyncio.to_thread(migrate.check, empty_db)  # raises on any difference


async def test_partial_unique_index_refuses_second_active_task_same_scope(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        uid = conn.execute(
            "INSERT INTO app_user (email, display_name) VALUES ('a@x', 'A') RETURNING id"
        ).fetchone()[0]
        tid = conn.execute("INSERT INTO team (name) VALUES ('T') RETURNING id").fetchone()[0]
        insert = (
            "INSERT INTO background_task (kind, team_id, owner_id, scope_key, status) "
            "VALUES ('EXPORT', %s, %s, 'same', %s)"
        )
        conn.execute(insert, (tid, uid, "WAITING"))
        conn.commit()
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(insert, (tid, uid, "RUNNING"))
        conn.rollback()
        conn.execute("UPDATE background_task SET status = 'COMPLETED'")
        conn.execute(insert, (tid, uid, "WAITING"))  # a finished task frees the scope
        conn.execute(insert, (tid, uid, "COMPLETED"))  # finished tasks never collide
        conn.commit()
