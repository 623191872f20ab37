"""EMAIL: send one message through SMTP (aiosmtplib), then complete the task.

SMTP cannot be fenced: a worker killed after the server's "250" and before the ledger's commit
is rescued and sends again. The message is built from the task alone (desk/work/mail.py), so the
second copy has the same Message-ID and bytes, and a receiver can tell it is the same message.

The server's answer decides the outcome: 4xx (and a server that cannot be reached) is temporary
— `RetryLater`, the ledger's backoff; 5xx is final — `Permanent`, with the reply in
`last_error` under the key `email.rejected` (the console's failure groups).
"""

from __future__ import annotations

import email.utils
import logging

import aiosmtplib

from desk.core.messages import Message, message
from desk.core.settings import smtp_parts
from desk.ledger import run as ledger_run
from desk.work import mail
from jobs.execution import Execution
from jobs.outcomes import Permanent, RetryLater

log = logging.getLogger("taskdesk.email")
SEND_TIMEOUT = 30.0  # seconds for each SMTP step; the lease is kept alive meanwhile
MAX_REPLY = 300


def _clean(text: str) -> str:
    """One line, no double quotes: the message quotes it, so the console's failure groups
    gather every reply of one kind under one title (desk/console/failures.py)."""
    return " ".join(text.replace('"', "'").split())[:MAX_REPLY]


def _reply(code: int, text: str) -> str:
    return _clean(f"{code} {text}")


def _outcome(code: int, text: str) -> RetryLater | Permanent:
    reply = _reply(code, text)
    if 400 <= code < 500:
        return RetryLater(message("email.deferred", reply=reply))
    return Permanent(message("email.rejected", reply=reply))


async def _send(ex: Execution) -> None:
    s = ex.rt.settings
    if not s.smtp_url:
        raise Permanent(message("email.no_server"))
    server = smtp_parts(s.smtp_url)
    filters = ex.row.filters
    msg = mail.build_message(
        ex.task_id, filters, ex.row.created_at, mail_from=s.mail_from, public_url=s.public_url
    )
    _, sender = email.utils.parseaddr(s.mail_from)
    try:
        await aiosmtplib.send(
            msg,
            sender=sender,
            recipients=[mail.recipient(filters)],
            hostname=server.host,
            port=server.port,
            username=server.username,
            password=server.password,
            use_tls=server.implicit_tls,
            start_tls=server.starttls,
            timeout=SEND_TIMEOUT,
        )
    except aiosmtplib.SMTPRecipientsRefused as exc:
        first = exc.recipients[0]
        raise _outcome(first.code, first.message) from None
    except aiosmtplib.SMTPResponseException as exc:
        raise _outcome(exc.code, exc.message) from None
    except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
        text = _clean(str(exc)) or type(exc).__name__
        raise RetryLater(message("email.unreachable", reply=text)) from None


async def process(ex: Execution) -> None:
    ex.raise_if_stopped()
    await _send(ex)
    log.info("task %s: e-mail accepted by the server", ex.task_id)
    sent: Message = message("email.sent")
    done = await ex.fenced(
        lambda: ledger_run.complete(
            ex.rt.pg,
            ex.task_id,
            ex.execution_id,
            now=ex.rt.clock(),
            summary=sent.text,
            summary_key=sent.key,
        )
    )
    ex.finished(done)
