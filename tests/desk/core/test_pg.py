"""desk.core.pg: the hot paths' autocommit pool — reads, single-statement writes, broken connections."""

from __future__ import annotations

import psycopg
import pytest

from desk.core.runtime import Runtime
from desk.core.settings import Settings


async def test_reads_and_writes_are_autocommit(rt: Runtime) -> None:
    await rt.pg.write("CREATE TEMP TABLE IF NOT EXISTS t_pg (n int)")
    async with rt.pg.connection() as conn:
        assert conn.autocommit
    row = await rt.pg.one("SELECT %(a)s::int + 1 AS n", {"a": 41})
    assert row == {"n": 42}
    assert await rt.pg.one("SELECT 1 AS n WHERE false") is None
    rows = await rt.pg.all("SELECT g AS n FROM generate_series(1, 3) g")
    assert [r["n"] for r in rows] == [1, 2, 3]
    changed = await rt.pg.write("SELECT 7 AS n")
    assert changed == [{"n": 7}]


async def test_tuple_reads_keep_the_column_order(rt: Runtime) -> None:
    assert await rt.pg.row("SELECT 2 AS b, 1 AS a, %(j)s::jsonb AS j", {"j": '{"k": 1}'}) == (
        2,
        1,
        {"k": 1},
    )
    assert await rt.pg.row("SELECT 1 WHERE false") is None
    assert await rt.pg.rows("SELECT g, -g FROM generate_series(1, 2) g") == [(1, -1), (2, -2)]
    assert await rt.pg.rows("SELECT 1 WHERE false") == []


async def test_a_read_survives_connections_killed_under_it(rt: Runtime, settings: Settings) -> None:
    """A database restart kills every idle connection; the next read still answers."""
    await rt.pg.one("SELECT 1 AS n")
    async with rt.pg.connection() as conn:
        pid = conn.info.backend_pid
    async with await psycopg.AsyncConnection.connect(settings.libpq_url, autocommit=True) as admin:
        await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    assert await rt.pg.one("SELECT 2 AS n") == {"n": 2}
    async with rt.pg.connection() as conn:
        pid = conn.info.backend_pid
    async with await psycopg.AsyncConnection.connect(settings.libpq_url, autocommit=True) as admin:
        await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    assert await rt.pg.row("SELECT 3") == (3,)  # the tuple reads retry the same way


async def test_a_failed_write_is_not_repeated(rt: Runtime) -> None:
    with pytest.raises(psycopg.errors.DivisionByZero):
        await rt.pg.write("SELECT 1 / 0")
    assert await rt.pg.one("SELECT 3 AS n") == {"n": 3}


async def test_a_database_refusing_connections_is_noticed_and_its_return_too(
    rt: Runtime, settings: Settings, servers
) -> None:
    """While the database refuses connections, questions fail after DOWN_WAIT (not the full
    wait for a connection), and the first question after it returns is answered."""
    name = settings.database_url.split("?", 1)[0].rsplit("/", 1)[1]
    assert await rt.pg.one("SELECT 1 AS n") == {"n": 1}
    assert rt.pg.reachable
    with psycopg.connect(servers.admin_url, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        try:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            for _ in range(2):  # the broken connection, then the refused ones
                with pytest.raises(psycopg.OperationalError):
                    await rt.pg.one("SELECT 1 AS n")
            assert not rt.pg.reachable
        finally:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    assert await rt.pg.one("SELECT 2 AS n") == {"n": 2}
    assert rt.pg.reachable
