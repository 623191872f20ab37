"""change feed: every commit that changes a task, a notification, a session, a membership, a
person, a team or a lane announces it with NOTIFY on the channel `taskdesk_feed`

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02 13:30:00

See docs/architecture.md, "Change feed". Statement-level triggers with transition tables: one
notice per statement, however many rows it changed (a dispatcher's sweep, a reminder burst),
split only where a statement's rows pass PostgreSQL's 8,000-byte payload limit. A notice is a
hint of ids and versions, never business data: `t:` task rows (what a label is worked out from,
so a web process can tell an unchanged row without reading it), `d:` deleted task ids, `n:`
users whose notifications changed, `s:` users whose sessions ended, `m:` team.user pairs whose
membership changed, `u:` people whose account changed, `g:` teams renamed or removed, `l:` the
lanes' pauses. Items are `;`-separated, a task's fields `,`-separated. NOTIFY is delivered at
commit, in commit order, and a rolled-back statement announces nothing.

Sends (only `dispatched_at`/`sends` change) announce nothing: nothing a reader shows moved.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NOTIFY_FUNCTION = r"""
CREATE OR REPLACE FUNCTION taskdesk_feed_notify(prefix text, items text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  body text := '';
  item text;
BEGIN
  -- As few notices as fit: one for any ordinary statement.
  FOREACH item IN ARRAY coalesce(items, '{}') LOOP
    IF length(body) + length(item) > 7800 THEN
      PERFORM pg_notify('taskdesk_feed', prefix || body);
      body := '';
    END IF;
    body := CASE WHEN body = '' THEN item ELSE body || ';' || item END;
  END LOOP;
  IF body <> '' THEN
    PERFORM pg_notify('taskdesk_feed', prefix || body);
  END IF;
END
$$;
"""

# µs since the epoch, as the readers' versions count time (ui.polling).
_US = "coalesce((extract(epoch FROM {c}) * 1000000)::bigint::text, '')"
TASK_ROW = ", ".join(
    [
        "n.id::text",
        "n.team_id::text",
        "n.owner_id::text",
        "n.kind",
        "n.status",
        _US.format(c="n.updated_at"),
        _US.format(c="n.run_at"),
        _US.format(c="n.lease_until"),
        _US.format(c="n.expires_at"),
        "n.cancel_requested::int::text",
        "n.attempts::text",
        "n.result_skipped::int::text",
        "coalesce(n.result_bytes::text, '')",
        "CASE WHEN {created} THEN '1' ELSE '0' END",
    ]
)

TASK_FUNCTION = r"""
CREATE OR REPLACE FUNCTION taskdesk_feed_tasks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM taskdesk_feed_notify('d:', (SELECT array_agg(o.id::text ORDER BY o.id) FROM old_rows o));
  ELSIF TG_OP = 'INSERT' THEN
    PERFORM taskdesk_feed_notify('t:', (
      SELECT array_agg(concat_ws(',', {created_row}) ORDER BY n.id) FROM new_rows n));
  ELSE
    PERFORM taskdesk_feed_notify('t:', (
      SELECT array_agg(concat_ws(',', {updated_row}) ORDER BY n.id)
      FROM new_rows n JOIN old_rows o ON o.id = n.id
      WHERE n.updated_at IS DISTINCT FROM o.updated_at OR n.status IS DISTINCT FROM o.status
         OR n.run <> o.run OR n.cancel_requested <> o.cancel_requested
         OR n.result_bytes IS DISTINCT FROM o.result_bytes));
  END IF;
  RETURN NULL;
END
$$;
""".replace("{created_row}", TASK_ROW.format(created="true")).replace(
    "{updated_row}", TASK_ROW.format(created="false")
)

# One function per small table: the ids its notice names.
USERS_FUNCTION = r"""
CREATE OR REPLACE FUNCTION taskdesk_feed_{name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM taskdesk_feed_notify('{prefix}', (SELECT array_agg(DISTINCT {item}) FROM old_rows r));
  ELSE
    PERFORM taskdesk_feed_notify('{prefix}', (SELECT array_agg(DISTINCT {item}) FROM new_rows r));
  END IF;
  RETURN NULL;
END
$$;
"""
SMALL = {
    # name: (table, prefix, item, operations)
    "notifications": ("notification", "n:", "r.user_id::text", ("INSERT", "UPDATE", "DELETE")),
    "sessions": ("web_session", "s:", "r.user_id::text", ("UPDATE", "DELETE")),
    "members": ("membership", "m:", "r.team_id || '.' || r.user_id", ("INSERT", "UPDATE", "DELETE")),
    "people": ("app_user", "u:", "r.id::text", ("UPDATE", "DELETE")),
    "teams": ("team", "g:", "r.id::text", ("UPDATE", "DELETE")),
    "lanes": ("task_lane", "l:", "r.name", ("INSERT", "UPDATE", "DELETE")),
}


def _triggers(name: str, table: str, ops: Sequence[str]) -> list[str]:
    out = []
    for o in ops:
        ref = "OLD TABLE AS old_rows" if o == "DELETE" else "NEW TABLE AS new_rows"
        if o == "UPDATE":
            ref = "OLD TABLE AS old_rows NEW TABLE AS new_rows"
        out.append(
            f"CREATE TRIGGER {table}_feed_{o.lower()} AFTER {o} ON {table} "
            f"REFERENCING {ref} FOR EACH STATEMENT EXECUTE FUNCTION taskdesk_feed_{name}()"
        )
    return out


def upgrade() -> None:
    op.execute(NOTIFY_FUNCTION)
    op.execute(TASK_FUNCTION)
    for s in _triggers("tasks", "background_task", ("INSERT", "UPDATE", "DELETE")):
        op.execute(s)
    for name, (table, prefix, item, ops) in SMALL.items():
        op.execute(
            USERS_FUNCTION.replace("{name}", name)
            .replace("{prefix}", prefix)
            .replace("{item}", item)
        )
        for s in _triggers(name, table, ops):
            op.execute(s)


def downgrade() -> None:
    for o in ("insert", "update", "delete"):
        op.execute(f"DROP TRIGGER IF EXISTS background_task_feed_{o} ON background_task")
    for name, (table, _prefix, _item, ops) in SMALL.items():
        for o in ops:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_feed_{o.lower()} ON {table}")
        op.execute(f"DROP FUNCTION IF EXISTS taskdesk_feed_{name}()")
    op.execute("DROP FUNCTION IF EXISTS taskdesk_feed_tasks()")
    op.execute("DROP FUNCTION IF EXISTS taskdesk_feed_notify(text, text[])")
