"""GraphQL's status read `task(id)`: the caller's session and the task in one statement (a
cookie), the same answers as any other way of asking, and null for a task you may not see
exactly as for one that does not exist."""

from __future__ import annotations

import pytest

from desk.people import users
from desk.work import tasks
from schema.app import ALLOWED_OPERATIONS, status_read
from schema.executor import Runner
from schema.hardening import LIMIT_RULES
from schema.root import build_schema
from tests.counting import counting

STATUS = "query($id: ID!) { task(id: $id) { id status statusLabel downloadUrl dispatchedAt } }"
WITH_MORE = "query($id: ID!) { task(id: $id) { id status } me { id } }"
MISSING = "99999"


async def test_a_status_read_is_one_statement(api, world) -> None:
    task = await tasks.create_export(api.rt, world.customer, world.team, {"q": "x"})
    with counting(api.rt.pg) as seen:
        body = await api(STATUS, {"id": str(task.id)}, user=world.customer)
    assert body["data"]["task"]["id"] == str(task.id)
    assert seen[0] == "checkout" and len(seen) == 2, seen  # session, user and task together


@pytest.mark.parametrize("who", ["admin", "staff", "customer2", "outsider"])
async def test_a_hidden_task_reads_as_null_like_a_missing_one(api, world, who) -> None:
    task = await tasks.create_export(api.rt, world.customer, world.team, {"q": "mine"})
    user = getattr(world, who)
    hidden = await api(STATUS, {"id": str(task.id)}, user=user)
    missing = await api(STATUS, {"id": MISSING}, user=user)
    assert hidden == missing == {"data": {"task": None}}
    mine = await api(STATUS, {"id": str(task.id)}, user=world.customer)
    assert mine["data"]["task"]["status"] == "WAITING"


async def test_every_way_of_asking_gives_the_same_answer(api, rt, world) -> None:
    task = await tasks.create_export(rt, world.staff, world.team, {"q": "same"})
    _, token = await users.create_token(rt, world.staff, "t")
    tid = str(task.id)
    by_cookie = await api(STATUS, {"id": tid}, user=world.staff)
    by_token = await api(STATUS, {"id": tid}, token=token)
    inline = await api(
        f'{{ task(id: "{tid}") {{ id status statusLabel downloadUrl dispatchedAt }} }}',
        user=world.staff,
    )
    assert by_cookie == by_token == inline and by_cookie["data"]["task"]["id"] == tid
    more = await api(WITH_MORE, {"id": tid}, user=world.staff)  # not a bare status read
    assert more["data"]["task"] == {"id": tid, "status": "WAITING"}
    anonymous = await api(STATUS, {"id": tid})
    assert anonymous["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


def test_only_a_bare_task_query_is_a_status_read() -> None:
    runner = Runner(build_schema(), LIMIT_RULES)

    def read(query, variables, name=None):
        return status_read(runner, query, variables, name)

    assert read(STATUS, {"id": "42"}) == 42
    assert read(STATUS, {"id": 42}) == 42
    assert read('{ task(id: "7") { id } }', None) == 7
    assert read("{ task(id: 7) { id } }", None) == 7
    assert read("{ task(id: 7) { id owner { id } } }", None) == 7  # answered by the executor
    assert read(WITH_MORE, {"id": "42"}) is None
    assert read(STATUS, {"id": "x"}) is None
    assert read(STATUS, {"id": None}) is None
    assert read(STATUS, {"id": True}) is None
    assert read("mutation($id: ID!) { task(id: $id) { id } }", {"id": "1"}) is None
    assert read("{ task(id: ", None) is None  # not even a document: the runner says so
    assert read("{ task(id: 7) { nope } }", None) is None  # invalid: the runner says so
    two = f"query A {{ me {{ id }} }} {STATUS.replace('query(', 'query B(')}"
    assert read(two, {"id": "5"}, "B") == 5 and read(two, {"id": "5"}, "A") is None
    assert ALLOWED_OPERATIONS  # the runner the endpoint uses is built the same way
