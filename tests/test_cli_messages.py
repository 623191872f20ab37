"""`taskdesk messages`: a ticket's conversation as a user sees it, retrying a failed delivery
(staff) and redacting (admins), through the real command against real PostgreSQL — with the
domain's rules: a note is staff's only, and what the user may not see answers as missing."""

from __future__ import annotations

import io
import subprocess
import sys

import sqlalchemy as sa

from desk.work import conversation
from tests.helpers import ROOT, settings_env
from tests.schema.scene import fail_task


def _taskdesk(settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "taskdesk", "messages", *args],
        cwd=ROOT, env=settings_env(settings), capture_output=True, text=True, timeout=60,
    )  # fmt: skip


class _Bytes:
    """A file's bytes, read as an upload is."""

    def __init__(self, data: bytes) -> None:
        self.buf = io.BytesIO(data)

    async def read(self, size: int = -1) -> bytes:
        return self.buf.read(size)


def _file(name: str, data: bytes) -> conversation.IncomingFile:
    return conversation.IncomingFile(name, _Bytes(data))


async def _email_tasks(rt, message_id: int) -> list[int]:
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text("SELECT task_id FROM message_email WHERE message_id = :m ORDER BY task_id"),
            {"m": message_id},
        )
        return [r.task_id for r in rows]


def _rows(out: str) -> dict[int, str]:
    """The message lines of `list`, by message id."""
    found = {}
    for line in out.splitlines():
        first = line.split(maxsplit=1)[0] if line.strip() else ""
        if first.isdigit():
            found[int(first)] = line
    return found


def _refused(done: subprocess.CompletedProcess[str], text: str) -> None:
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert text in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


async def test_list_shows_a_note_to_staff_and_never_to_the_customer(rt, world, settings):
    ticket = world.tickets["login"]
    asked = await conversation.post_message(
        rt, world.customer, ticket, "It still fails\nsee the log", files=[_file("app.log", b"x")]
    )
    note = await conversation.post_message(
        rt, world.staff, ticket, "Internal: their SSO is broken", internal=True,
        files=[_file("secret-trace.txt", b"trace")],
    )  # fmt: skip
    answer = await conversation.post_message(
        rt, world.staff, ticket, "Fixed, please try again", set_status="PENDING"
    )

    staff = _taskdesk(settings, "list", str(ticket), "--user", "chen@acme.test")
    assert staff.returncode == 0, staff.stderr
    out = staff.stdout
    assert f"ticket {ticket}: Cannot log in [PENDING], as chen@acme.test (staff)" in out
    rows = _rows(out)
    assert " Customer " in rows[asked.message.id] and "It still fails …" in rows[asked.message.id]
    assert "files: app.log (1 bytes)" in out
    assert " note " in rows[note.message.id]
    assert "Internal: their SSO is broken" in rows[note.message.id]
    assert "secret-trace.txt" in out
    assert " public " in rows[answer.message.id]
    assert "Fixed, please try again" in rows[answer.message.id]
    assert "mail to Customer: sending" in out  # the staff reply's e-mail, as it stands

    customer = _taskdesk(settings, "list", str(ticket), "--user", "lin@acme.test")
    assert customer.returncode == 0, customer.stderr
    out = customer.stdout
    assert "(customer)" in out and "It still fails" in out and "Fixed, please try again" in out
    assert "app.log" in out
    assert note.message.id not in _rows(out)
    for secret in ("SSO", "secret-trace.txt", " note ", "mail to"):
        assert secret not in out, secret

    paged = _taskdesk(settings, "list", str(ticket), "--user", "chen@acme.test", "--last", "1")
    assert "Fixed, please try again" in paged.stdout and "It still fails" not in paged.stdout
    assert f"(earlier messages: --before {answer.message.id})" in paged.stdout
    bad = _taskdesk(settings, "list", str(ticket), "--user", "chen@acme.test", "--last", "0")
    assert bad.returncode == 2 and "between 1 and 200" in bad.stderr


