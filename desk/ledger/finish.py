"""How a finish ends (docs/architecture.md, "States"): COMPLETED with its result, or CANCELLED
when a cancel was recorded before it — after the execution's last progress write, where it
would otherwise have stopped. The choice is made by the finish statement itself, on the row it
has locked (desk.ledger.run.complete, desk.ledger.upkeep.complete_many), so a cancel committed
before the finish always wins and one committed after it finds the task ended.
"""

from __future__ import annotations

import json

from desk.core.messages import message
from desk.core.models import TaskKind

# What a finish that turned CANCELLED says instead of its result, by kind.
CANCELLED_AT_FINISH = {k.value: message(f"{k.value.lower()}.cancelled_at_finish") for k in TaskKind}
# The same as a statement parameter (`says` below reads it as jsonb, keyed by the row's kind).
CANCEL_SAYS = json.dumps(
    {k: {"key": m.key, "text": m.text} for k, m in CANCELLED_AT_FINISH.items()}
)


def finish_columns(result: dict[str, str], says: str) -> str:
    """The SET list of a finish's outcome: COMPLETED with `result` (column -> SQL expression),
    or CANCELLED with the kind's `CANCELLED_AT_FINISH` (`says`: `CANCEL_SAYS` as jsonb) and
    nothing kept: no file to download, no expiry, not skipped, progress where it stopped."""
    cancelled = {
        "status": "'CANCELLED'",
        "progress": "progress",
        "result_summary": f"({says} -> kind ->> 'text')",
        "summary_key": f"({says} -> kind ->> 'key')",
        "summary_params": "'{}'::jsonb",
        "result_skipped": "false",
        "expires_at": "CAST(NULL AS timestamptz)",
        "result_bytes": "CAST(NULL AS bigint)",
    }
    completed = {"status": "'COMPLETED'", "progress": "1", **result}
    return ", ".join(
        f"{c} = CASE WHEN cancel_requested THEN {v} ELSE {completed[c]} END"
        for c, v in cancelled.items()
    )
