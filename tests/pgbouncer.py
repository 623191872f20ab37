"""A real PgBouncer in transaction mode in front of the tests' PostgreSQL (Debian's `pgbouncer`).

Skipped where the binary is missing, unless TASKDESK_REQUIRE_PGBOUNCER=1 (CI installs it).
PgBouncer refuses to run as root: as root it drops to the `postgres` user (`-u`).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from tests.helpers import free_port, wait_until

BINARY = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def require() -> None:
    if Path(BINARY).exists():
        return
    if os.environ.get("TASKDESK_REQUIRE_PGBOUNCER") == "1":
        pytest.fail("pgbouncer is missing and TASKDESK_REQUIRE_PGBOUNCER=1: install pgbouncer")
    pytest.skip("pgbouncer is not installed (apt-get install pgbouncer)")


def _runs_as() -> str | None:
    """Root must name an unprivileged user for PgBouncer to switch to."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    pytest.skip("running as root and no unprivileged user for pgbouncer")


def _config(folder: Path, server: dict[str, str], port: int, pool_size: int) -> Path:
    user = server.get("user") or "postgres"
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    target = f"host={server.get('host') or '127.0.0.1'} port={server.get('port') or 5432}"
    ini = folder / "pgbouncer.ini"
    ini.write_text(
        "[databases]\n"
        f"* = {target}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder / 'users.txt'}\n"
        f"pool_mode = transaction\nmax_client_conn = 400\ndefault_pool_size = {pool_size}\n"
        f"logfile = {folder / 'pgbouncer.log'}\npidfile = {folder / 'pgbouncer.pid'}\n"
    )
    return ini


def _answers(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=1) as conn:
            conn.execute("SELECT 1")
    except psycopg.OperationalError:
        return False
    return True


@contextmanager
def pgbouncer(db_url: str, pool_size: int = 10) -> Iterator[str]:
    """PgBouncer (transaction pooling) for `db_url`'s server, at most `pool_size` server
    connections per database and user; yields `db_url` through it."""
    require()
    server = conninfo_to_dict(db_url)
    port = free_port()
    folder = Path(tempfile.mkdtemp(prefix="taskdesk-pgbouncer-"))
    user = _runs_as()
    if user:
        shutil.chown(folder, user)
        folder.chmod(0o755)
    ini = _config(folder, server, port, pool_size)
    args = [BINARY, *(["-u", user] if user else []), str(ini)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"postgresql://{server.get('user') or 'postgres'}@127.0.0.1:{port}/{server.get('dbname')}"
    try:
        wait_until(lambda: proc.poll() is not None or _answers(url), 30, "pgbouncer to answer")
        if proc.poll() is not None:
            log = (folder / "pgbouncer.log").read_text(errors="replace")
            raise AssertionError(f"pgbouncer exited {proc.returncode}:\n{log}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)
