""" "Test connection" of a mailbox (docs/architecture.md, "Mail in"): connect, greet, log in and
select the folder read-only, as a fetch would, and say exactly which step failed — the name
did not resolve, the connection was refused or timed out, the TLS handshake failed, the login
was rejected, the folder is missing. It is asked for by a person waiting on a page, so the
whole check has a short deadline and runs on the event loop (aioimaplib), blocking nothing.
The password is used for the login only: no answer, log line or error ever repeats it."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from dataclasses import dataclass

import aioimaplib

from desk.work.imap import tls_context

TIMEOUT = 8.0  # seconds for the whole check: a person is waiting for the answer

# The step that failed, as a stable key (faces translate it) with its English sentence.
OK = "ok"
DNS = "dns"
REFUSED = "refused"
TIMEOUT_STEP = "timeout"
TLS = "tls"
LOGIN = "login"
FOLDER = "folder"
PROTOCOL = "protocol"


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    step: str  # one of the keys above
    message: str  # what happened, in words, naming host, port and folder (never the password)


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    use_tls: bool
    username: str
    folder: str


def _said(response: aioimaplib.Response) -> str:
    text = b" ".join(bytes(x) for x in response.lines[-1:]).decode("utf-8", "replace")
    return text[:200]


async def _connect(t: Target, ca_file: str) -> aioimaplib.IMAP4:
    if t.use_tls:  # verified as a fetch verifies it: the system's CAs and MAIL_CA_FILE's
        imap: aioimaplib.IMAP4 = aioimaplib.IMAP4_SSL(
            t.host, t.port, timeout=TIMEOUT, ssl_context=tls_context(ca_file)
        )
    else:
        imap = aioimaplib.IMAP4(t.host, t.port, timeout=TIMEOUT)
    await imap.wait_hello_from_server()
    return imap


async def _steps(t: Target, password: str, ca_file: str) -> CheckResult:
    where = f"{t.host}:{t.port}"
    try:
        imap = await _connect(t, ca_file)
    except socket.gaierror:
        return CheckResult(False, DNS, f"the name {t.host} could not be resolved (DNS)")
    except ConnectionRefusedError:
        return CheckResult(False, REFUSED, f"{where} refused the connection: nothing listens")
    except ssl.SSLError as exc:
        why = exc.reason or exc.__class__.__name__
        return CheckResult(False, TLS, f"the TLS handshake with {where} failed ({why})")
    except TimeoutError:
        return CheckResult(False, TIMEOUT_STEP, f"{where} did not answer within {TIMEOUT:g} s")
    except OSError as exc:
        return CheckResult(False, REFUSED, f"could not connect to {where}: {exc.strerror or exc}")
    try:
        login = await imap.login(t.username, password)
        if login.result != "OK":
            return CheckResult(False, LOGIN, f"the server rejected the login of {t.username}")
        chosen = await imap.examine(t.folder)
        if chosen.result != "OK":
            return CheckResult(
                False, FOLDER, f"the folder {t.folder!r} cannot be opened: {_said(chosen)}"
            )
        return CheckResult(True, OK, f"connected to {where}, logged in, opened {t.folder!r}")
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(imap.logout(), 2.0)


async def check(
    t: Target, password: str, *, seconds: float = TIMEOUT, ca_file: str = ""
) -> CheckResult:
    """Where a connection to the mailbox fails, or that it works (`ca_file`: MAIL_CA_FILE)."""
    try:
        async with asyncio.timeout(seconds):
            return await _steps(t, password, ca_file)
    except (TimeoutError, aioimaplib.CommandTimeout):
        return CheckResult(
            False, TIMEOUT_STEP, f"{t.host}:{t.port} did not answer within {seconds:g} s"
        )
    except (aioimaplib.AioImapException, ConnectionError, EOFError) as exc:
        # A greeting or answer that is not IMAP (some other service on the port), or a server
        # that hung up; the exception's text never contains what we sent.
        kind = exc.__class__.__name__
        return CheckResult(False, PROTOCOL, f"{t.host}:{t.port} does not speak IMAP ({kind})")
