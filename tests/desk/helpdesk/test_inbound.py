"""desk.helpdesk.inbound: a mailbox's raw message read into sender, ticket, text and files;
automatic mail recognised; hostile bytes read as far as they go, never raising."""

from __future__ import annotations

from email.message import EmailMessage

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from desk.helpdesk import inbound

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40


def mail(body: str = "Hello,\nthe printer is down.", **headers: str) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = headers.pop("From", "Lin Yu <Lin@Example.test>")
    msg["To"] = "support@acme.test"
    msg["Subject"] = headers.pop("Subject", "Printer")
    msg["Message-ID"] = "<abc@example.test>"
    for name, value in headers.items():
        msg[name.replace("_", "-")] = value
    msg.set_content(body)
    return msg


def test_a_plain_mail_gives_its_sender_subject_and_text() -> None:
    got = inbound.read(bytes(mail()))
    assert (got.sender, got.sender_name, got.subject) == ("lin@example.test", "Lin Yu", "Printer")
    assert got.text == "Hello,\nthe printer is down."
    assert got.message_id == "<abc@example.test>"
    assert got.automatic is None and got.problems == [] and got.ticket_hint() == (None, "")


def test_a_reply_names_its_ticket_by_our_message_id_before_the_subject() -> None:
    ours = "<taskdesk-ticket-231-521@desk.acme.test>"
    got = inbound.read(
        bytes(mail(Subject="Re: [#7] Printer", In_Reply_To=ours, References="<x@y> " + ours))
    )
    assert got.references[0] == ours and got.ticket_hint() == (231, "references")
    by_subject = inbound.read(bytes(mail(Subject="Re: [#7] Printer", In_Reply_To="<x@y>")))
    assert by_subject.ticket_hint() == (7, "subject")


def test_html_only_mail_becomes_safe_text_with_links_and_quotes() -> None:
    msg = mail()
    msg.set_content(
        "<html><head><style>p{color:red}</style><script>alert(1)</script></head><body>"
        "<p>It <b>still</b> fails, see <a href='https://example.test/log'>the log</a>.</p>"
        "<blockquote><p>Did you restart it?</p></blockquote></body></html>",
        subtype="html",
    )
    got = inbound.read(bytes(msg))
    assert "alert" not in got.text and "color" not in got.text and "<" not in got.text
    assert "It still fails, see https://example.test/log the log." in got.text
    assert "> Did you restart it?" in got.text.splitlines()


def test_the_plain_part_of_an_alternative_wins_and_files_are_kept() -> None:
    msg = mail("Plain words.")
    msg.add_alternative("<p>HTML words.</p>", subtype="html")
    msg.add_attachment(PNG, maintype="image", subtype="png", filename="../../etc/screen.png")
    got = inbound.read(bytes(msg))
    assert got.text == "Plain words."
    assert [(f.filename, f.content_type, f.data) for f in got.files] == [
        ("screen.png", "image/png", PNG)
    ]


def test_too_many_or_too_big_files_are_not_kept_and_say_so() -> None:
    msg = mail()
    for i in range(3):
        msg.add_attachment(
            b"x" * (10 + i * 100), maintype="text", subtype="plain", filename=f"f{i}.txt"
        )
    got = inbound.read(bytes(msg), max_files=2, max_file_bytes=150)
    assert [f.filename for f in got.files] == ["f0.txt", "f1.txt"]
    assert any("f2.txt: more than 2 files" in p for p in got.problems)
    small = inbound.read(bytes(msg), max_file_bytes=50)
    assert [f.filename for f in small.files] == ["f0.txt"]
    assert any("f1.txt: larger than 50 bytes" in p for p in small.problems)


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ({"Auto_Submitted": "auto-replied"}, "Auto-Submitted: auto-replied"),
        ({"Precedence": "bulk"}, "Precedence: bulk"),
        ({"X_Autoreply": "yes"}, "x-autoreply header"),
        ({"From": "MAILER-DAEMON@mx.example.test"}, "delivery status notification"),
        ({"Return_Path": "<>"}, "empty Return-Path (a bounce)"),
        ({"List_Id": "<news.example.test>"}, "mailing list"),
    ],
)
def test_automatic_mail_is_recognised(headers: dict[str, str], why: str) -> None:
    assert inbound.read(bytes(mail(**headers))).automatic == why


def test_auto_submitted_no_is_a_person_writing() -> None:
    assert inbound.read(bytes(mail(Auto_Submitted="no"))).automatic is None


def test_a_delivery_report_is_automatic() -> None:
    raw = (
        b"From: postmaster@mx.example.test\r\nTo: support@acme.test\r\nSubject: Undelivered\r\n"
        b"MIME-Version: 1.0\r\nContent-Type: multipart/report; report-type=delivery-status; "
        b'boundary="b"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nIt bounced.\r\n--b--\r\n'
    )
    assert inbound.read(raw).automatic == "delivery status notification"


def test_a_wrong_charset_nul_bytes_and_broken_mime_are_read_and_marked() -> None:
    raw = (
        b"From: lin@example.test\r\nSubject: =?utf-8?q?caf=C3=A9?=\r\nMIME-Version: 1.0\r\n"
        b'Content-Type: text/plain; charset="x-nonsense"\r\n\r\nPrinter\x00 d\xe9j\xe0 vu\r\n'
    )
    got = inbound.read(raw)
    assert (got.subject, got.text) == ("café", "Printer d\ufffdj\ufffd vu")
    assert "NUL bytes removed" in got.problems
    assert any("charset 'x-nonsense'" in p for p in got.problems)
    broken = inbound.read(
        b"From: lin@example.test\r\nContent-Type: multipart/mixed; boundary=zz\r\n\r\nno parts"
    )
    assert any(p.startswith("malformed MIME") for p in broken.problems)


def test_mail_without_a_sender_says_so() -> None:
    got = inbound.read(b"Subject: hi\r\n\r\nbody")
    assert got.sender == "" and "no sender address" in got.problems and got.text == "body"


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.binary(max_size=2000))
def test_any_bytes_at_all_are_read_without_raising(raw: bytes) -> None:
    got = inbound.read(raw)
    assert "\x00" not in got.text and "\x00" not in got.subject


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.integers(min_value=0, max_value=400), st.binary(min_size=1, max_size=20))
def test_a_real_mail_cut_or_spliced_anywhere_is_read_without_raising(at: int, junk: bytes) -> None:
    msg = mail("Words.")
    msg.add_attachment(PNG, maintype="image", subtype="png", filename="s.png")
    raw = bytes(msg)
    inbound.read(raw[:at] + junk + raw[at + len(junk) :])
