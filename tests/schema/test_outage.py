"""While PostgreSQL refuses connections, GraphQL answers SERVICE_UNAVAILABLE with Retry-After
and no driver text (issue 12, point 7). The outage is real: the test's own database stops
accepting connections and every session on it is ended, as a restarting server does."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from desk.work import reminders

LEAKS = ("psycopg", "sqlalchemy", "SELECT", "connection to server", "accepting", "%(", "[SQL")


@contextmanager
def database_down(servers, settings) -> Iterator[None]:
    name = settings.database_url.split("?", 1)[0].rsplit("/", 1)[1]
    with psycopg.connect(servers.admin_url, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        try:
            yield
        finally:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')


@pytest.mark.parametrize("env", ["dev", "prod"])
async def test_graphql_during_an_outage_answers_service_unavailable(
    make_api, servers, settings, rt, world, env
) -> None:
    task = await reminders.schedule_reminder(rt, world.staff, world.tickets["login"], in_minutes=9)
    prod = {"secret_key": "a-long-production-secret-0123456789"} if env == "prod" else {}
    async with make_api(taskdesk_env=env, **prod) as api:
        read = "query($k: ID!) { task(id: $k) { id } }"
        warm = await api(read, {"k": task.id}, user=world.staff)
        assert warm["data"]["task"]["id"] == str(task.id)
        with database_down(servers, settings):
            for query in (
                "query($t: ID!) { tickets(teamId: $t) { totalCount nodes { title } } }",
                "query($k: ID!) { task(id: $k) { id status } }",
                'mutation($t: ID!) { createTicket(teamId: $t, title: "x") { __typename } }',
            ):
                variables = {"t": world.team, "k": task.id}
                variables = {k: v for k, v in variables.items() if f"${k}" in query}
                response = await api.post(query, variables, user=world.staff)
                assert response.status_code == 503, (query, response.text)
                assert response.headers["retry-after"].isdigit()
                codes = {e["extensions"]["code"] for e in response.json()["errors"]}
                assert codes == {"SERVICE_UNAVAILABLE"}, response.text
                for leak in LEAKS:
                    assert leak not in response.text, response.text
        after = await api(read, {"k": task.id}, user=world.staff)
        assert after["data"]["task"]["id"] == str(task.id)  # and it recovers by itself
