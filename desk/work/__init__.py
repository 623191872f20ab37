"""The task kinds as people start and follow them: exports, reminders, and the generic start/cancel/retry of a task."""

# Registers the SLA timers' replan with desk.helpdesk.tickets (created, status/priority changed)
# and the team's replan with desk.helpdesk.sla_store (a policy saved or cleared), so every
# process that works tickets plans their clocks (docs/architecture.md, "Business hours").
from desk.work import sla_replans, sla_timers  # noqa: F401
