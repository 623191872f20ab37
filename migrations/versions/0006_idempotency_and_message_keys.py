"""idempotency keys on tasks; message keys beside the English texts of summaries and notifications

Revision ID: 0006
Revises: 0002
Create Date: 2026-11-30 13:40:00

"""

from typing import Sequence, Union

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects import postgresql

# revision identifiers, used by Alembic.
revision: str = "0006"
down_revision: Union[str, Sequence[str], None] = "0004"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.add_column(
        "background_task",
        sa.Column("idempotency_key", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True),
    )
    op.add_column(
        "background_task",
        sa.Column(
            "request_fingerprint", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True
        ),
    )
    op.add_column(
        "background_task",
        sa.Column("summary_key", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True),
    )
    op.add_column(
        "background_task",
        sa.Column(
            "summary_params",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default="{}",
            nullable=False,
        ),
    )
    op.create_index(
        "background_task_owner_idempotency_key",
        "background_task",
        ["owner_id", "idempotency_key"],
        unique=True,
        postgresql_where=sa.text("idempotency_key IS NOT NULL"),
    )
    op.add_column(
        "notification",
        sa.Column("text_key", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True),
    )
    op.add_column(
        "notification",
        sa.Column(
            "text_params",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default="{}",
            nullable=False,
        ),
    )


def downgrade() -> None:
    op.drop_column("notification", "text_params")
    op.drop_column("notification", "text_key")
    op.drop_index(
        "background_task_owner_idempotency_key",
        table_name="background_task",
        postgresql_where=sa.text("idempotency_key IS NOT NULL"),
    )
    op.drop_column("background_task", "summary_params")
    op.drop_column("background_task", "summary_key")
    op.drop_column("background_task", "request_fingerprint")
    op.drop_column("background_task", "idempotency_key")
