"""The SQL of a team's time rules on the ledger (desk/work/rule_runs.py, docs/architecture.md,
"Business hours"): the rules, the run's task, the batch of tickets due, the next due instant, the
claim of one act, and the runs with what they touched. psycopg placeholders (`%(name)s`), run
through desk.ledger.sql on whatever connection the caller holds.

The due tests mirror desk/helpdesk/time_rules.py `next_action`: a ticket's status is since
`coalesce(status_since, created_at)`, and it was "reminded" when a 'remind' row exists at its
current revision (a reminder's row carries the revision its own message left). Each branch
filters `team_id = … AND status = …`, the leading columns of `ticket_team_status_priority_created`,
so a run reads the team's RESOLVED and PENDING tickets only, never the whole ticket table."""

from __future__ import annotations

KIND = "TIME_RULE"
ACTIVE = "status IN ('WAITING', 'RUNNING')"

RULES = (
    "SELECT team_id, close_resolved_after, remind_pending_after, resolve_pending_after, "
    " updated_by_id, updated_at FROM team_time_rules WHERE team_id = %(team)s"
)
SAVE = (
    "INSERT INTO team_time_rules (team_id, close_resolved_after, remind_pending_after, "
    " resolve_pending_after, updated_by_id, updated_at) "
    "VALUES (%(team)s, %(close)s, %(remind)s, %(resolve)s, %(by)s, %(now)s) "
    "ON CONFLICT (team_id) DO UPDATE SET close_resolved_after = EXCLUDED.close_resolved_after, "
    " remind_pending_after = EXCLUDED.remind_pending_after, "
    " resolve_pending_after = EXCLUDED.resolve_pending_after, "
    " updated_by_id = EXCLUDED.updated_by_id, updated_at = EXCLUDED.updated_at "
    "RETURNING team_id, close_resolved_after, remind_pending_after, resolve_pending_after, "
    " updated_by_id, updated_at"
)

# The run's owner: the admin who saved the rules while they are still an admin, else the
# team's first admin; no row when the team has no admin (no run is made for it).
_OWNER = (
    "(SELECT m.user_id FROM membership m WHERE m.team_id = r.team_id AND m.role = 'ADMIN' "
    " ORDER BY m.user_id = r.updated_by_id DESC, m.user_id LIMIT 1)"
)
_ON = "r.close_resolved_after IS NOT NULL OR r.remind_pending_after IS NOT NULL"
_INSERT_RUN = (
    "INSERT INTO background_task (kind, team_id, owner_id, scope_key, filters, run_at, "
    " max_attempts, sends, created_at, updated_at) "
)
_CONFLICT = (
    "ON CONFLICT (kind, team_id, scope_key) WHERE status IN ('WAITING', 'RUNNING') DO NOTHING "
)
# One run of the team's rules at `run_at`, unless one is active (the scope index decides).
QUEUE = (
    _INSERT_RUN
    + f"SELECT 'TIME_RULE', r.team_id, {_OWNER}, 'time-rules:' || r.team_id, '{{}}'::jsonb, "
    " %(run_at)s, 5, 0, %(now)s, %(now)s FROM team_time_rules r "
    f"WHERE r.team_id = %(team)s AND ({_ON}) AND {_OWNER} IS NOT NULL " + _CONFLICT + "RETURNING *"
)
# A run waiting for a later instant is brought forward to now (saved rules act at once); a
# sent-ahead message of it is stale once the run has been claimed.
EARLIER = (
    "UPDATE background_task SET run_at = %(now)s, dispatched_at = NULL, updated_at = %(now)s "
    "WHERE kind = 'TIME_RULE' AND team_id = %(team)s AND scope_key = 'time-rules:' || %(team)s "
    " AND status = 'WAITING' AND run_at > %(now)s RETURNING *"
)
# The scheduler's pass: every team with a rule on and an admin, and no active run, gets one
# due now (a run that failed for good ended its chain; this restarts it).
ENSURE = (
    _INSERT_RUN
    + f"SELECT 'TIME_RULE', r.team_id, {_OWNER}, 'time-rules:' || r.team_id, '{{}}'::jsonb, "
    " %(now)s, 5, 0, %(now)s, %(now)s FROM team_time_rules r "
    f"WHERE ({_ON}) AND {_OWNER} IS NOT NULL AND NOT EXISTS (SELECT 1 FROM background_task t "
    " WHERE t.kind = 'TIME_RULE' AND t.team_id = r.team_id "
    f" AND t.scope_key = 'time-rules:' || r.team_id AND t.{ACTIVE}) " + _CONFLICT + "RETURNING id"
)

