"""sla timers: the SLA e-mail preference, and an index on each ticket's waiting SLA timers

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07 17:00:00

See docs/architecture.md, "Business hours". Expand only. `notification_preference.sla_email`
(default false): SLA warnings and breaches by e-mail besides the in-app notification. The
partial index `background_task_sla_waiting` on `ticket_id` holds only waiting SLA_TIMER rows:
every replan of a ticket ends its earlier timers through it (a ticket has at most six waiting),
whatever the database's collation, never through the team's whole scope index. Built
CONCURRENTLY (outside the migration's transaction): writes to the ledger go on meanwhile.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | Sequence[str] | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "background_task_sla_waiting"


def upgrade() -> None:
    op.add_column(
        "notification_preference",
        sa.Column("sla_email", sa.Boolean(), server_default=sa.false(), nullable=False),
    )
    with op.get_context().autocommit_block():
        op.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX} ON background_task (ticket_id) "
            "WHERE kind = 'SLA_TIMER' AND status = 'WAITING'"
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")
    op.drop_column("notification_preference", "sla_email")
