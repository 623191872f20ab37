"""error keys: a task's last error as a message key with its parameters, beside its English text

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02 21:00:00

As `summary_key`/`summary_params` are to `result_summary` (0006): `last_error` stays the stable
English sentence, and an error the desk words itself (an export over the row limit) also keeps
its key and figures, so each reader sees it in their language with their number format, and the
console's failure groups can title it. Rows written before this keep a NULL key and are shown as
their English, as before.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "background_task",
        sa.Column("error_key", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True),
    )
    op.add_column(
        "background_task",
        sa.Column(
            "error_params",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default="{}",
            nullable=False,
        ),
    )


def downgrade() -> None:
    op.drop_column("background_task", "error_params")
    op.drop_column("background_task", "error_key")
