"""API tokens over GraphQL: list yours, create one (the token is shown once), revoke one."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import strawberry
from strawberry import ID

from desk.core.errors import NotAllowed, NotFound
from desk.core.models import ApiToken as ApiTokenRow
from desk.people import users
from desk.reads import lookups
from schema import problems as e
from schema.context import Context, ctx_of
from schema.problems import attempt


@strawberry.type(description="An API token; the secret itself is never shown again.")
class ApiToken:
    id: ID
    name: str
    prefix: str = strawberry.field(description="The token's recognisable start, e.g. tdk_1a2b3c4d.")
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    @strawberry.field
    def active(self) -> bool:
        return self.revoked_at is None

    @classmethod
    def from_model(cls, t: ApiTokenRow) -> ApiToken:
        return cls(
            id=ID(str(t.id)),
            name=t.name,
            prefix=t.prefix,
            created_at=t.created_at,
            last_used_at=t.last_used_at,
            revoked_at=t.revoked_at,
        )


@strawberry.type
class NewApiToken:
    token: str = strawberry.field(
        description="Send as `Authorization: Bearer <token>`. Shown only now: store it safely."
    )
    api_token: ApiToken


CreateTokenResult = Annotated[
    NewApiToken | e.ValidationProblem, strawberry.union("CreateApiTokenResult")
]
RevokeTokenResult = Annotated[ApiToken | e.NotFound, strawberry.union("RevokeApiTokenResult")]


@strawberry.type
class TokenQuery:
    @strawberry.field(description="Your API tokens, newest first (revoked ones included).")
    async def api_tokens(self, info: strawberry.Info) -> list[ApiToken]:
        ctx = ctx_of(info)
        return [ApiToken.from_model(t) for t in await users.list_tokens(ctx.rt, ctx.user_id)]


@strawberry.type
class TokenMutation:
    @strawberry.mutation(description="Create an API token for yourself.")
    async def create_api_token(self, info: strawberry.Info, name: str) -> CreateTokenResult | None:
        async def run(ctx: Context, user_id: int) -> NewApiToken:
            # A token cannot mint tokens: otherwise a leaked token could outlive its revocation
            # through the children it made. New tokens need a signed-in person (or the CLI).
            if getattr(ctx.caller, "via", None) == "token":
                raise NotAllowed("API tokens cannot create API tokens; sign in to create one.")
            row, token = await users.create_token(ctx.rt, user_id, name)
            return NewApiToken(token=token, api_token=ApiToken.from_model(row))

        return await attempt(info, run, (e.ValidationProblem,))  # type: ignore[return-value]

    @strawberry.mutation(description="Revoke one of your API tokens; it stops working at once.")
    async def revoke_api_token(self, info: strawberry.Info, id: ID) -> RevokeTokenResult | None:
        async def run(ctx: Context, user_id: int) -> ApiToken:
            token_id = lookups.parse_id(id)
            if token_id is None:
                raise NotFound("Token not found.")
            return ApiToken.from_model(await users.revoke_token(ctx.rt, user_id, token_id))

        return await attempt(info, run, (e.NotFound,))  # type: ignore[return-value]
