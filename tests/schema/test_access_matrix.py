"""Who may do what through GraphQL: every query and mutation, as admin, staff, customer, a member
of the other team, and nobody. Forbidden answers look exactly like missing ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.schema.scene import ROLES, Scene, make_scene, outcome

Vars = Callable[[Scene], dict[str, Any]]


def case(
    query: str, field: str, variables: Vars | None, expect: dict[str, Any]
) -> tuple[str, str, Vars | None, dict[str, Any]]:
    # Anonymous callers are refused everywhere, with the same code.
    return query, field, variables, {"anonymous": "UNAUTHENTICATED", **expect}


def every(value: Any) -> dict[str, Any]:
    return {r: value for r in ROLES if r != "anonymous"}


TEAM_Q = "query($id: ID!) { team(id: $id) { id name myRole } }"
TICKET_Q = "query($id: ID!) { ticket(id: $id) { id title } }"
TASK_Q = "query($id: ID!) { task(id: $id) { id status } }"
TASK_RESULT = "__typename ... on Task { id status }"

QUERIES = {
    # Mailboxes are their team's admins' alone; anyone else finds none, as in a team with none.
    "mailboxes": case(
        "query($t: ID!) { mailboxes(teamId: $t) { id } }",
        "mailboxes",
        lambda s: {"t": s.w.team},
        every("n=0"),
    ),
    # Staff read the team's SLA policy, admins too; customers and outsiders find no team.
    "slaPolicy": case(
        "query($t: ID!) { slaPolicy(teamId: $t) { __typename } }",
        "slaPolicy",
        lambda s: {"t": s.w.team},
        {
            "admin": "NoSlaPolicy",
            "staff": "NoSlaPolicy",
            "customer": "NotFound",
            "outsider": "NotFound",
        },
    ),
    # Staff read the team's time rules and runs, admins too; customers and outsiders find no team.
    "timeRules": case(
        "query($t: ID!) { timeRules(teamId: $t) { __typename } }",
        "timeRules",
        lambda s: {"t": s.w.team},
        {
            "admin": "TimeRules",
            "staff": "TimeRules",
            "customer": "NotFound",
            "outsider": "NotFound",
        },
    ),
    "me": case("{ me { id memberships { role } } }", "me", None, every("ok")),
    "team": case(
        TEAM_Q,
        "team",
        lambda s: {"id": s.w.team},
        {"admin": "ok", "staff": "ok", "customer": "ok", "outsider": "null"},
    ),
    "team of the other team": case(
        TEAM_Q,
        "team",
        lambda s: {"id": s.w.other_team},
        {"admin": "null", "staff": "null", "customer": "null", "outsider": "ok"},
    ),
    "tickets": case(
        "query($t: ID!) { tickets(teamId: $t) { edges { node { id } } totalCount } }",
        "tickets",
        lambda s: {"t": s.w.team},
        # customers see the tickets they created (login, resolved, formula), nothing else
        {"admin": "n=4", "staff": "n=4", "customer": "n=3", "outsider": "n=0"},
    ),
    "ticket created by the customer": case(
        TICKET_Q,
        "ticket",
        lambda s: {"id": s.w.tickets["login"]},
        {"admin": "ok", "staff": "ok", "customer": "ok", "outsider": "null"},
    ),
    "ticket created by another customer": case(
        TICKET_Q,
        "ticket",
        lambda s: {"id": s.w.tickets["printer"]},
        {"admin": "ok", "staff": "ok", "customer": "null", "outsider": "null"},
    ),
    "ticket of the other team": case(
        TICKET_Q,
        "ticket",
        lambda s: {"id": s.w.tickets["globex"]},
        {"admin": "null", "staff": "null", "customer": "null", "outsider": "ok"},
    ),
    "staff member's export": case(
        TASK_Q,
        "task",
        lambda s: {"id": s.staff_export},
        # exports are their owner's alone, even for the team's admin
        {"admin": "null", "staff": "ok", "customer": "null", "outsider": "null"},
    ),
    "customer's export": case(
        TASK_Q,
        "task",
        lambda s: {"id": s.customer_export},
        {"admin": "null", "staff": "null", "customer": "ok", "outsider": "null"},
    ),
    "reminder": case(
        TASK_Q,
        "task",
        lambda s: {"id": s.reminder},
        # a customer never sees a reminder
        {"admin": "ok", "staff": "ok", "customer": "null", "outsider": "null"},
    ),
    "tasks": case(
        "query($t: ID!) { tasks(teamId: $t) { edges { node { id kind } } } }",
        "tasks",
        lambda s: {"t": s.w.team},
        # admin: the reminder; staff: the reminder and two own exports; customer: own export
        {"admin": "n=1", "staff": "n=3", "customer": "n=1", "outsider": "n=0"},
    ),
    "notifications": case(
        "{ notifications { edges { node { id text } } } }", "notifications", None, every("n=1")
    ),
    "unreadNotificationCount": case(
        "{ unreadNotificationCount }", "unreadNotificationCount", None, every(1)
    ),
    "health": case("{ health { ok redisOk workers } }", "health", None, every("ok")),
    # everyone reads only their own preferences: there is no argument naming someone else
    "notificationPreferences": case(
        "{ notificationPreferences { exportReadyEmail reminderEmail } }",
        "notificationPreferences",
        None,
        every("ok"),
    ),
    "invitations": case(
        "query($t: ID!) { invitations(teamId: $t) { id } }",
        "invitations",
        lambda s: {"t": s.w.team},
        {"admin": "n=1", "staff": "n=0", "customer": "n=0", "outsider": "n=0"},
    ),
    "apiTokens": case(
        "{ apiTokens { id prefix } }",
        "apiTokens",
        None,
        {"admin": "n=0", "staff": "n=1", "customer": "n=0", "outsider": "n=0"},
    ),
    "schedules": case(
        "query($t: ID!) { schedules(teamId: $t) { id state nextRunAt lastTask { id } } }",
        "schedules",
        lambda s: {"t": s.w.team},
        # the staff member's own; the team's admin sees every schedule of the team
        {"admin": "n=1", "staff": "n=1", "customer": "n=0", "outsider": "n=0"},
    ),
}

SCHEDULE_RESULT = "__typename ... on ExportSchedule { id state }"

MUTATIONS = {
    # Only the team's admins manage mailboxes; anyone else is answered as by a missing team.
    "createMailbox": case(
        "mutation($t: ID!, $i: MailboxInput!) { createMailbox(teamId: $t, input: $i) { __typename } }",
        "createMailbox",
        lambda s: {
            "t": s.w.team,
            "i": {
                "host": "127.0.0.1",
                "port": 1,
                "useTls": False,
                "username": "u",
                "password": "matrix-secret",
            },
        },
        {"admin": "Mailbox", "staff": "NotFound", "customer": "NotFound", "outsider": "NotFound"},
    ),
    "updateMailbox of no mailbox": case(
        'mutation($t: ID!) { updateMailbox(teamId: $t, id: "987654", input: {port: 993}) '
        "{ __typename } }",
        "updateMailbox",
        lambda s: {"t": s.w.team},
        every("NotFound"),
    ),
    "deleteMailbox of no mailbox": case(
        'mutation($t: ID!) { deleteMailbox(teamId: $t, id: "987654") { __typename } }',
        "deleteMailbox",
        lambda s: {"t": s.w.team},
        every("NotFound"),
    ),
    "testMailbox": case(
        "mutation($t: ID!, $i: MailboxInput!) { testMailbox(teamId: $t, input: $i) { __typename } }",
        "testMailbox",
        lambda s: {
            "t": s.w.team,
            "i": {
                "host": "127.0.0.1",
                "port": 1,
                "useTls": False,
                "username": "u",
                "password": "matrix-secret",
            },
        },
        {
            "admin": "MailboxTest",
            "staff": "NotFound",
            "customer": "NotFound",
            "outsider": "NotFound",
        },
    ),
    # Admins set and clear the SLA policy; staff may read it only.
    "setSlaPolicy": case(
        "mutation($t: ID!, $i: SlaPolicyInput!) { setSlaPolicy(teamId: $t, input: $i) { __typename } }",
        "setSlaPolicy",
        lambda s: {
            "t": s.w.team,
            "i": {
                "zone": "Europe/Berlin",
                "hours": [{"day": "MON", "spans": ["09:00-17:00"]}],
                "targets": [{"target": "FIRST_RESPONSE", "priority": "URGENT", "minutes": 60}],
            },
        },
        {
            "admin": "SlaPolicy",
            "staff": "NotAllowed",
            "customer": "NotFound",
            "outsider": "NotFound",
        },
    ),
    "clearSlaPolicy": case(
        "mutation($t: ID!) { clearSlaPolicy(teamId: $t) { __typename } }",
        "clearSlaPolicy",
        lambda s: {"t": s.w.team},
        {
            "admin": "SlaPolicyCleared",
            "staff": "NotAllowed",
            "customer": "NotFound",
            "outsider": "NotFound",
        },
    ),
    # Admins set and clear the time rules; staff may read them only.
    "setTimeRules": case(
        "mutation($t: ID!, $i: TimeRulesInput!) { setTimeRules(teamId: $t, input: $i) "
        "{ __typename } }",
        "setTimeRules",
        lambda s: {"t": s.w.team, "i": {"closeResolvedAfter": 7}},
        {
            "admin": "TimeRules",
            "staff": "NotAllowed",
            "customer": "NotFound",
            "outsider": "NotFound",
        },
    ),
    "clearTimeRules": case(
        "mutation($t: ID!) { clearTimeRules(teamId: $t) { __typename } }",
        "clearTimeRules",
        lambda s: {"t": s.w.team},
        {
            "admin": "TimeRules",
            "staff": "NotAllowed",
            "customer": "NotFound",
            "outsider": "NotFound",
        },
    ),
    "startImport": case(
        "mutation($t: ID!, $u: ID!) { startImport(teamId: $t, uploadId: $u, mode: CREATE) "
        f"{{ {TASK_RESULT} }} }}",
        "startImport",
        lambda s: {"t": s.w.team, "u": s.admin_upload},
        {"admin": "Task", "staff": "NotAllowed", "customer": "NotAllowed", "outsider": "NotFound"},
    ),
    "createExport": case(
        f'mutation($t: ID!) {{ createExport(teamId: $t, filter: {{q: "matrix"}}) {{ {TASK_RESULT} }} }}',
        "createExport",
        lambda s: {"t": s.w.team},
        {"admin": "Task", "staff": "Task", "customer": "Task", "outsider": "NotFound"},
    ),
    "createExport in the other team": case(
        f"mutation($t: ID!) {{ createExport(teamId: $t) {{ {TASK_RESULT} }} }}",
        "createExport",
        lambda s: {"t": s.w.other_team},
        {"admin": "NotFound", "staff": "NotFound", "customer": "NotFound", "outsider": "Task"},
    ),
    "scheduleReminder on the customer's ticket": case(
        f"mutation($id: ID!) {{ scheduleReminder(ticketId: $id, inMinutes: 30) {{ {TASK_RESULT} }} }}",
        "scheduleReminder",
        lambda s: {"id": s.w.tickets["login"]},
        # the customer can see their ticket, but reminders are staff work
        {"admin": "Task", "staff": "Task", "customer": "NotAllowed", "outsider": "NotFound"},
    ),
    "scheduleReminder on another customer's ticket": case(
        f"mutation($id: ID!) {{ scheduleReminder(ticketId: $id, inMinutes: 30) {{ {TASK_RESULT} }} }}",
        "scheduleReminder",
        lambda s: {"id": s.w.tickets["printer"]},
        {"admin": "Task", "staff": "Task", "customer": "NotFound", "outsider": "NotFound"},
    ),
    "cancelReminder": case(
        "mutation($id: ID!) { cancelReminder(ticketId: $id) { __typename } }",
        "cancelReminder",
        lambda s: {"id": s.w.tickets["login"]},
        {
            "admin": "ReminderCancelled",
            "staff": "ReminderCancelled",
            "customer": "NotAllowed",
            "outsider": "NotFound",
        },
    ),
    "cancelTask of the staff member's export": case(
        f"mutation($id: ID!) {{ cancelTask(id: $id) {{ {TASK_RESULT} }} }}",
        "cancelTask",
        lambda s: {"id": s.staff_export},
        {"admin": "NotFound", "staff": "Task", "customer": "NotFound", "outsider": "NotFound"},
    ),
    "cancelTask of a reminder": case(
        f"mutation($id: ID!) {{ cancelTask(id: $id) {{ {TASK_RESULT} }} }}",
        "cancelTask",
        lambda s: {"id": s.reminder},
        {"admin": "Task", "staff": "Task", "customer": "NotFound", "outsider": "NotFound"},
    ),
    "retryTask": case(
        f"mutation($id: ID!) {{ retryTask(id: $id) {{ {TASK_RESULT} }} }}",
        "retryTask",
        lambda s: {"id": s.failed_export},
        {"admin": "NotFound", "staff": "Task", "customer": "NotFound", "outsider": "NotFound"},
    ),
    "createTicket": case(
        'mutation($t: ID!) { createTicket(teamId: $t, title: "Help") { __typename } }',
        "createTicket",
        lambda s: {"t": s.w.team},
        {"admin": "Ticket", "staff": "Ticket", "customer": "Ticket", "outsider": "NotFound"},
    ),
    "updateTicket of the customer's ticket": case(
        "mutation($id: ID!) { updateTicket(id: $id, priority: HIGH) { __typename } }",
        "updateTicket",
        lambda s: {"id": s.w.tickets["login"]},
        {"admin": "Ticket", "staff": "Ticket", "customer": "NotAllowed", "outsider": "NotFound"},
    ),
    "updateTicket of another customer's ticket": case(
        "mutation($id: ID!) { updateTicket(id: $id, status: RESOLVED) { __typename } }",
        "updateTicket",
        lambda s: {"id": s.w.tickets["printer"]},
        {"admin": "Ticket", "staff": "Ticket", "customer": "NotFound", "outsider": "NotFound"},
    ),
    "markNotificationsRead": case(
        "mutation { markNotificationsRead(all: true) { __typename } }",
        "markNotificationsRead",
        None,
        every("NotificationsMarked"),
    ),
    "setNotificationPreferences": case(
        "mutation { setNotificationPreferences(reminderEmail: true) { __typename } }",
        "setNotificationPreferences",
        None,
        every("NotificationPreferences"),
    ),
    "createApiToken": case(
        'mutation { createApiToken(name: "ci") { __typename } }',
        "createApiToken",
        None,
        every("NewApiToken"),
    ),
    "scheduleExport": case(
        'mutation($t: ID!) { scheduleExport(teamId: $t, days: [1, 5], time: "08:00", '
        f'timezone: "Europe/Berlin") {{ {SCHEDULE_RESULT} }} }}',
        "scheduleExport",
        lambda s: {"t": s.w.team},
        # staff work: a customer may export their own tickets, but not schedule it
        {
            "admin": "ExportSchedule",
            "staff": "ExportSchedule",
            "customer": "NotAllowed",
            "outsider": "NotFound",
        },
    ),
    "pauseSchedule of the staff member's schedule": case(
        f"mutation($id: ID!) {{ pauseSchedule(id: $id) {{ {SCHEDULE_RESULT} }} }}",
        "pauseSchedule",
        lambda s: {"id": s.staff_schedule},
        {
            "admin": "ExportSchedule",
            "staff": "ExportSchedule",
            "customer": "NotFound",
            "outsider": "NotFound",
        },
    ),
    "resumeSchedule of the staff member's schedule": case(
        f"mutation($id: ID!) {{ resumeSchedule(id: $id) {{ {SCHEDULE_RESULT} }} }}",
        "resumeSchedule",
        lambda s: {"id": s.staff_schedule},
        {
            "admin": "ExportSchedule",
            "staff": "ExportSchedule",
            "customer": "NotFound",
            "outsider": "NotFound",
        },
    ),
    "deleteSchedule of the staff member's schedule": case(
        "mutation($id: ID!) { deleteSchedule(id: $id) { __typename } }",
        "deleteSchedule",
        lambda s: {"id": s.staff_schedule},
        {
            "admin": "ScheduleDeleted",
            "staff": "ScheduleDeleted",
            "customer": "NotFound",
            "outsider": "NotFound",
        },
    ),
    "revokeApiToken": case(
        "mutation($id: ID!) { revokeApiToken(id: $id) { __typename } }",
        "revokeApiToken",
        lambda s: {"id": s.staff_token_id},
        {"admin": "NotFound", "staff": "ApiToken", "customer": "NotFound", "outsider": "NotFound"},
    ),
    "inviteMember": case(
        'mutation($t: ID!) { inviteMember(teamId: $t, email: "m2@acme.test", role: STAFF) '
        "{ __typename } }",
        "inviteMember",
        lambda s: {"t": s.w.team},
        {
            "admin": "Invitation",
            "staff": "NotAllowed",
            "customer": "NotAllowed",
            "outsider": "NotFound",
        },
    ),
    "revokeInvitation": case(
        "mutation($id: ID!) { revokeInvitation(id: $id) { __typename } }",
        "revokeInvitation",
        lambda s: {"id": s.ids["invitation"]},
        {
            "admin": "Invitation",
            "staff": "NotAllowed",
            "customer": "NotAllowed",
            "outsider": "NotFound",
        },
    ),
    "changeMemberRole": case(
        "mutation($t: ID!, $u: ID!) { changeMemberRole(teamId: $t, userId: $u, role: STAFF) "
        "{ __typename } }",
        "changeMemberRole",
        lambda s: {"t": s.w.team, "u": s.w.customer2},
        {
            "admin": "Member",
            "staff": "NotAllowed",
            "customer": "NotAllowed",
            "outsider": "NotFound",
        },
    ),
    "removeMember": case(
        "mutation($t: ID!, $u: ID!) { removeMember(teamId: $t, userId: $u) { __typename } }",
        "removeMember",
        lambda s: {"t": s.w.team, "u": s.w.customer2},
        {
            "admin": "Member",
            "staff": "NotAllowed",
            "customer": "NotAllowed",
            "outsider": "NotFound",
        },
    ),
    # The link (or the address) is the credential: no caller needed, the anonymous included.
    "acceptInvitation": (
        'mutation($k: String!) { acceptInvitation(token: $k, displayName: "M", '
        'password: "matrix password") { __typename } }',
        "acceptInvitation",
        lambda s: {"k": s.ids["invitation_token"]},
        {r: "InvitationAccepted" for r in ROLES},
    ),
    "requestPasswordReset": (
        'mutation { requestPasswordReset(email: "chen@acme.test") { __typename } }',
        "requestPasswordReset",
        None,
        {r: "PasswordResetRequested" for r in ROLES},
    ),
    "resetPassword with an unknown link": (
        'mutation { resetPassword(token: "no-such-token-no-such-token", password: "whatever1") '
        "{ __typename } }",
        "resetPassword",
        None,
        {r: "NotFound" for r in ROLES},
    ),
}

CASES = [
    pytest.param(name, spec, role, id=f"{name}-{role}")
    for table in (QUERIES, MUTATIONS)
    for name, spec in table.items()
    for role in ROLES
]


@pytest.mark.parametrize(("name", "spec", "role"), CASES)
async def test_access(api, rt, world, name, spec, role) -> None:
    query, field, variables, expect = spec
    scene = await make_scene(rt, world)
    body = await api(query, variables(scene) if variables else None, user=scene.user(role))
    assert outcome(body, field) == expect[role], body


def test_every_operation_is_in_the_matrix() -> None:
    from schema.root import build_schema

    schema = build_schema()
    query_fields = {f.name for f in schema.get_type_by_name("Query").fields}
    mutation_fields = {f.name for f in schema.get_type_by_name("Mutation").fields}
    from tests.schema.test_conversation_access import CASES as CONVERSATION

    # the conversation's operations have their own matrix (six roles: two customers)
    tables = (QUERIES, MUTATIONS, CONVERSATION)
    covered = {spec[1] for table in tables for spec in table.values()}
    # python names: compare in GraphQL's camelCase
    from strawberry.utils.str_converters import to_camel_case

    assert {to_camel_case(n) for n in query_fields | mutation_fields} <= covered
