"""Subscriptions over the WebSocket at /graphql (schema/streams.py, schema/stream_auth.py,
schema/live.py) against a real uvicorn: sign-in and its refusals (4401, 4403 for a session cookie
from another site), typed errors for what is refused, the limits per connection and per person,
the subscribe rate (on the injected clock), the server's pings, and gql's WebSocket transport as
a third-party client."""

from __future__ import annotations

from typing import Any

import pytest
from gql import Client, GraphQLRequest
from gql.transport.exceptions import TransportQueryError
from gql.transport.websockets import WebsocketsTransport

from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.people import users
from desk.work import tasks
from schema import live, streams
from tests.factories import World
from tests.helpers import wait_for
from tests.schema.subscribing import (
    Closed,
    Served,
    Socket,
    codes,
    connected,
    listening,
    serve,
    socket,
)
from tests.sessions import cookie_header

NOTES = "subscription { notificationAdded { id } }"
TASK = "subscription($id: ID!) { taskUpdated(id: $id) { id status } }"


async def _token(rt: Runtime, user_id: int) -> str:
    return (await users.create_token(rt, user_id, "ws"))[1]


async def _refused(served: Served, payload: dict[str, Any] | None = None, **how: Any) -> Closed:
    async with socket(served, init=False, **how) as s:
        await s.send_init(payload)
        return await s.closed()


