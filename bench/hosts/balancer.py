"""HAProxy in front of the hosts' web processes: round robin, a health check on `/health`, a
dead member taken out and its requests sent to another. The config is written to the run's log
folder; HAProxy runs in the foreground as a child process (its log: errors and member state
changes only) and stops at the end. `stats()` reads its per-member counters over the stats
socket.

Needs Debian's `haproxy` (2.6 tested): `apt-get install -y haproxy`.
"""

from __future__ import annotations

import csv
import io
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench import procs
from bench.web import free_port

INSTALL = (
    "HAProxy is not installed (the drill puts it in front of the web processes): "
    "apt-get install -y haproxy   (Debian's package; 2.6 tested)"
)
# Health checks every second; a member is out after three failed in a row. A dead member refuses
# the connection at once, so it is out within ~3 s (and a request it refuses meanwhile goes to
# another member: `retries`, `redispatch`). A slow answer is not a failure up to 10 s: on a
# saturated machine /health waited 2 s and more behind the requests in every member at once, and a
# 2 s check timeout took all three out together (the balancer then answered 503 itself).
CHECK = "check inter 1s fall 3 rise 2"

CONFIG = """\
# Written by bench/hosts for one run of the many-host drill.
global
    log stdout format iso local0
    maxconn 4096
    stats socket {socket} mode 600 level admin

defaults
    mode http
    log global
    option httplog
    # Only abnormal requests (errors, retries, redispatches) are logged.
    option dontlog-normal
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 10s
    timeout check 10s
    # A connection refused by a dead member is tried again, on another member each time.
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response

frontend drill
    bind 127.0.0.1:{port}
    default_backend web

backend web
    balance roundrobin
    # A request sent to a member that died before answering goes to another member only when
    # sending it again changes nothing (GET); a POST may have committed there.
    http-request disable-l7-retry unless METH_GET
    option httpchk GET /health
    # /health is 503 while the whole system is unwell (no live worker, a task overdue): every
    # member says the same then, so 503 still means "this member answers" and only a member
    # that does not answer is taken out.
    http-check expect rstatus ^(200|503)$
{servers}
"""


@dataclass(frozen=True)
class Balancer:
    url: str
    pid: int
    socket: Path
    config: Path


def binary() -> str | None:
    return shutil.which("haproxy") or next(
        (p for p in ("/usr/sbin/haproxy",) if Path(p).exists()), None
    )


def config(port: int, members: dict[str, str], sock: Path) -> str:
    """The config: `members` maps a host's name to its web process's `host:port`."""
    servers = "\n".join(f"    server {name} {addr} {CHECK}" for name, addr in members.items())
    return CONFIG.format(socket=sock, port=port, servers=servers)


@contextmanager
def run(members: dict[str, str], logs: Path) -> Iterator[Balancer]:
    """HAProxy balancing over `members`, answering through its port before this yields."""
    exe = binary()
    if exe is None:
        raise RuntimeError(INSTALL)
    port, sock, cfg = free_port(), logs / "haproxy.sock", logs / "haproxy.cfg"
    cfg.write_text(config(port, members, sock))
    checked = subprocess.run(
        [exe, "-c", "-f", str(cfg)], capture_output=True, text=True, timeout=30
    )
    if checked.returncode != 0:
        raise RuntimeError(f"HAProxy refused {cfg}: {checked.stderr.strip()[-500:]}")
    proc = procs.Proc([exe, "-db", "-f", str(cfg)], {}, logs / "haproxy.log")
    url = f"http://127.0.0.1:{port}"
    try:
        procs.wait_until(lambda: _answers(url) or not proc.alive(), 30, f"HAProxy on {port}")
        if not proc.alive():
            raise RuntimeError(f"HAProxy exited; see {logs / 'haproxy.log'}")
        yield Balancer(url, proc.pid, sock, cfg)
    finally:
        proc.stop()


def _answers(url: str) -> bool:
    """A member answered through the balancer (the app's `unavailable` is an answer too; the
    balancer's own 503 is not)."""
    try:
        r = httpx.get(url + "/health", timeout=2.0)
    except httpx.HTTPError:
        return False
    return r.status_code == 200 or r.text == "unavailable"


def stats(sock: Path) -> list[dict[str, str]]:
    """HAProxy's `show stat`: one dict per frontend, member and backend (its CSV columns)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(str(sock))
        s.sendall(b"show stat\n")
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    text = b"".join(chunks).decode().lstrip("# ")
    return [dict(row) for row in csv.DictReader(io.StringIO(text)) if row.get("svname")]


def requests(sock: Path) -> int:
    """Requests the balancer's frontend has taken so far (its health checks are not counted)."""
    rows = [r for r in stats(sock) if r.get("svname") == "FRONTEND"]
    return sum(int(r.get("req_tot") or 0) for r in rows)
