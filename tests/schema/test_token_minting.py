"""A bearer token cannot mint tokens (issue 12, point 10): otherwise a leaked token could
outlive its revocation through the children it made. A signed-in person still can."""

from __future__ import annotations

from desk.people import users

CREATE = """mutation { createApiToken(name: "child") {
  __typename ... on NewApiToken { token }
} }"""


async def test_a_token_cannot_create_tokens(api, rt, world) -> None:
    _, token = await users.create_token(rt, world.staff, "parent")
    refused = await api(CREATE, token=token)
    assert refused["errors"][0]["extensions"]["code"] == "FORBIDDEN"
    assert [t.name for t in await users.list_tokens(rt, world.staff)] == ["parent"]
    made = await api(CREATE, user=world.staff)  # the session cookie of a signed-in person
    assert made["data"]["createApiToken"]["__typename"] == "NewApiToken", made