async def test_sign_in_refusals_close_with_4401_or_4403(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    token = await _token(rt, world.staff)
    cookie = cookie_header(settings, world.staff)
    async with serve(settings, clock) as served:
        here = served.url
        assert (await _refused(served)).code == 4401  # nothing at all
        bad = await _refused(served, {"authorization": "Bearer tdk_not-a-token"})
        assert (bad.code, bad.reason) == (
            4401,
            "Unauthorized: that API token is unknown or revoked.",
        )
        assert (await _refused(served, {"authorization": token})).code == 4401  # no "Bearer"
        # A session cookie signs in only from this site's own pages (or a non-browser client).
        hijack = await _refused(served, cookie=cookie, origin="https://evil.example")
        assert hijack.code == 4403 and "cookie" in hijack.reason
        for how in ({"cookie": cookie, "origin": here}, {"cookie": cookie}):
            async with socket(served, **how) as s:
                op = await s.subscribe(TASK, {"id": "1"})
                assert (await s.next(op))["data"] == {"taskUpdated": None}
        # A token counts from any origin, in connection_init or in the handshake's header.
        for how in (
            {"token": token, "cookie": cookie, "origin": "https://evil.example"},
            {"header_token": token, "origin": "https://elsewhere.example"},
        ):
            async with socket(served, **how) as s:
                assert (await s.next(await s.subscribe(TASK, {"id": "x"})))["data"] is not None


async def test_what_is_not_a_subscription_is_refused_with_a_code(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    token = await _token(rt, world.staff)
    async with (
        serve(settings, clock, graphql_max_cost=100) as served,
        socket(served, token=token) as s,
    ):
        refused = {
            "{ me { id } }": "BAD_REQUEST",  # queries and mutations: POST /graphql
            "mutation { markNotificationsRead(all: true) { __typename } }": "BAD_REQUEST",
            "subscription { taskUpdated(": "GRAPHQL_PARSE_FAILED",
            "subscription { nope }": "GRAPHQL_VALIDATION_FAILED",
            "subscription($id: ID!) { taskUpdated(id: $id) { team { members { role "
            "user { id displayName } } } ticket { team { members { role user { id "
            "displayName } } } } } }": "QUERY_TOO_COSTLY",
        }
        for query, code in refused.items():
            op = await s.subscribe(query, {"id": "1"})
            assert codes(await s.error(op)) == [code], query
        # The connection is still good after every refusal.
        op = await s.subscribe(TASK, {"id": "1"})
        assert (await s.next(op))["data"] == {"taskUpdated": None}


async def _admitted(s: Socket) -> None:
    """Wait until `s` may subscribe again: completing an operation frees its place as the
    server winds it down, after the client's `complete` has left."""

    async def room() -> bool:
        op = await s.subscribe(TASK, {"id": "999999"})  # admitted: null and the end at once
        message = await s.message(op)
        if message["type"] == "error":
            assert codes(message["payload"]) == ["TOO_MANY_SUBSCRIPTIONS"], message
            return False
        assert await s.until_complete(op) == []
        return True

    await wait_for(room, timeout=10, what="a free subscription place")


async def test_limits_per_connection_and_per_person(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    staff, admin = await _token(rt, world.staff), await _token(rt, world.admin)
    limits = {"subscriptions_per_connection": 2, "subscriptions_per_person": 3}
    async with serve(settings, clock, **limits) as served:
        one, two = await connected(served, staff), await connected(served, staff)
        try:
            first, _ = await one.subscribe(NOTES), await one.subscribe(NOTES)
            await listening(served, 2)
            over = await one.error(await one.subscribe(NOTES))
            assert (
                codes(over) == ["TOO_MANY_SUBSCRIPTIONS"] and "one connection" in over[0]["message"]
            )
            await two.subscribe(NOTES)
            await listening(served, 3)
            person = await two.error(await two.subscribe(NOTES))  # the person's 4th
            assert (
                codes(person) == ["TOO_MANY_SUBSCRIPTIONS"] and "per person" in person[0]["message"]
            )
            other = await connected(served, admin)  # somebody else is not counted with them
            await other.subscribe(NOTES)
            await listening(served, 4)
            await other.ws.close()
            await one.stop(first)  # completing one frees its place
            await _admitted(two)
        finally:
            await one.ws.close()
            await two.ws.close()


async def test_subscribes_are_rate_limited_per_connection_on_the_injected_clock(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    token = await _token(rt, world.staff)
    async with serve(settings, clock) as served, socket(served, token=token) as s:
        for _ in range(live.SUBSCRIBES_PER_MINUTE):
            op = await s.subscribe(TASK, {"id": "999999"})  # null, and the end: quick
            assert [p["data"] for p in await s.until_complete(op)] == [{"taskUpdated": None}]
        refused = await s.error(await s.subscribe(TASK, {"id": "999999"}))
        assert codes(refused) == ["RATE_LIMITED"] and refused[0]["extensions"]["retryAfter"] >= 1
        clock.advance(60)  # the next minute
        op = await s.subscribe(TASK, {"id": "999999"})
        assert (await s.next(op))["data"] == {"taskUpdated": None}


async def test_the_server_pings(
    settings: Settings, rt: Runtime, world: World, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streams, "PING_SECONDS", 0.2)
    token = await _token(rt, world.staff)
    async with serve(settings, clock) as served, socket(served, token=token) as s:
        await s.read_one()  # nothing else is sent to a connection without subscriptions
        assert s.pings == 1  # and the client's `pong` is taken (the connection stays up)
        op = await s.subscribe(TASK, {"id": "1"})
        assert (await s.next(op))["data"] == {"taskUpdated": None}


async def test_gql_websockets_transport_follows_a_task(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    """A third-party client: gql's WebsocketsTransport, speaking graphql-transport-ws."""
    token = await _token(rt, world.staff)
    export = await tasks.create_export(rt, world.staff, world.team, {})
    async with serve(settings, clock) as served:
        transport = WebsocketsTransport(
            url=served.ws_url,
            init_payload={"authorization": f"Bearer {token}"},
            subprotocols=[WebsocketsTransport.GRAPHQLWS_SUBPROTOCOL],
        )
        request = GraphQLRequest(TASK, variable_values={"id": str(export.id)})
        seen = []
        async with Client(transport=transport) as session:
            async for result in session.subscribe(request):
                seen.append(result["taskUpdated"]["status"])
                if seen == ["WAITING"]:
                    await tasks.cancel_task(rt, world.staff, export.id or 0)
            assert seen == ["WAITING", "CANCELLED"]  # and the stream ended by itself
            # A refusal reaches gql as its query error, with the code.
            refused = GraphQLRequest("subscription { taskUpdated(id: 1) { nope } }")
            with pytest.raises(TransportQueryError) as caught:
                async for _ in session.subscribe(refused):
                    pass
            assert codes(caught.value.errors or []) == ["GRAPHQL_VALIDATION_FAILED"]


async def test_production_shows_no_field_suggestions(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    token = await _token(rt, world.staff)
    async with (
        serve(settings, clock, taskdesk_env="prod") as served,
        socket(served, token=token) as s,
    ):
        typo = await s.error(await s.subscribe("subscription { taskUpdatd(id: 1) { id } }"))
        assert codes(typo) == ["GRAPHQL_VALIDATION_FAILED"]
        assert "taskUpdatd" in typo[0]["message"] and "Did you mean" not in typo[0]["message"]
