"""One IMAP connection of a mailbox fetch (docs/architecture.md, "Mail in"): over TLS the
server's certificate is always verified (the system's CAs and MAIL_CA_FILE's), every step waits
at most `Options.timeout`, a connection the server drops ends the step at once, and `idle`
waits in IMAP IDLE for new mail where the server offers it.

Every failure is an ImapProblem whose text says which step failed and why — it becomes the
mailbox's `last_error`."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

import aioimaplib

from desk.core.settings import Settings

T = TypeVar("T")
_STOP = aioimaplib.STOP_WAIT_SERVER_PUSH


class ImapProblem(Exception):
    """The server refused, could not be reached or went away: the text says which step and why."""


@dataclass(frozen=True)
class Options:
    timeout: float = 30.0  # seconds for each IMAP step
    ca_file: str = ""  # PEM CAs trusted besides the system's
    batch: int = 50  # messages per UID FETCH (and per committed batch)

    @classmethod
    def of(cls, settings: Settings) -> Options:
        return cls(
            timeout=settings.mail_imap_timeout_seconds,
            ca_file=settings.mail_ca_file,
            batch=settings.mail_fetch_batch,
        )


def tls_context(ca_file: str = "") -> ssl.SSLContext:
    """Certificates and host names verified; `ca_file` trusted besides the system's CAs."""
    ctx = ssl.create_default_context()
    if ca_file:
        ctx.load_verify_locations(cafile=ca_file)
    return ctx


def check(step: str, response: aioimaplib.Response) -> aioimaplib.Response:
    if response.result != "OK":
        said = b" ".join(bytes(x) for x in response.lines[-1:]).decode("utf-8", "replace")
        raise ImapProblem(f"{step} refused: {said[:200]}")
    return response


class Session:
    """A logged-in connection; use `async with Session.open(...)`."""

    def __init__(self, host: str, port: int, *, tls: bool, options: Options) -> None:
        self.where = f"{host}:{port}"
        self.options = options
        self.lost = asyncio.Event()
        self.imap = aioimaplib.IMAP4(
            host, port, timeout=options.timeout, conn_lost_cb=lambda _exc: self.lost.set(),
            ssl_context=tls_context(options.ca_file) if tls else None,
        )  # fmt: skip

    async def step(self, name: str, work: Awaitable[T], within: float | None = None) -> T:
        """`work`, or ImapProblem when it outlasts the timeout or the server hangs up first."""
        job = asyncio.ensure_future(work)
        gone = asyncio.ensure_future(self.lost.wait())
        try:
            done, _ = await asyncio.wait(
                {job, gone}, timeout=within or self.options.timeout,
                return_when=asyncio.FIRST_COMPLETED,
            )  # fmt: skip
        finally:
            gone.cancel()
        if job in done:
            try:
                return job.result()
            except (aioimaplib.Abort, aioimaplib.CommandTimeout, OSError, TimeoutError) as exc:
                raise ImapProblem(f"{name} failed: {type(exc).__name__}: {exc}"[:300]) from None
        job.cancel()
        if self.lost.is_set():
            raise ImapProblem(f"{name}: {self.where} closed the connection")
        raise ImapProblem(
            f"{name}: no answer from {self.where} in {within or self.options.timeout:.0f} s"
        )

    async def connect(self, username: str, password: str) -> None:
        try:
            await self.step("connect", self.imap.wait_hello_from_server())
        except ImapProblem as exc:
            raise ImapProblem(_connect_error(self.where, exc)) from None
        check("login", await self.step("login", self.imap.login(username, password)))

    def offers_idle(self) -> bool:
        return bool(self.imap.has_capability("IDLE"))

    async def idle(self, seconds: float) -> bool:
        """Wait in IDLE up to `seconds`; True when the server announced new mail (EXISTS)."""
        idling = await self.step("idle", self.imap.idle_start(timeout=seconds))
        announced = False
        loop = asyncio.get_running_loop()
        until = loop.time() + seconds
        while not announced and loop.time() < until:
            push = await self.step(
                "idle", self.imap.wait_server_push(timeout=seconds + 5), within=seconds + 5
            )
            if push == _STOP:
                break
            announced = any(b"EXISTS" in bytes(line) for line in push)
        self.imap.idle_done()
        check("idle", await self.step("idle done", idling))
        return announced

    async def close(self) -> None:
        # The fetch's outcome is decided: a failed goodbye changes nothing.
        with contextlib.suppress(Exception):
            if not self.lost.is_set():
                await asyncio.wait_for(self.imap.logout(), min(5.0, self.options.timeout))
        with contextlib.suppress(Exception):
            if self.imap.protocol is not None and self.imap.protocol.transport is not None:
                self.imap.protocol.transport.close()


def _connect_error(where: str, exc: ImapProblem) -> str:
    text = str(exc)
    if "CERTIFICATE_VERIFY_FAILED" in text or "SSLCertVerificationError" in text:
        why = text.split("certificate verify failed:", 1)[-1].strip(" )")
        return (
            f"connect: the TLS certificate of {where} is not trusted ({why}); "
            "a private CA goes in MAIL_CA_FILE"
        )[:300]
    if "SSL" in text:
        return f"connect: TLS handshake with {where} failed: {text}"[:300]
    return f"could not connect to {where}: {text}"[:300]
