"""`queue_email`: one EMAIL task in the caller's transaction; its message in the recipient's
language and time zone, text and HTML, with a Message-ID made from the task."""

from __future__ import annotations

from datetime import UTC, datetime
from email import message_from_bytes, policy
from email.message import EmailMessage

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from desk.core.errors import ValidationProblem
from desk.core.runtime import Runtime
from desk.ledger import lanes
from desk.work import mail
from tests.factories import World

EXPIRES = datetime(2026, 12, 10, 8, 0, tzinfo=UTC)
EXPORT = {
    "task_id": 41, "team_name": "Acme <R&D>", "rows": 1234,
    "link": "/tasks/41/download", "expires_at": EXPIRES,
}  # fmt: skip


async def _queue(rt: Runtime, **kw: object) -> int:
    args: dict[str, object] = {
        "to": "lin@acme.test", "template": "export_ready", "params": EXPORT, "locale": "en",
        "timezone": "UTC", "team_id": None, "user_id": None, "now": rt.clock(),
    }  # fmt: skip
    args.update(kw)
    async with rt.engine.begin() as conn:
        return await mail.queue_email(conn, **args)  # type: ignore[arg-type]


async def _row(rt: Runtime, task_id: int) -> dict[str, object]:
    async with rt.engine.connect() as conn:
        row = (
            await conn.execute(
                sa.text("SELECT * FROM background_task WHERE id = :i"), {"i": task_id}
            )
        ).one()
    return dict(row._mapping)


async def test_queues_one_waiting_email_task_in_the_short_lane(rt: Runtime, world: World) -> None:
    task_id = await _queue(rt, team_id=world.team, user_id=world.customer)
    row = await _row(rt, task_id)
    assert (row["kind"], row["status"], row["team_id"], row["owner_id"]) == (
        "EMAIL", "WAITING", world.team, world.customer,
    )  # fmt: skip
    assert lanes.lane_of("EMAIL") == lanes.SHORT
    assert row["dispatched_at"] is None  # sent by the dispatcher once the caller has committed
    filters = row["filters"]
    assert isinstance(filters, dict)
    assert filters["to"] == "lin@acme.test" and filters["template"] == "export_ready"
    assert filters["params"]["expires_at"] == "2026-12-10T08:00:00+00:00"


async def test_a_rolled_back_caller_leaves_no_email(rt: Runtime, world: World) -> None:
    with pytest.raises(RuntimeError):
        async with rt.engine.begin() as conn:
            await mail.queue_email(
                conn, to="lin@acme.test", template="reminder",
                params={"ticket_id": 1, "ticket_title": "x", "link": "/tickets/1"},
                locale="en", timezone="UTC", team_id=world.team, user_id=None, now=rt.clock(),
            )  # fmt: skip
            raise RuntimeError("the caller's change failed")
    async with rt.engine.connect() as conn:
        count = await conn.scalar(
            sa.text("SELECT count(*) FROM background_task WHERE kind = 'EMAIL'")
        )
    assert count == 0


async def test_no_team_and_no_account_is_allowed_for_email_only(rt: Runtime, world: World) -> None:
    task_id = await _queue(
        rt, template="password_reset", params={"link": "/reset/x", "expires_at": EXPIRES}
    )
    assert (await _row(rt, task_id))["team_id"] is None
    with pytest.raises(IntegrityError):
        async with rt.engine.begin() as conn:
            await conn.execute(
                sa.text(
                    "INSERT INTO background_task (kind, team_id, owner_id, scope_key) "
                    "VALUES ('NOOP', NULL, NULL, 'x')"
                )
            )


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"template": "newsletter"}, "template"),
        ({"to": "not an address"}, "to"),
        ({"to": "a@b.test, c@d.test"}, "to"),
        ({"to": "Lin <lin@acme.test>\r\nBcc: x@y.test"}, "to"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"params": {"task_id": 1}}, "params"),
        ({"params": {**EXPORT, "expires_at": "next week"}}, "params"),
        ({"params": {**EXPORT, "expires_at": datetime(2026, 12, 10)}}, "params"),
        ({"params": {**EXPORT, "rows": ["a list"]}}, "params"),
    ],
)
async def test_odd_input_is_refused_naming_the_field(
    rt: Runtime, world: World, kw: dict[str, object], field: str
) -> None:
    with pytest.raises(ValidationProblem) as caught:
        await _queue(rt, **kw)
    assert caught.value.field == field