_SINCE = "coalesce(t.status_since, t.created_at)"
_REMINDED = (
    "(SELECT a.acted_at FROM ticket_rule_action a WHERE a.ticket_id = t.id AND a.rule = 'remind' "
    " AND a.revision = t.revision)"
)
# Each ticket's next act and when (NULL: none), one branch per rule as `next_action` has them.
_PLANS = f"""
SELECT t.id, 'close' AS rule, t.revision,
       {_SINCE} + make_interval(days => r.close_resolved_after) AS due
  FROM ticket t, r WHERE t.team_id = r.team_id AND t.status = 'RESOLVED'
   AND r.close_resolved_after IS NOT NULL AND t.id > %(after)s
UNION ALL
SELECT t.id, CASE WHEN x.reminded IS NULL THEN 'remind' ELSE 'resolve' END, t.revision,
       CASE WHEN x.reminded IS NULL THEN {_SINCE} + make_interval(days => r.remind_pending_after)
            ELSE x.reminded + make_interval(days => r.resolve_pending_after) END
  FROM ticket t CROSS JOIN r CROSS JOIN LATERAL (SELECT {_REMINDED} AS reminded) x
 WHERE t.team_id = r.team_id AND t.status = 'PENDING' AND r.remind_pending_after IS NOT NULL
   AND (x.reminded IS NULL OR r.resolve_pending_after IS NOT NULL) AND t.id > %(after)s
"""
_R = (
    "WITH r AS (SELECT team_id, close_resolved_after, remind_pending_after, "
    " resolve_pending_after FROM team_time_rules WHERE team_id = %(team)s) "
)
# The next batch of tickets due by `now`, in id order after `after` (a run goes through its
# tickets once, so a ticket it cannot act on never holds it up).
DUE = _R + f"SELECT * FROM ({_PLANS}) p WHERE p.due <= %(now)s ORDER BY p.id LIMIT %(limit)s"
# The team's next due instant after `now` (when its next run should start).
NEXT_DUE = _R + f"SELECT min(p.due) AS due FROM ({_PLANS}) p WHERE p.due > %(now)s"

# The ticket locked for one act, with what `time_rules.Ticket` needs.
LOCK = (
    f"SELECT t.id, t.team_id, t.status, {_SINCE} AS status_since, t.revision, "
    f" {_REMINDED} AS reminded_at FROM ticket t WHERE t.id = %(ticket)s FOR UPDATE OF t"
)
# The act's claim: one row per ticket, rule and revision (ticket_rule_action_once).
CLAIM = (
    "INSERT INTO ticket_rule_action (team_id, ticket_id, rule, revision, task_id, acted_at) "
    "VALUES (%(team)s, %(ticket)s, %(rule)s, %(revision)s, %(task)s, %(now)s) "
    "ON CONFLICT ON CONSTRAINT ticket_rule_action_once DO NOTHING RETURNING id"
)

# The team's latest runs, newest first, and the tickets each touched.
RUNS = (
    "SELECT id, status, run_at, started_at, finished_at, result_summary, last_error "
    "FROM background_task WHERE team_id = %(team)s AND kind = 'TIME_RULE' "
    "ORDER BY id DESC LIMIT %(limit)s"
)
TOUCHED = (
    "SELECT a.task_id, a.ticket_id, t.title, a.rule, a.acted_at FROM ticket_rule_action a "
    "JOIN ticket t ON t.id = a.ticket_id WHERE a.task_id = ANY(%(tasks)s) "
    "ORDER BY a.task_id, a.acted_at, a.id"
)
