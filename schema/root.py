"""The assembled schema: Query, Mutation and Subscription from the per-domain modules, and in
production no field suggestions. Queries and mutations run only through
`schema.executor.Runner`, which applies the guards of `schema.hardening` (Strawberry's
`schema.execute` would run without them) and refuses a schema with Strawberry extensions, which
it would not run; subscriptions run through Strawberry's `Schema.stream` behind the same guards
(`schema.streams`). `schema.graphql` at the repository root is `build_schema().as_str()` (the
same in every environment)."""

from __future__ import annotations

from functools import cache

import strawberry
from graphql import GraphQLError
from strawberry.schema.config import StrawberryConfig
from strawberry.types import ExecutionContext

from schema.conversation import ConversationMutation
from schema.errors import log_errors
from schema.imports import ImportMutation
from schema.mailboxes import MailboxMutation, MailboxQuery
from schema.notifications import NotificationMutation, NotificationQuery
from schema.people import PeopleMutation, PeopleQuery
from schema.preferences import PreferencesMutation, PreferencesQuery
from schema.schedules import ScheduleMutation, ScheduleQuery
from schema.sla import SlaMutation, SlaQuery
from schema.subscriptions import Subscription as TaskSubscription
from schema.tasks import TaskMutation, TaskQuery
from schema.ticket_live import TicketSubscription
from schema.tickets import TicketMutation, TicketQuery
from schema.time_rules import TimeRulesMutation, TimeRulesQuery
from schema.tokens import TokenMutation, TokenQuery
from schema.viewer import ViewerQuery


@strawberry.type
class Query(
    ViewerQuery,
    TicketQuery,
    TaskQuery,
    NotificationQuery,
    TokenQuery,
    ScheduleQuery,
    PreferencesQuery,
    PeopleQuery,
    MailboxQuery,
    SlaQuery,
    TimeRulesQuery,
):
    pass


@strawberry.type
class Mutation(
    TicketMutation,
    TaskMutation,
    ImportMutation,
    NotificationMutation,
    TokenMutation,
    ScheduleMutation,
    PreferencesMutation,
    PeopleMutation,
    ConversationMutation,
    MailboxMutation,
    SlaMutation,
    TimeRulesMutation,
):
    pass


@strawberry.type
class Subscription(TaskSubscription, TicketSubscription):
    pass


class DeskSchema(strawberry.Schema):
    """Logs errors with the request id; in production strips every "Did you mean …?" hint
    (Strawberry's own switch only covers unknown fields)."""

    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        if self.config.disable_field_suggestions:
            for error in errors:
                self.remove_field_suggestion(error)  # what Schema.execute does before this hook
                if " Did you mean" in error.message:
                    error.message = error.message.split(" Did you mean")[0]
        context = execution_context.context if execution_context else None
        log_errors(errors, getattr(context, "request_id", "-"))


@cache
def build_schema(prod: bool = False) -> DeskSchema:
    return DeskSchema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        config=StrawberryConfig(disable_field_suggestions=prod),
    )
