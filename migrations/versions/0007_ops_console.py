"""operators' console: site operators, the audit trail, and the task event log (with its trigger)

Revision ID: 0007
Revises: 0002
Create Date: 2026-11-30 13:30:00

The task event log is written by a trigger on background_task, so every ledger statement (and
any branch's new one) tells the story without remembering to: acceptance, each send, each claim
(with the worker id the worker's connections carry in `taskdesk.worker_id`), progress in tenths,
each error with its attempt, rescue, retry, cancel and the finish.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa
import sqlmodel
from sqlalchemy.dialects import postgresql

# revision identifiers, used by Alembic.
revision: str = "0007"
down_revision: Union[str, Sequence[str], None] = "0006"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

TRIGGER_FUNCTION = r"""
CREATE OR REPLACE FUNCTION taskdesk_task_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  me text := nullif(current_setting('taskdesk.worker_id', true), '');
  ev text;
  at_ timestamptz := NEW.updated_at;
  eid text := NEW.execution_id;
  wid text := me;
  det text := '';
  att int := NEW.attempts;
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO task_event (task_id, at, event, run, attempt, execution_id, worker_id, detail)
    VALUES (NEW.id, NEW.created_at, 'accepted', NEW.run, NEW.attempts, NULL, NULL,
            to_char(NEW.run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'));
    IF NEW.dispatched_at IS NOT NULL THEN  -- accepted and handed to the queue at once
      INSERT INTO task_event (task_id, at, event, run, attempt, worker_id)
      VALUES (NEW.id, NEW.dispatched_at, 'sent', NEW.run, NEW.attempts, me);
    END IF;
    RETURN NEW;
  END IF;
  IF NEW.status IS DISTINCT FROM OLD.status OR NEW.run <> OLD.run THEN
    IF OLD.status = 'WAITING' AND NEW.status = 'RUNNING' THEN
      ev := 'claimed';
    ELSIF NEW.status = 'COMPLETED' THEN
      ev := CASE WHEN NEW.result_skipped THEN 'skipped' ELSE 'completed' END;
      det := coalesce(NEW.result_summary, '');
    ELSIF NEW.status = 'CANCELLED' THEN
      ev := 'cancelled';
    ELSIF NEW.status = 'FAILED' THEN
      ev := 'failed';
      det := coalesce(NEW.last_error, '');
    ELSIF OLD.status = 'FAILED' THEN
      ev := 'retried';
      eid := NULL;  -- the next claim brings a new one
    ELSIF OLD.status = 'RUNNING' AND NEW.attempts < OLD.attempts THEN
      ev := 'released';
    ELSIF OLD.status = 'RUNNING' AND (
        NEW.last_error LIKE 'The worker running this task stopped responding%'
        OR NEW.last_error LIKE 'Database unreachable: the worker running this task could not renew%'
    ) THEN  -- the rescuer's words (desk/ledger/accept.py rescue)
      ev := 'rescued';
      det := NEW.last_error;
    ELSIF OLD.status = 'RUNNING' THEN
      ev := 'error';
      det := coalesce(NEW.last_error, '');
    ELSE
      ev := 'rearmed';
      eid := NULL;
    END IF;
    IF OLD.status = 'RUNNING' THEN
      -- What happened to an execution is told under the worker that ran it (a rescue is
      -- performed by another worker, but the story is about the one that vanished).
      eid := OLD.execution_id;
      att := OLD.attempts;
      SELECT e.worker_id INTO wid FROM task_event e
        WHERE e.task_id = NEW.id AND e.event = 'claimed' AND e.execution_id = OLD.execution_id
        ORDER BY e.id DESC LIMIT 1;
    END IF;
  ELSIF NEW.cancel_requested AND NOT OLD.cancel_requested THEN
    ev := 'cancel_requested';
  ELSIF NEW.dispatched_at IS NOT NULL AND NEW.dispatched_at IS DISTINCT FROM OLD.dispatched_at THEN
    ev := 'sent';
    at_ := NEW.dispatched_at;
    eid := NULL;
  ELSIF NEW.status = 'RUNNING' AND floor(NEW.progress * 10) > floor(OLD.progress * 10) THEN
    ev := 'progress';
    det := round(NEW.progress * 100)::text || '%' ||
           CASE WHEN NEW.progress_message <> '' THEN ' ' || NEW.progress_message ELSE '' END;
  ELSE
    RETURN NEW;
  END IF;
  INSERT INTO task_event (task_id, at, event, run, attempt, execution_id, worker_id, detail)
  VALUES (NEW.id, coalesce(at_, now()), ev, NEW.run, att, eid, wid, left(det, 2000));
  IF ev <> 'sent' AND NEW.status = 'WAITING' AND NEW.dispatched_at IS NOT NULL
     AND NEW.dispatched_at IS DISTINCT FROM OLD.dispatched_at THEN  -- a retry sent at once
    INSERT INTO task_event (task_id, at, event, run, attempt, worker_id)
    VALUES (NEW.id, NEW.dispatched_at, 'sent', NEW.run, NEW.attempts, me);
  END IF;
  RETURN NEW;
END
$$;
"""

TRIGGERS = """
CREATE TRIGGER background_task_event_insert AFTER INSERT ON background_task
  FOR EACH ROW EXECUTE FUNCTION taskdesk_task_event();
CREATE TRIGGER background_task_event_update AFTER UPDATE ON background_task
  FOR EACH ROW WHEN (
    OLD.status IS DISTINCT FROM NEW.status OR OLD.run <> NEW.run
    OR OLD.cancel_requested <> NEW.cancel_requested
    OR NEW.dispatched_at IS DISTINCT FROM OLD.dispatched_at
    OR floor(OLD.progress * 10) <> floor(NEW.progress * 10)
  ) EXECUTE FUNCTION taskdesk_task_event();
"""


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table(
        "site_operator",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["app_user.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("user_id"),
    )
    op.create_table(
        "ops_audit",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor_id", sa.Integer(), nullable=True),
        sa.Column("actor", sqlmodel.sql.sqltypes.AutoString(length=320), nullable=False),
        sa.Column("action", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=True),
        sa.Column("task_ids", postgresql.ARRAY(sa.BigInteger()), server_default="{}", nullable=False),
        sa.Column("count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("detail", sqlmodel.sql.sqltypes.AutoString(), server_default="", nullable=False),
        sa.ForeignKeyConstraint(["actor_id"], ["app_user.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["team_id"], ["team.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ops_audit_team", "ops_audit", ["team_id", sa.text("id DESC")], unique=False)
    op.create_index("ops_audit_tasks", "ops_audit", ["task_ids"], unique=False, postgresql_using="gin")
    op.create_table(
        "task_event",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("event", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("run", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("execution_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column("worker_id", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
        sa.Column("detail", sqlmodel.sql.sqltypes.AutoString(), server_default="", nullable=False),
        sa.ForeignKeyConstraint(["task_id"], ["background_task.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("task_event_task", "task_event", ["task_id", "id"], unique=False)
    op.create_index("task_event_at", "task_event", ["at"], unique=False)
    op.create_index(
        "background_task_errors", "background_task", ["id"], unique=False,
        postgresql_where=sa.text("last_error IS NOT NULL"),
    )
    op.execute(TRIGGER_FUNCTION)
    op.execute(TRIGGERS)


def downgrade() -> None:
    """Downgrade schema."""
    op.execute("DROP TRIGGER IF EXISTS background_task_event_update ON background_task")
    op.execute("DROP TRIGGER IF EXISTS background_task_event_insert ON background_task")
    op.execute("DROP FUNCTION IF EXISTS taskdesk_task_event()")
    op.drop_index("background_task_errors", table_name="background_task")
    op.drop_index("task_event_at", table_name="task_event")
    op.drop_index("task_event_task", table_name="task_event")
    op.drop_table("task_event")
    op.drop_index("ops_audit_tasks", table_name="ops_audit")
    op.drop_index("ops_audit_team", table_name="ops_audit")
    op.drop_table("ops_audit")
    op.drop_table("site_operator")
