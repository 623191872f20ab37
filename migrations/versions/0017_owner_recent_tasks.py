"""owner's recent tasks: an index for the accept's hourly quota count

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03 17:55:00

The accept counts the owner's tasks of one kind created in the last hour (the hourly quota,
docs/architecture.md "Ledger"). With no index on `created_at` that count read every task the
person had in the team, of every kind, whatever its age: 8 ms per accept at 30,000 (measured
3 Dec 2026), growing with their history until the retention cleaner prunes it. On
(team_id, owner_id, kind, created_at) it reads only the last hour's rows of that kind.

Built CONCURRENTLY (outside the migration's transaction): writes to the ledger go on meanwhile.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = "background_task_owner_kind_created"


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {NAME} "
            "ON background_task (team_id, owner_id, kind, created_at)"
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NAME}")
