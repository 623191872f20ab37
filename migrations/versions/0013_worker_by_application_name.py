"""the task event log learns a worker's id from its connection's application_name

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 20:30:00

A worker's connections are named `taskdesk-worker <id>` (desk/ledger/events.py). Before, the
id came in the session setting `taskdesk.worker_id`, sent as a startup option: a transaction
pooler such as PgBouncer refuses startup options and keeps no session state, while it hands the
`application_name` on to whichever server connection runs the transaction. The setting is still
read first, so workers of the previous release name themselves during a rolling deploy.

The two trigger functions are rewritten from their definitions in the database
(`pg_get_functiondef`), changing only the expression that names the worker.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WORKER_ID_FUNCTION = r"""
CREATE OR REPLACE FUNCTION taskdesk_worker_id() RETURNS text LANGUAGE sql STABLE AS $$
  SELECT coalesce(
    nullif(current_setting('taskdesk.worker_id', true), ''),
    substring(current_setting('application_name') from '^taskdesk-worker (.+)$'))
$$;
"""
BEFORE = "nullif(current_setting('taskdesk.worker_id', true), '')"
AFTER = "taskdesk_worker_id()"
FUNCTIONS = ("taskdesk_task_event", "taskdesk_task_sent")


def _rewrite(old: str, new: str) -> None:
    conn = op.get_bind()
    for name in FUNCTIONS:
        source = conn.execute(
            sa.text("SELECT pg_get_functiondef(CAST(:f AS regproc))"), {"f": name}
        ).scalar_one()
        if old not in source:
            raise RuntimeError(f"{name}() does not read the worker as migration 0013 expects")
        op.execute(source.replace(old, new))


def upgrade() -> None:
    op.execute(WORKER_ID_FUNCTION)
    _rewrite(BEFORE, AFTER)


def downgrade() -> None:
    _rewrite(AFTER, BEFORE)
    op.execute("DROP FUNCTION taskdesk_worker_id()")
