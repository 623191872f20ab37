"""A customer's e-mail, as its raw bytes came from a mailbox, read into what a ticket needs
(docs/architecture.md, "Mail in"): who wrote, about which ticket, the text, the files, and
whether it is automatic mail that must never open a ticket or be answered.

`read(raw)` never raises, whatever the bytes: a message that is not valid MIME, names a charset
nobody knows, holds NUL bytes or is far too big is read as far as it can be and says what was
wrong in `problems` — the raw bytes stay stored as fetched, so nothing is lost by reading badly.
HTML becomes plain text (tags, scripts and styles dropped; links kept as their addresses), the
way every message of the thread is shown: plain text with safe formatting.
"""

from __future__ import annotations

import email.policy
import re
from dataclasses import dataclass, field
from email.message import Message
from email.parser import BytesParser
from email.utils import parseaddr
from html.parser import HTMLParser

from desk.core import inputs
from desk.helpdesk.attachments import clean_name, sniff

# Our own Message-IDs name the ticket and message (desk/work/mail.py `thread_id`).
_OURS = re.compile(r"<taskdesk-ticket-(\d{1,18})-(\d{1,18})@[^>]*>")
_SUBJECT_TICKET = re.compile(r"\[#(\d{1,18})\]")
_BLANKS = re.compile(r"\n{3,}")
_BULK = frozenset({"bulk", "junk", "list", "auto_reply"})
_AUTOREPLY_HEADERS = ("x-autoreply", "x-autorespond", "x-auto-response-suppress")
_DAEMONS = re.compile(r"^(mailer-daemon|postmaster)@", re.IGNORECASE)


@dataclass
class InboundFile:
    filename: str
    content_type: str
    data: bytes


@dataclass
class Inbound:
    message_id: str
    sender: str  # the address, lower case; "" when none could be read
    sender_name: str
    subject: str
    text: str
    references: list[str] = field(default_factory=list)  # In-Reply-To first, then References
    files: list[InboundFile] = field(default_factory=list)
    automatic: str | None = None  # why it is automatic mail (never a ticket, never answered)
    problems: list[str] = field(default_factory=list)

    def ticket_hint(self) -> tuple[int | None, str]:
        """The ticket this mail answers, and how that was found: one of our Message-IDs in its
        references ("references"), else a `[#N]` in the subject ("subject"), else none."""
        for ref in self.references:
            found = _OURS.fullmatch(ref)
            if found:
                return int(found.group(1)), "references"
        numbered = _SUBJECT_TICKET.search(self.subject)
        if numbered:
            return int(numbered.group(1)), "subject"
        return None, ""


def read(raw: bytes, *, max_files: int = 10, max_file_bytes: int = 25 * 2**20) -> Inbound:
    """The message in `raw`, read as far as it can be (see the module's docstring)."""
    problems: list[str] = []
    if b"\x00" in raw:
        problems.append("NUL bytes removed")
        raw = raw.replace(b"\x00", b"")
    try:
        msg = BytesParser(policy=email.policy.default).parsebytes(raw)
    except Exception as exc:  # the parser's own bugs on hostile input: read nothing, say so
        return Inbound("", "", "", "", "", problems=[*problems, f"unreadable: {exc!r}"[:300]])
    if msg.defects:
        problems.append("malformed MIME: " + ", ".join(type(d).__name__ for d in msg.defects[:5]))
    name, sender = _sender(msg, problems)
    found = Inbound(
        message_id=_header(msg, "message-id", problems).strip(),
        sender=sender,
        sender_name=name,
        subject=_clean(_header(msg, "subject", problems)).replace("\n", " ").strip()[:500],
        text="",
        references=_references(msg, problems),
        problems=problems,
    )
    try:
        found.automatic = _automatic(msg, sender, problems)
        found.text, found.files = _body(msg, problems, max_files, max_file_bytes)
    except Exception as exc:  # the email package on hostile input: keep what was read
        problems.append(f"unreadable: {type(exc).__name__}")
    return found


def _header(msg: Message, name: str, problems: list[str]) -> str:
    try:
        return str(msg.get(name, "") or "")
    except Exception as exc:  # a header the policy cannot decode
        problems.append(f"unreadable {name} header: {type(exc).__name__}")
        raw = [v for k, v in msg.raw_items() if k.lower() == name]  # as written, unparsed
        return str(raw[0]) if raw else ""


def _sender(msg: Message, problems: list[str]) -> tuple[str, str]:
    for header in ("reply-to", "from"):
        name, address = parseaddr(_header(msg, header, problems))
        if "@" in address:
            return _clean(name).strip()[:200], address.strip().lower()[:320]
    problems.append("no sender address")
    return "", ""


