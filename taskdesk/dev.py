"""`taskdesk dev`: the whole product on one machine, with demo data, from one command.

With DATABASE_URL / REDIS_URL unset it starts a private PostgreSQL and Redis under the data
folder (.taskdesk/ by default), applies the migrations, seeds the demo data (idempotent), then
runs the web server and one worker as child processes and watches them (taskdesk/children.py):
a worker that dies is restarted after a short back-off while everything else keeps running, and
so is a private Redis that exits (on its port and append-only file); if the web server dies, it
says so and stops the rest. Ctrl-C or SIGTERM stops the children, then
only those servers this run started. While it runs, a pointer in the default data folder
(taskdesk/config.py) lets `taskdesk worker`, `seed`, `tasks` and `import` find its servers
without flags, even when it was started with --data-dir.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from desk.core.settings import Settings, load_settings
from desk.work import mail_sink
from taskdesk.children import Child, ChildDied, check_children, spawn, stop_children, supervise
from taskdesk.commands import DATA_DIR_HELP, Subparsers
from taskdesk.config import remove_dev_record, write_dev_record
from taskdesk.embedded import EmbeddedError, PostgresServer, RedisServer

STARTUP_TIMEOUT = 90.0  # seconds for the web server to answer its first request
REVIVE_RETRY = 5.0  # seconds between tries to start again a private Redis that exited


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "dev",
        help="run everything locally with demo data (private servers if no URLs are set)",
        description="Start taskdesk on this machine: private PostgreSQL and Redis under the "
        "data folder when DATABASE_URL / REDIS_URL are unset, migrations, demo data, the web "
        "server and one worker. Ctrl-C stops what it started (and only that).",
    )
    p.add_argument("--host", default="127.0.0.1", help="web address (default: %(default)s)")
    p.add_argument("--port", type=int, default=8000, help="web port (default: %(default)s)")
    p.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    p.add_argument("--no-worker", action="store_true", help="start the web server only")
    p.set_defaults(func=run)


@dataclass
class Started:
    """Servers this run started itself, so it stops those and nothing else."""

    servers: list[PostgresServer | RedisServer] = field(default_factory=list)
    retry_at: float = 0.0  # a revival that failed is tried again from then (monotonic)

    def stop(self) -> None:
        for server in reversed(self.servers):
            name = "PostgreSQL" if isinstance(server, PostgresServer) else "Redis"
            say(f"stopping the private {name} ({server.root})")
            try:
                server.stop()
            except (OSError, subprocess.SubprocessError) as exc:  # go on with the others
                say(f"could not stop {name}: {exc}")


def say(message: str) -> None:
    print(f"taskdesk dev: {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    settings = load_settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    if not port_free(args.host, args.port):
        say(
            f"port {args.port} on {args.host} is already in use (another `taskdesk dev`?): "
            f"stop that program or pass --port {args.port + 1}"
        )
        return 1
    started, children, record, sink = Started(), [], None, None
    default_home = Path(load_settings().data_dir)  # where flagless commands look first
    _handle_signals(_interrupt)
    began = time.monotonic()
    try:
        settings = start_servers(settings, Path(settings.data_dir), started)
        settings, sink = start_mail_sink(settings)
        prepare_database(settings)
        children = spawn_children(settings, args)
        url = f"http://{_probe_host(args.host)}:{args.port}/"
        wait_until_up(url, children)
        record = write_dev_record(default_home, Path(settings.data_dir), url, _urls(settings))
        print_banner(settings, url, time.monotonic() - began, children, sink is not None)
        return supervise(children, say, also=lambda: revive_redis(started))
    except ChildDied as exc:
        say(f"{exc}; stopping the rest")
        return 1
    except KeyboardInterrupt:
        say("stopping")
        return 0
    finally:
        # A second Ctrl-C must not leave half-stopped servers behind.
        _handle_signals(lambda *_: say("still stopping, please wait"))
        if record is not None:
            remove_dev_record(record)
        stop_children(children, settings.worker_grace_seconds + 5, say)
        if sink is not None:
            sink.stop()
        started.stop()


def revive_redis(started: Started) -> None:
    """Start again a private Redis this run started that has exited (a crash, `SHUTDOWN`): on
    the same port, from its append-only file, so the queue comes back and the web and worker
    reconnect by themselves, as they do after an operator's restart in production."""
    if time.monotonic() < started.retry_at:
        return
    for server in started.servers:
        if not isinstance(server, RedisServer):
            continue
        code = server.exited()
        if code is None:
            continue
        say(f"the private Redis exited (code {code}); starting it again on port {server.port}")
        try:
            server.start()
        except EmbeddedError as exc:
            started.retry_at = time.monotonic() + REVIVE_RETRY
            say(f"Redis did not come back: {exc}; trying again in {REVIVE_RETRY:.0f} s")
        else:
            say("Redis is running again")


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _handle_signals(handler: Callable[[int, FrameType | None], Any]) -> None:
    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def port_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        # The same option uvicorn sets, so a port in TIME_WAIT does not count as taken.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def start_servers(settings: Settings, root: Path, started: Started) -> Settings:
    """Fill in the URLs that are not set by starting (or reusing) private servers."""
    urls: dict[str, str] = {}
    if not settings.database_url:
        pg = PostgresServer(root / "pg")
        say(f"PostgreSQL: private server under {pg.root}")
        urls["database_url"] = pg.start()
        if pg.started_here:
            started.servers.append(pg)
        else:
            say("PostgreSQL was already running there: reusing it, it stays running")
    if not settings.redis_url:
        rd = RedisServer(root / "redis")
        say(f"Redis: private server under {rd.root}")
        urls["redis_url"] = rd.start()
        if rd.started_here:
            started.servers.append(rd)
        else:
            say("Redis was already running there: reusing it, it stays running")
    return load_settings(data_dir=settings.data_dir, **urls) if urls else settings


