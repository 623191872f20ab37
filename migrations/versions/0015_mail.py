"""e-mail as a task kind, and who wants which news by e-mail

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03 08:00:00

`EMAIL` joins the task kinds. An EMAIL task may have no team (a password reset) and no owner
(an invitation to an address with no account yet), so `team_id` and `owner_id` become nullable,
and the CHECK `team_owner_set` keeps them set for every other kind. `notification_preference`
holds each person's choices (no row: no e-mail).

The change feed's task trigger (0011) joins a row's fields with `concat_ws`, which skips a NULL:
it is rewritten from its definition in the database to write an absent team or owner as an
empty field (desk/core/feed.py reads it as 0, a team and person nobody is).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KINDS_BEFORE = "kind IN ('EXPORT', 'REMINDER', 'IMPORT', 'NOOP')"
KINDS_AFTER = "kind IN ('EXPORT', 'REMINDER', 'IMPORT', 'NOOP', 'EMAIL')"
TEAM_OWNER_SET = "kind = 'EMAIL' OR (team_id IS NOT NULL AND owner_id IS NOT NULL)"
FEED_FUNCTION = "taskdesk_feed_tasks"
FEED_NULLS = [
    ("n.team_id::text", "coalesce(n.team_id::text, '')"),
    ("n.owner_id::text", "coalesce(n.owner_id::text, '')"),
]


def _rewrite_feed(pairs: list[tuple[str, str]]) -> None:
    source = (
        op.get_bind()
        .execute(sa.text("SELECT pg_get_functiondef(CAST(:f AS regproc))"), {"f": FEED_FUNCTION})
        .scalar_one()
    )
    for old, new in pairs:
        if old not in source:
            raise RuntimeError(f"{FEED_FUNCTION}() does not write {old} as migration 0015 expects")
        source = source.replace(old, new)
    op.execute(source)


def upgrade() -> None:
    op.drop_constraint("kind_valid", "background_task", type_="check")
    op.create_check_constraint("kind_valid", "background_task", KINDS_AFTER)
    op.alter_column("background_task", "team_id", existing_type=sa.Integer(), nullable=True)
    op.alter_column("background_task", "owner_id", existing_type=sa.Integer(), nullable=True)
    op.create_check_constraint("team_owner_set", "background_task", TEAM_OWNER_SET)
    _rewrite_feed(FEED_NULLS)
    op.create_table(
        "notification_preference",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("export_ready_email", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("reminder_email", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(["user_id"], ["app_user.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("user_id"),
    )


def downgrade() -> None:
    op.drop_table("notification_preference")
    op.execute("DELETE FROM background_task WHERE kind = 'EMAIL'")
    _rewrite_feed([(new, old) for old, new in FEED_NULLS])
    op.drop_constraint("team_owner_set", "background_task", type_="check")
    op.alter_column("background_task", "owner_id", existing_type=sa.Integer(), nullable=False)
    op.alter_column("background_task", "team_id", existing_type=sa.Integer(), nullable=False)
    op.drop_constraint("kind_valid", "background_task", type_="check")
    op.create_check_constraint("kind_valid", "background_task", KINDS_BEFORE)