def _message(filters: dict[str, object], task_id: int = 41) -> EmailMessage:
    raw = mail.build_message(
        task_id, filters, datetime(2026, 12, 3, tzinfo=UTC),
        mail_from="taskdesk <desk@acme.test>", public_url="https://desk.acme.test",
    ).as_bytes()  # fmt: skip
    parsed = message_from_bytes(raw, policy=policy.default)
    assert isinstance(parsed, EmailMessage)
    return parsed


def _parts(msg: EmailMessage) -> tuple[str, str]:
    text = msg.get_body(("plain",))
    html = msg.get_body(("html",))
    assert text is not None and html is not None
    return text.get_content(), html.get_content()  # type: ignore[attr-defined]


def _filters(locale: str, zone: str) -> dict[str, object]:
    params = {**EXPORT, "expires_at": EXPIRES.isoformat()}
    return {"to": "lin@acme.test", "template": "export_ready", "params": params,
            "locale": locale, "timezone": zone}  # fmt: skip


def test_english_message_in_the_recipients_time_zone() -> None:
    msg = _message(_filters("en", "America/New_York"))
    assert msg["Message-ID"] == "<taskdesk-task-41@desk.acme.test>"
    assert msg["Subject"] == "Export #41 is ready"
    text, html = _parts(msg)
    assert "1,234 rows" in text
    assert "Thu 10 Dec 2026, 03:00 (America/New_York)" in text
    assert "https://desk.acme.test/tasks/41/download" in text
    assert '<a href="https://desk.acme.test/tasks/41/download">' in html
    assert "Acme &lt;R&amp;D&gt;" in html and "Acme <R&D>" not in html  # autoescaped


def test_chinese_message_in_shanghai_time() -> None:
    msg = _message(_filters("zh_Hans", "Asia/Shanghai"))
    assert msg["Subject"] == "导出 #41 已完成"
    assert msg["Content-Language"] == "zh-Hans"
    text, html = _parts(msg)
    assert "2026年12月10日 16:00（Asia/Shanghai）" in text  # noqa: RUF001
    assert 'lang="zh-Hans"' in html


def test_the_same_task_gives_the_same_message_bytes() -> None:
    assert _message(_filters("en", "UTC")).as_bytes() == _message(_filters("en", "UTC")).as_bytes()
    assert (
        _message(_filters("en", "UTC"), 42)["Message-ID"]
        != _message(_filters("en", "UTC"))["Message-ID"]
    )


@pytest.mark.parametrize(
    ("template", "params", "expect"),
    [
        (
            "invitation",
            {
                "team_name": "Acme",
                "inviter_name": "Zhou",
                "role": "STAFF",
                "link": "/invitations/tok",
                "expires_at": EXPIRES.isoformat(),
            },
            "invited you",
        ),
        ("password_reset", {"link": "/reset/tok", "expires_at": EXPIRES.isoformat()}, "reset"),
        ("reminder", {"ticket_id": 7, "ticket_title": "Printer", "link": "/tickets/7"}, "#7"),
    ],
)
@pytest.mark.parametrize("locale", mail.LOCALES)
def test_every_template_renders_in_both_languages(
    template: str, params: dict[str, object], expect: str, locale: str
) -> None:
    filters = {"to": "a@b.test", "template": template, "params": params, "locale": locale,
               "timezone": "Europe/Berlin"}  # fmt: skip
    out = mail.render(filters, public_url="https://desk.acme.test/")
    assert out.subject and "\n" not in out.subject
    assert "https://desk.acme.test/" + str(params["link"]).lstrip("/") in out.text
    if locale == "en":
        assert expect in out.text + out.subject


def test_absolute_links() -> None:
    assert mail.absolute("/tasks/1", "https://d.test/") == "https://d.test/tasks/1"
    assert mail.absolute("https://else.test/x", "https://d.test") == "https://else.test/x"
    assert mail.locale_of("zh-CN") == "zh_Hans" and mail.locale_of("fr") == "en"


async def test_the_change_feed_announces_a_task_with_no_team(rt: Runtime, world: World) -> None:
    from desk.core.feed import TaskNote

    note = TaskNote.parse("5,,,EMAIL,WAITING,1,,,,0,0,0,,1")
    assert (note.id, note.team_id, note.owner_id, note.kind, note.created) == (
        5,
        0,
        0,
        "EMAIL",
        True,
    )
    async with rt.engine.connect() as conn:
        source = await conn.scalar(
            sa.text("SELECT pg_get_functiondef('taskdesk_feed_tasks'::regproc)")
        )
    assert "coalesce(n.team_id::text, '')" in source
