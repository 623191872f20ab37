"""An accept names its caller from the change feed's memory of sessions (web/auth.py `identify`,
`accepting`) and checks that session again in its own statement (desk/ledger/intake.py `LIVE`):
a remembered caller's createExport is one pool checkout, and a session that ended before its
notice arrived inserts nothing and is answered UNAUTHENTICATED, with or without a key."""

from __future__ import annotations

import hashlib

import pytest
from itsdangerous import URLSafeTimedSerializer

from desk.reads.memory import Memory
from tests.counting import counting
from tests.helpers import wait_for
from web.auth import SESSION_COOKIE

CREATE = """mutation($t: ID!, $q: String, $k: String) {
  createExport(teamId: $t, filter: {q: $q}, idempotencyKey: $k) { __typename ... on Task { id } } }"""
STATUS = "query($id: ID!) { task(id: $id) { id status } }"


def _digest(api, user: int) -> str:
    cookie = api.headers(user)["Cookie"].removeprefix(f"{SESSION_COOKIE}=")
    serializer = URLSafeTimedSerializer(api.rt.settings.secret_key, salt="taskdesk-session")
    return hashlib.sha256(serializer.loads(cookie)["sid"].encode()).hexdigest()


async def _listening(api) -> Memory:
    memory: Memory = api.app.state.memory
    await wait_for(lambda: _true(memory.trusted), what="the change feed's listener")
    return memory


async def _true(value: bool) -> bool:
    return value


async def _tasks(api, owner: int) -> int:
    row = await api.rt.pg.one(
        "SELECT count(*) AS n FROM background_task WHERE owner_id = %(o)s", {"o": owner}
    )
    return int(row["n"]) if row else 0


async def test_a_remembered_caller_accepts_in_one_checkout(api, world) -> None:
    memory = await _listening(api)
    first = await api(CREATE, {"t": world.team, "q": "a"}, user=world.staff)
    assert first["data"]["createExport"]["__typename"] == "Task", first
    assert memory.caller(_digest(api, world.staff), api.rt.clock()) is not None

    with counting(api.rt.pg) as seen:
        second = await api(CREATE, {"t": world.team, "q": "b"}, user=world.staff)
    assert second["data"]["createExport"]["__typename"] == "Task", second
    assert seen.count("checkout") == 1, seen  # the accept; the session was not read apart

    # Other operations still read the session on every request.
    task_id = second["data"]["createExport"]["id"]
    with counting(api.rt.pg) as seen:
        read = await api(STATUS, {"id": task_id}, user=world.staff)
    assert read["data"]["task"]["status"] == "WAITING" and seen.count("checkout") == 1


@pytest.mark.parametrize("key", [None, "key-after-logout-1"])
async def test_a_session_ended_before_its_notice_came_inserts_nothing(api, world, key) -> None:
    memory = await _listening(api)
    made = await api(CREATE, {"t": world.team, "q": "c", "k": key}, user=world.staff)
    assert made["data"]["createExport"]["__typename"] == "Task", made
    digest = _digest(api, world.staff)
    memo = memory.caller(digest, api.rt.clock())
    assert memo is not None
    before = await _tasks(api, world.staff)

    await api.rt.pg.write(
        "UPDATE web_session SET revoked_at = now() WHERE id = %(d)s", {"d": digest}
    )
    await wait_for(
        lambda: _true(memory.caller(digest, api.rt.clock()) is None),
        what="the session's notice to drop it",
    )
    # As if the notice had not arrived yet: the memory still names the caller.
    memory.callers[digest] = memo
    memory.by_user.setdefault(memo.user_id, set()).add(digest)

    again = await api(CREATE, {"t": world.team, "q": "d" if key is None else "c", "k": key},
                      user=world.staff)  # fmt: skip
    assert again["data"]["createExport"] is None, again
    assert again["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED", again
    assert await _tasks(api, world.staff) == before


async def test_a_removed_session_is_refused_by_every_path(api, world) -> None:
    """The ordinary path (memory not consulted) refuses an ended session as ever."""
    await _listening(api)
    digest = _digest(api, world.customer)
    await api.rt.pg.write("DELETE FROM web_session WHERE id = %(d)s", {"d": digest})
    body = await api(CREATE, {"t": world.team, "q": "e"}, user=world.customer)
    assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED", body
    assert await _tasks(api, world.customer) == 0
