"""The development mail sink: `taskdesk dev` runs an SMTP server (aiosmtpd) on a free port that
accepts every message and keeps it, raw, as `<DATA_DIR>/mail/NNNNNN.eml`; the dev-only page
/dev/mail lists and shows them. Nothing leaves the machine.

The files are the one place both sides meet: the sink (in the `taskdesk dev` process) writes
each message whole and then renames it into place, the web process only reads.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import socket
import threading
from dataclasses import dataclass
from datetime import datetime
from email import message_from_bytes, policy
from email.message import EmailMessage
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session

NAME = re.compile(r"^(\d{6})\.eml$")
KEEP = 500  # the newest messages kept; older ones are deleted as new ones arrive


def folder(data_dir: str | Path) -> Path:
    return Path(data_dir) / "mail"


class _Store:
    """aiosmtpd's handler: accept everything, keep each message as a numbered file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        found = [int(m.group(1)) for p in root.iterdir() if (m := NAME.match(p.name))]
        self.numbers = itertools.count(max(found, default=0) + 1)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        with self.lock:
            n = next(self.numbers)
        tmp = self.root / f".{n:06d}.tmp"
        tmp.write_bytes(envelope.original_content or b"")
        tmp.rename(self.root / f"{n:06d}.eml")
        for old in sorted(self.root.glob("*.eml"))[:-KEEP]:
            old.unlink(missing_ok=True)
        return "250 OK caught by the taskdesk dev sink"


POINTER = ".sink.json"  # {pid, url} of the running sink, for commands started beside dev


@dataclass
class Sink:
    controller: Controller
    url: str  # what SMTP_URL should be
    pointer: Path

    def stop(self) -> None:
        self.controller.stop()
        self.pointer.unlink(missing_ok=True)


def running_url(data_dir: str | Path) -> str | None:
    """The SMTP_URL of the sink a running `taskdesk dev` keeps for `data_dir` (a `taskdesk
    worker` started beside it sends there too), or None."""
    try:
        body = json.loads((folder(data_dir) / POINTER).read_text())
        os.kill(int(body["pid"]), 0)  # raises when that dev is gone
        return str(body["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def start(data_dir: str | Path, host: str = "127.0.0.1") -> Sink:
    """Start the sink on a free port of `host` (in a thread of this process)."""
    with socket.socket() as s:
        s.bind((host, 0))
        port = int(s.getsockname()[1])
    controller = Controller(_Store(folder(data_dir)), hostname=host, port=port)
    controller.start()
    url = f"smtp://{host}:{port}"
    pointer = folder(data_dir) / POINTER
    pointer.with_suffix(".tmp").write_text(json.dumps({"pid": os.getpid(), "url": url}))
    pointer.with_suffix(".tmp").replace(pointer)
    return Sink(controller, url, pointer)


@dataclass(frozen=True)
class Caught:
    number: int
    subject: str
    sender: str
    to: str
    date: datetime | None
    message_id: str
    text: str
    html: str | None


def _read(path: Path, number: int) -> Caught:
    msg: Any = message_from_bytes(path.read_bytes(), policy=policy.default)
    assert isinstance(msg, EmailMessage)
    text, html = msg.get_body(("plain",)), msg.get_body(("html",))
    try:
        date = parsedate_to_datetime(str(msg["Date"])) if msg["Date"] else None
    except (TypeError, ValueError):
        date = None
    return Caught(
        number=number,
        subject=str(msg["Subject"] or ""),
        sender=str(msg["From"] or ""),
        to=str(msg["To"] or ""),
        date=date,
        message_id=str(msg["Message-ID"] or ""),
        text=text.get_content() if text is not None else "",
        html=html.get_content() if html is not None else None,
    )


def caught(data_dir: str | Path, *, limit: int = 100) -> list[Caught]:
    """The newest caught messages first."""
    root = folder(data_dir)
    if not root.is_dir():
        return []
    numbered = sorted(
        ((int(m.group(1)), p) for p in root.iterdir() if (m := NAME.match(p.name))), reverse=True
    )
    return [_read(p, n) for n, p in numbered[:limit]]


def one(data_dir: str | Path, number: int) -> Caught | None:
    path = folder(data_dir) / f"{number:06d}.eml"
    return _read(path, number) if 0 < number < 10**6 and path.is_file() else None
