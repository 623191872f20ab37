"""Overload is refused at once (issue 11): beyond WEB_MAX_IN_FLIGHT requests in flight a web
process answers 503 with Retry-After (GraphQL: OVERLOADED) without doing any work, while
/health, /metrics and static files still answer; once the requests in flight finish, the
process serves again. Requests are held in flight by a real row lock, not by a mock."""

from __future__ import annotations

import asyncio

import psycopg
from prometheus_client import REGISTRY

from schema import errors
from tests.helpers import wait_for
from web.overload import OVERLOADED, RETRY_AFTER_SECONDS

REMIND = "mutation($t: ID!) { scheduleReminder(ticketId: $t, inMinutes: 30) { __typename } }"
DEADLINE = 30.0


def refusals(face: str) -> float:
    return REGISTRY.get_sample_value("taskdesk_http_overloaded_total", {"face": face}) or 0.0


async def _blocked_on_locks(api, n: int) -> None:
    """Wait (with a deadline) until `n` sessions of the app wait on a row lock."""

    async def enough() -> bool:
        row = await api.rt.pg.one(
            "SELECT count(*) AS n FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return row is not None and row["n"] >= n

    await wait_for(enough, timeout=DEADLINE, what="the mutations to reach the lock")


async def test_beyond_the_bound_requests_get_503_at_once(make_api, world) -> None:
    async with make_api(web_max_in_flight=2) as api:
        tickets = [world.tickets["login"], world.tickets["printer"]]
        with psycopg.connect(api.rt.settings.libpq_url) as holder:
            holder.execute("SELECT 1 FROM ticket WHERE id = ANY(%s) FOR UPDATE", (tickets,))
            held = [
                asyncio.create_task(api.post(REMIND, {"t": str(t)}, user=world.staff))
                for t in tickets
            ]
            await _blocked_on_locks(api, 2)  # two requests in flight: the bound
            before = (refusals("graphql"), refusals("page"))

            r = await api.post("{ me { id } }", user=world.staff)
            assert r.status_code == 503
            assert r.headers["retry-after"] == str(RETRY_AFTER_SECONDS)
            assert r.json()["errors"][0]["extensions"]["code"] == OVERLOADED == errors.OVERLOADED

            page = await api.client.get("/tickets", headers={"HX-Request": "true"})
            assert page.status_code == 503
            assert page.headers["retry-after"] == str(RETRY_AFTER_SECONDS)
            assert page.headers["content-type"].startswith("text/plain")

            browser = await api.client.get("/tickets", headers={"Accept": "text/html"})
            assert browser.status_code == 503 and "busy" in browser.text

            assert refusals("graphql") - before[0] == 1
            assert refusals("page") - before[1] == 2
            # What must answer under load still does.
            health = await api.client.get("/health")  # its own answer (no worker runs here)
            assert health.json()["redis"] is True and "retry-after" not in health.headers
            assert (await api.client.get("/metrics")).status_code == 200
            assert (await api.client.get("/static/ui.css")).status_code == 200
            assert all(not t.done() for t in held)
            holder.rollback()
        done = await asyncio.wait_for(asyncio.gather(*held), DEADLINE)
        for r in done:
            assert r.status_code == 200
            assert r.json()["data"]["scheduleReminder"]["__typename"] == "Task"
        # The bound counts requests in flight, not requests ever: served again.
        r = await api.post("{ me { id } }", user=world.staff)
        assert r.status_code == 200 and r.json()["data"]["me"]["id"] == str(world.staff)


async def test_within_the_bound_nothing_is_refused(make_api, world) -> None:
    async with make_api(web_max_in_flight=4) as api:
        before = refusals("graphql")
        got = await asyncio.gather(*(api.post("{ me { id } }", user=world.staff) for _ in range(4)))
        assert [r.status_code for r in got] == [200] * 4
        assert refusals("graphql") == before


def test_the_bound_is_validated_at_start() -> None:
    from desk.core.settings import ConfigError, load_settings

    for bad in (0, -1, "many"):
        try:
            load_settings(web_max_in_flight=bad)
        except ConfigError as exc:
            assert "WEB_MAX_IN_FLIGHT" in str(exc)
        else:
            raise AssertionError(f"{bad!r} was accepted")