def _references(msg: Message, problems: list[str]) -> list[str]:
    ids: list[str] = []
    for header in ("in-reply-to", "references"):
        ids += re.findall(r"<[^<>\s]{1,500}>", _header(msg, header, problems))
    return list(dict.fromkeys(ids))[:100]


def _automatic(msg: Message, sender: str, problems: list[str]) -> str | None:
    """Why this is mail no one should answer (RFC 3834 and the headers auto-responders use)."""
    submitted = _header(msg, "auto-submitted", problems).strip().lower()
    if submitted and submitted != "no":
        return f"Auto-Submitted: {submitted}"
    precedence = _header(msg, "precedence", problems).strip().lower()
    if precedence in _BULK:
        return f"Precedence: {precedence}"
    for header in _AUTOREPLY_HEADERS:
        if _header(msg, header, problems):
            return f"{header} header"
    if msg.get_content_type() == "multipart/report" or _DAEMONS.match(sender):
        return "delivery status notification"
    if _header(msg, "return-path", problems).strip() == "<>":
        return "empty Return-Path (a bounce)"
    if _header(msg, "list-id", problems) or _header(msg, "list-unsubscribe", problems):
        return "mailing list"
    return None


def _body(
    msg: Message, problems: list[str], max_files: int, max_file_bytes: int
) -> tuple[str, list[InboundFile]]:
    plain, html = "", ""
    files: list[InboundFile] = []
    for n, part in enumerate(msg.walk()):
        try:
            if part.is_multipart():
                continue
            kind, disposition = part.get_content_type(), part.get_content_disposition()
            named = _decoded_filename(part, problems) != "file"
            if disposition == "attachment" or (named and kind != "text/plain"):
                _attach(part, files, problems, max_files, max_file_bytes)
            elif kind == "text/plain" and not plain:
                plain = _text_of(part, problems)
            elif kind == "text/html" and not html:
                html = _text_of(part, problems)
        except Exception as exc:  # the email package on a hostile part: skip it, say so
            problems.append(f"part {n} unreadable: {type(exc).__name__}")
    text = plain or (html_to_text(html) if html else "")
    return _BLANKS.sub("\n\n", _clean(text)).strip(), files


def _attach(
    part: Message, files: list[InboundFile], problems: list[str], most: int, biggest: int
) -> None:
    data = part.get_payload(decode=True)
    name = clean_name(_decoded_filename(part, problems))
    if not isinstance(data, bytes):
        problems.append(f"{name}: no content")
    elif len(files) >= most:
        problems.append(f"{name}: more than {most} files; not kept")
    elif len(data) > biggest:
        problems.append(f"{name}: larger than {biggest} bytes; not kept")
    else:
        files.append(InboundFile(name, sniff(data[:512]), data))


def _decoded_filename(part: Message, problems: list[str]) -> str:
    try:
        return part.get_filename() or "file"
    except Exception as exc:
        problems.append(f"unreadable file name: {type(exc).__name__}")
        return "file"


def _text_of(part: Message, problems: list[str]) -> str:
    data = part.get_payload(decode=True)
    if not isinstance(data, bytes):
        return ""
    charset = part.get_content_charset() or "utf-8"
    try:
        return data.decode(charset)
    except (LookupError, UnicodeDecodeError):
        problems.append(f"text not in its charset {charset!r}; read as UTF-8 with replacements")
        return data.decode("utf-8", errors="replace")


def _clean(text: str) -> str:
    return inputs.without_bad(text.replace("\r\n", "\n").replace("\r", "\n"))


class _Text(HTMLParser):
    """HTML to the text a reader sees: blocks as line breaks, links as their addresses, and
    nothing of scripts, styles or the head."""

    _BLOCKS = frozenset({"p", "div", "br", "tr", "li", "h1", "h2", "h3", "h4", "blockquote"})
    _HIDDEN = frozenset({"script", "style", "head", "title", "template"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.hidden = 0
        self.quote = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._HIDDEN:
            self.hidden += 1
        elif tag in self._BLOCKS:
            self.quote += tag == "blockquote"
            self._break()
        elif tag == "a":
            href = dict(attrs).get("href") or ""
            if href.startswith(("http://", "https://")):
                self.out.append(f" {href} ")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag in self._BLOCKS:
            self.quote = max(0, self.quote - (tag == "blockquote"))
            self._break()

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.out.append(data.replace("\n", "\n" + "> " * self.quote))

    def _break(self) -> None:
        # A quoted block's lines start with "> ", as a quote in a plain-text mail does, so the
        # thread folds it like any quoted text.
        self.out.append("\n" + "> " * self.quote)


def html_to_text(html: str) -> str:
    parser = _Text()
    try:
        parser.feed(html)
        parser.close()
    except Exception:  # html.parser on hostile input: keep what was read
        pass
    lines = [" ".join(line.split()) for line in "".join(parser.out).split("\n")]
    return "\n".join(line for line in lines if line != ">").strip()