async def test_retry_is_for_staff(rt, world, settings):
    posted = await conversation.post_message(rt, world.staff, world.tickets["login"], "Any news?")
    message = str(posted.message.id)
    _refused(_taskdesk(settings, "retry", message, "--user", "chen@acme.test"), "nothing to retry")
    (task,) = await _email_tasks(rt, posted.message.id)
    await fail_task(rt, task)
    shown = _taskdesk(settings, "list", str(world.tickets["login"]), "--user", "zhou@acme.test")
    assert "mail to Customer: failed after " in shown.stdout and ": boom" in shown.stdout

    _refused(
        _taskdesk(settings, "retry", message, "--user", "lin@acme.test"),
        "taskdesk messages: Only staff and admins can do this.",
    )
    _refused(  # another team's admin: the message is not theirs to see
        _taskdesk(settings, "retry", message, "--user", "olga@globex.test"), "Message not found."
    )
    done = _taskdesk(settings, "retry", message, "--user", "chen@acme.test")
    assert done.returncode == 0, done.stderr
    assert f"message {message}: sending 1 failed e-mail again (task {task};" in done.stdout
    async with rt.engine.connect() as conn:
        status = (
            await conn.execute(
                sa.text("SELECT status FROM background_task WHERE id = :t"), {"t": task}
            )
        ).scalar_one()
    assert status == "WAITING"


async def test_redact_is_for_admins_and_audited(rt, world, settings):
    ticket = world.tickets["login"]
    posted = await conversation.post_message(
        rt, world.customer, ticket, "my password is hunter2", files=[_file("pw.txt", b"hunter2")]
    )
    note = await conversation.post_message(rt, world.staff, ticket, "a note", internal=True)
    message = str(posted.message.id)

    _refused(
        _taskdesk(settings, "redact", message, "--user", "chen@acme.test"),
        "taskdesk messages: Only team admins can do this.",
    )
    missing = _taskdesk(settings, "redact", "999999", "--user", "zhou@acme.test")
    _refused(missing, "Message not found.")
    for unseen in (  # a customer and a note, another team's admin: as missing
        _taskdesk(settings, "redact", str(note.message.id), "--user", "lin@acme.test"),
        _taskdesk(settings, "redact", message, "--user", "olga@globex.test"),
    ):
        assert (unseen.returncode, unseen.stderr) == (missing.returncode, missing.stderr)

    done = _taskdesk(settings, "redact", message, "--user", "zhou@acme.test")
    assert done.returncode == 0, done.stderr
    assert f"message {message} of ticket {ticket}: redacted" in done.stdout
    shown = _taskdesk(settings, "list", str(ticket), "--user", "lin@acme.test")
    assert "hunter2" not in shown.stdout and "pw.txt" not in shown.stdout
    assert "[redacted " in shown.stdout
    async with rt.engine.connect() as conn:
        audited = (
            await conn.execute(
                sa.text("SELECT detail FROM ops_audit WHERE action = 'message_redact'")
            )
        ).scalars().all()  # fmt: skip
    assert audited == [f"message {message} of ticket {ticket}"]
    again = _taskdesk(settings, "redact", message, "--user", "zhou@acme.test")
    assert again.returncode == 0, again.stderr  # redacting again changes nothing


async def test_a_ticket_not_yours_answers_as_a_missing_one(rt, world, settings):
    missing = _taskdesk(settings, "list", "999999", "--user", "chen@acme.test")
    _refused(missing, "taskdesk messages: Ticket not found.")
    for email, ticket in (
        ("chen@acme.test", world.tickets["globex"]),  # another team's ticket
        ("lin@acme.test", world.tickets["printer"]),  # another customer's ticket
        ("chen@acme.test", 99_999_999_999),  # not even an id
    ):
        unseen = _taskdesk(settings, "list", str(ticket), "--user", email)
        assert (unseen.returncode, unseen.stderr) == (missing.returncode, missing.stderr)
    _refused(
        _taskdesk(settings, "list", str(world.tickets["login"]), "--user", "nobody@acme.test"),
        "taskdesk messages: No user with email nobody@acme.test.",
    )
    bad = _taskdesk(settings, "retry", "12abc", "--user", "chen@acme.test")
    assert bad.returncode == 2 and "not an id" in bad.stderr
