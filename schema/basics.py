"""GraphQL object types every domain's types build on: the enums, people, teams and the pieces of a
page (`Edge`, `PageInfo`). They refer to nothing above them, so `schema.types` (tickets, tasks
and a ticket's conversation, which refer to one another) builds on them without a circle."""

from __future__ import annotations

from typing import Generic, TypeVar

import strawberry
from strawberry import ID

from desk.core.models import Priority, Role, TaskKind, TaskStatus, TicketStatus
from desk.reads import lookups
from schema.context import ctx_of

T = TypeVar("T")

strawberry.enum(Role, description="A member's role in a team.")
strawberry.enum(TicketStatus)
strawberry.enum(Priority)
strawberry.enum(TaskKind)
strawberry.enum(TaskStatus, description="The ledger state; see `Task.statusLabel` for people.")


@strawberry.type
class User:
    id: ID
    display_name: str

    @classmethod
    def from_model(cls, u: lookups.UserName) -> User:
        return cls(id=ID(str(u.id)), display_name=u.display_name)


@strawberry.type
class TeamMember:
    user: User
    role: Role


@strawberry.type
class Team:
    id: ID
    name: str
    my_role: Role = strawberry.field(description="The caller's role in this team.")

    @classmethod
    def from_view(cls, t: lookups.TeamView) -> Team:
        return cls(id=ID(str(t.id)), name=t.name, my_role=t.role)

    @strawberry.field(
        description="The team's members for assignee pickers (a customer sees the staff and themselves)."
    )
    async def members(self, info: strawberry.Info) -> list[TeamMember]:
        rows = await ctx_of(info).loaders.members.load(int(self.id))
        return [
            TeamMember(user=User(id=ID(str(uid)), display_name=name), role=Role(role))
            for uid, name, _email, role in rows
        ]


@strawberry.type
class Membership:
    team: Team
    role: Role


@strawberry.type
class Me:
    id: ID
    email: str
    display_name: str
    memberships: list[Membership]


async def _user(info: strawberry.Info, user_id: int | None) -> User | None:
    if user_id is None:
        return None
    found = await ctx_of(info).loaders.users.load(user_id)
    return User.from_model(found) if found else None


@strawberry.type
class PageInfo:
    has_next_page: bool
    end_cursor: str | None


@strawberry.type
class Edge(Generic[T]):
    cursor: str
    node: T
