"""Logging: readable text by default, one JSON object per line with LOG_FORMAT=json.

Every line carries the ids of what it is about — `task_id`, `run`, `execution_id`, `kind`,
`team_id`, `request_id`, `worker_id` — taken from context variables, so a task's story can be
grepped across web and worker processes (`grep '"task_id": 42'`). Whoever knows an id binds it
once (`bind(task_id=…)`); everything logged later in the same asyncio task carries it. Each arq
job and each HTTP request runs in its own asyncio task (a copy of the context), so a binding
never leaks into a neighbour.
"""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from typing import Any

# The ids a line may carry, in the order they are written.
FIELDS = ("request_id", "worker_id", "task_id", "run", "execution_id", "kind", "team_id")

_context: ContextVar[dict[str, Any] | None] = ContextVar("taskdesk_log_context", default=None)
_process: dict[str, Any] = {}  # ids of the whole process (a worker's id)


def bind(**fields: Any) -> Token[dict[str, Any] | None]:
    """Add ids to the current context (a new dict: the caller's parent context is untouched)."""
    merged = dict(_context.get() or {})
    merged.update({k: v for k, v in fields.items() if v is not None})
    return _context.set(merged)


def reset(token: Token[dict[str, Any] | None]) -> None:
    _context.reset(token)


def bind_process(**fields: Any) -> None:
    """Ids every line of this process carries (a worker's `worker_id`)."""
    _process.update(fields)


def current() -> dict[str, Any]:
    """The ids bound here, the process's first."""
    return {**_process, **(_context.get() or {})}


class ContextFilter(logging.Filter):
    """Copies the bound ids onto each record (as attributes), for any formatter to use."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in current().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the ids, and any exception."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in FIELDS:
            value = getattr(record, key, None)
            if value is not None:
                out[key] = value
        event = getattr(record, "event", None)
        if event is not None:
            out["event"] = event
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """The dev default: a readable line, with the ids that apply appended as key=value."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ids = [f"{k}={getattr(record, k)}" for k in FIELDS if getattr(record, k, None) is not None]
        return f"{line} [{' '.join(ids)}]" if ids else line


def setup(log_format: str = "text", level: str = "INFO") -> None:
    """Route every logger (ours, uvicorn's, arq's) through one stderr handler."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # uvicorn and arq bring handlers of their own; let their records reach ours instead.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "arq", "arq.worker"):
        lg = logging.getLogger(name)
        lg.handlers.clear()
        lg.propagate = True