def start_mail_sink(settings: Settings) -> tuple[Settings, mail_sink.Sink | None]:
    """With SMTP_URL unset, catch every e-mail in a sink whose mail /dev/mail shows."""
    if settings.smtp_url:
        return settings, None
    sink = mail_sink.start(settings.data_dir)
    say(
        f"e-mail: caught by a private SMTP sink at {sink.url} (kept under {mail_sink.folder(settings.data_dir)})"
    )
    return settings.model_copy(update={"smtp_url": sink.url}), sink


def prepare_database(settings: Settings) -> None:
    from taskdesk import migrate

    say("applying migrations")
    migrate.upgrade(settings.direct_sqlalchemy_url)
    say("seeding demo data (skipped where present)")
    asyncio.run(_seed(settings))


async def _seed(settings: Settings) -> None:
    from desk.core.runtime import Runtime
    from desk.seed.demo import seed_demo

    rt = await Runtime.open(settings, application_name="taskdesk-dev")
    try:
        await seed_demo(rt)
    finally:
        await rt.close()


def _child_env(settings: Settings) -> dict[str, str]:
    return os.environ | {
        "DATABASE_URL": settings.database_url,
        "REDIS_URL": settings.redis_url,
        "SMTP_URL": settings.smtp_url,
        "DATA_DIR": settings.data_dir,
        "PYTHONUNBUFFERED": "1",
    }


def spawn_children(settings: Settings, args: argparse.Namespace) -> list[Child]:
    env = _child_env(settings)
    if "PUBLIC_URL" not in os.environ:  # e-mailed links point at this very server
        env["PUBLIC_URL"] = f"http://{_probe_host(args.host)}:{args.port}"
    web = ["serve", "--host", args.host, "--port", str(args.port)]
    children = [spawn("web server", web, env)]
    if not args.no_worker:
        children.append(spawn("worker", ["worker"], env, restartable=True))
    return children


def _probe_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "") else f"[{host}]" if ":" in host else host


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status < 500)
    except (urllib.error.URLError, OSError):
        return False


def wait_until_up(url: str, children: list[Child]) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while not answers(url):
        check_children(children, say)
        if time.monotonic() > deadline:
            raise ChildDied(f"the web server did not answer {url} within {STARTUP_TIMEOUT:.0f}s")
        time.sleep(0.1)


def _redact(url: str) -> str:
    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)


def _urls(settings: Settings) -> dict[str, str]:
    return {
        "database_url": _redact(settings.database_url),
        "redis_url": _redact(settings.redis_url),
    }


def print_banner(
    settings: Settings, url: str, took: float, children: list[Child], sink: bool = False
) -> None:
    from desk.seed.demo import DEMO_LOGINS, DEMO_PASSWORD

    workers = [c.proc.pid for c in children if c.restartable]

    lines = [
        "",
        f"taskdesk is running (ready in {took:.1f} s)",
        f"  app        {url}",
        f"  GraphiQL   {url}graphql",
        f"  database   {_redact(settings.database_url)}",
        f"  redis      {_redact(settings.redis_url)}",
        f"  e-mail     {_redact(settings.smtp_url) or '(none: SMTP_URL is empty)'}",
        *(
            [f"  caught     {url}dev/mail (the sink's mail: invitations, resets, exports)"]
            if sink
            else []
        ),
        *[
            f"  worker     pid {pid} (try `kill -9 {pid}`: it is restarted, no task is lost)"
            for pid in workers
        ],
        "",
        f"Demo logins (password for all: {DEMO_PASSWORD})",
    ]
    lines += [f"  {email:<20} {role:<9} {team}" for email, _, role, team in DEMO_LOGINS]
    lines += ["", "Press Ctrl-C to stop.", ""]
    print("\n".join(lines), flush=True)
