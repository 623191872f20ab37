"""A real SMTP server for the tests, run as a separate process (aiosmtpd):

    python -m tests.smtp_server --dir DIR

It writes the port it listens on to DIR/port, and each message it accepts, raw, to
DIR/messages/NNNN.eml (written whole, then renamed: a reader never sees half a file).
Recipients steer its answers by their local part:

- `reject+…@…`: 550 at RCPT, every time;
- `tempfail+…@…`: 451 at RCPT the first time the address is seen, then accepted.

A file DIR/kill-after-data holding a pid makes the next DATA be stored and then that process be
killed with SIGKILL *before* the server answers 250 (the crash between the mail server's accept
and the ledger's commit); the file is removed once used.

`SmtpServer` (below) starts and reads such a process from a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.smtp import SMTP, Envelope, Session


class Handler:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.messages = root / "messages"
        self.messages.mkdir(parents=True, exist_ok=True)
        self.tempfailed: set[str] = set()

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: Any
    ) -> str:
        local = address.split("@")[0].lower()
        if local.startswith("reject+"):
            return f"550 5.1.1 <{address}>: mailbox unavailable"
        if local.startswith("tempfail+") and address not in self.tempfailed:
            self.tempfailed.add(address)
            return "451 4.3.0 greylisted, try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        raw = envelope.original_content or b""
        n = len(list(self.messages.glob("*.eml"))) + 1
        tmp = self.messages / f".{n:04d}.tmp"
        tmp.write_bytes(raw)
        tmp.rename(self.messages / f"{n:04d}.eml")
        trigger = self.root / "kill-after-data"
        if trigger.exists():
            pid = int(trigger.read_text().strip())
            trigger.unlink()
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return "250 OK queued"


async def serve(root: Path) -> None:
    handler = Handler(root)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: SMTP(handler, hostname="smtp.test", enable_SMTPUTF8=True), "127.0.0.1", 0
    )
    port = server.sockets[0].getsockname()[1]
    (root / ".port").write_text(str(port))
    (root / ".port").rename(root / "port")
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    server.close()


class SmtpServer:
    """The server above in its own process, for a test: its URL, what it received, its controls."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.log = open(root / "server.log", "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.smtp_server", "--dir", str(root)],
            cwd=Path(__file__).resolve().parents[1],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"the SMTP server died: {(self.root / 'server.log').read_text()}")
        return (self.root / "port").exists()

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{(self.root / 'port').read_text()}"

    def kill_after_data(self, pid: int) -> None:
        """The next message is stored, then `pid` is killed before the server says 250."""
        (self.root / ".kill").write_text(str(pid))
        (self.root / ".kill").rename(self.root / "kill-after-data")

    def raw(self) -> list[bytes]:
        return [p.read_bytes() for p in sorted((self.root / "messages").glob("*.eml"))]

    def messages(self) -> list[EmailMessage]:
        out = []
        for raw in self.raw():
            msg = message_from_bytes(raw, policy=policy.default)
            assert isinstance(msg, EmailMessage)
            out.append(msg)
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.dir))


if __name__ == "__main__":
    main()
