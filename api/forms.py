"""The multipart parts the plain routes read themselves, and how /openapi.json describes them:
the import CSV (REST's `POST /api/v1/imports` and the page's upload) and unknown fields."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from starlette.datastructures import FormData, UploadFile

from desk.core.errors import ValidationProblem

# What the import takes at once: any text that is not blank and holds no NUL (what
# desk.imports.reader.sniff checks then, with header=False). Its first row must name the columns
# (title and external_id or id): the import checks that when it runs, and fails saying so.
CSV_FILE: dict[str, Any] = {
    "type": "string",
    "pattern": "^[^\\x00]*[^ \\t\\n\\r\\x0b\\x0c\\x00][^\\x00]*$",
    "description": "The CSV (UTF-8), its first row naming the columns: title and external_id "
    "(or id), and any of status, priority, body, assignee_email",
}


async def csv_part(part: object, limit: int) -> tuple[bytes, str]:
    """The CSV's bytes (at most `limit` + 1, for the caller's cap) and its file name. A part
    without a file name arrives as text (`curl -F 'file=<tickets.csv'`): the same CSV."""
    if isinstance(part, UploadFile):
        return await part.read(limit + 1), part.filename or "upload.csv"
    if isinstance(part, str) and part:
        return part.encode(), "upload.csv"
    raise ValidationProblem("file", "send the CSV as the multipart field `file`")


def only_fields(form: FormData, allowed: Iterable[str]) -> None:
    """A multipart field the route does not take is refused, as an unknown JSON field is: a
    misspelt `files` must not post a message without its file."""
    unknown = sorted(set(form.keys()) - set(allowed))
    if unknown:
        raise ValidationProblem(unknown[0][:40] or "body", "not a field of this request")
