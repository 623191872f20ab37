"""What /openapi.json says beyond FastAPI's own inference, so a generated client can trust it:
the error answers every route can give (web/errors.py's `{"error": {code, message[, field]}}`),
and the multipart bodies routes read themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, Field

JSON_ERRORS = "application/json"
# Text without the characters desk.core.inputs refuses (C0 controls but tab, LF and CR; DEL),
# so a schema-valid value is never refused for them.
CONTROLS = "\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f"
PLAIN_TEXT = f"^[^{CONTROLS}]*$"
# The same with something other than white space in it (a text that must not be blank).
SOME_TEXT = f"^[^{CONTROLS}]*[^\\s{CONTROLS}][^{CONTROLS}]*$"


class ErrorBody(BaseModel):
    code: str = Field(description="VALIDATION, NOT_FOUND, UNAUTHENTICATED, TOO_LARGE, …")
    message: str
    field: str | None = Field(None, description="The value to fix (VALIDATION)")
    task_id: int | None = Field(None, description="The active task (TASK_CONFLICT)")


class ErrorOut(BaseModel):
    error: ErrorBody


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorOut, "description": description}


_RETRY = "with `Retry-After`"
_COMMON: dict[int | str, dict[str, Any]] = {
    400: _error("The body could not be read (not UTF-8, not the declared type)"),
    401: _error("No or an unknown token or session (UNAUTHENTICATED)"),
    404: _error("Missing, or not yours to see: the same answer"),
    422: _error("A value to fix: `error.field` names it (VALIDATION)"),
    429: _error(f"Too many requests (RATE_LIMITED or QUOTA_EXCEEDED), {_RETRY}"),
    503: _error(f"The database is out of reach or the server is busy, {_RETRY}"),
}


@dataclass(frozen=True)
class Errors:
    read: dict[int | str, dict[str, Any]]
    write: dict[int | str, dict[str, Any]]
    write_file: dict[int | str, dict[str, Any]]


_WRITE = _COMMON | {
    403: _error("Your role may not do this, or the CSRF token is missing (FORBIDDEN)"),
    413: _error("The body is over its route's limit (PAYLOAD_TOO_LARGE)"),
}
ERRORS = Errors(
    read=dict(_COMMON),
    write=_WRITE,
    write_file=_WRITE | {413: _error("A file, the files or the body over its cap (TOO_LARGE)")},
)


def multipart(
    properties: dict[str, Any],
    *,
    required: list[str] | None = None,
    json_model: type[BaseModel] | None = None,
) -> dict[str, Any]:
    """`openapi_extra` declaring a body the route reads itself: multipart with these fields,
    and with `json_model` also JSON of that model (FastAPI sees neither when a route takes the
    `Request`)."""
    form: dict[str, Any] = {
        "type": "object", "properties": properties, "additionalProperties": False,
    }  # fmt: skip
    if required:
        form["required"] = required
    content: dict[str, Any] = {"multipart/form-data": {"schema": form}}
    if json_model is not None:
        content = {"application/json": {"schema": json_model.model_json_schema()}} | content
    return {"requestBody": {"required": True, "content": content}}


# What the plain downloads send: always bytes to save, in the file's own type.
_DOWNLOAD = {"*/*": {"schema": {"type": "string", "format": "binary"}}}
DOWNLOAD_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "The file, as an attachment", "content": _DOWNLOAD}
}

_TEXT = {"text/plain": {"schema": {"type": "string"}}}
METRICS_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "Prometheus text exposition", "content": _TEXT}
}
_HEALTH = {"application/json": {"schema": {"type": "object"}}} | _TEXT
HEALTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "`ok` (operators: the report as JSON)", "content": _HEALTH},
    503: {"description": "`unavailable`: no worker alive, Redis down or work overdue",
          "content": _HEALTH},
}  # fmt: skip


def complete(app: FastAPI) -> None:
    """/openapi.json with every operation's error answers: the read ones on every operation,
    the write ones (403, 413) on every POST, added where a route has not declared its own."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(title=app.title, version=app.version, routes=app.routes)
            refs = doc.setdefault("components", {}).setdefault("schemas", {})
            refs.setdefault("ErrorOut", ErrorOut.model_json_schema(ref_template=_REF))
            refs.setdefault("ErrorBody", ErrorBody.model_json_schema(ref_template=_REF))
            refs["ErrorOut"].pop("$defs", None)
            for operations in doc.get("paths", {}).values():
                for method, op in operations.items():
                    _add_errors(op, ERRORS.write if method == "post" else ERRORS.read)
                    for param in op.get("parameters", ()):
                        _not_null(param)
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


_REF = "#/components/schemas/{model}"


def _not_null(param: dict[str, Any]) -> None:
    """An optional query or header parameter is left out, never sent as the text `null`: its
    schema is the value's alone (FastAPI writes `anyOf: [value, null]` for `X | None`)."""
    schema = param.get("schema", {})
    kept = [s for s in schema.get("anyOf", ()) if s.get("type") != "null"]
    if len(kept) == 1 and len(kept) < len(schema["anyOf"]):
        del schema["anyOf"]
        schema.update(kept[0])


def _add_errors(op: dict[str, Any], errors: dict[int | str, dict[str, Any]]) -> None:
    answers = op.setdefault("responses", {})
    declared = answers.get("422", {}).get("content", {}).get(JSON_ERRORS, {}).get("schema", {})
    if declared.get("$ref", "").endswith("/HTTPValidationError"):
        del answers["422"]  # FastAPI's default; the API answers its own VALIDATION shape
    for status, spec in errors.items():
        if str(status) not in answers:
            answers[str(status)] = {
                "description": spec["description"],
                "content": {JSON_ERRORS: {"schema": {"$ref": _REF.format(model="ErrorOut")}}},
            }
