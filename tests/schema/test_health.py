"""GraphQL's `health` (schema/viewer.py): `ok` for every signed-in person, as /health answers
everyone; the operators' detail only under /health's own rule (web/operator_access.py), whatever
the caller's role in a team."""

from __future__ import annotations

PROD = {"taskdesk_env": "prod", "secret_key": "a-long-production-secret-0123456789"}
HEALTH = "{ health { ok redisOk workers lastSweep queueDepth oldestOverdueSeconds } }"
HIDDEN = {
    "redisOk": None,
    "workers": None,
    "lastSweep": None,
    "queueDepth": None,
    "oldestOverdueSeconds": None,
}
ROLES = ("admin", "staff", "customer", "outsider")  # the team's roles, and another team's member


async def _health(api, world, who: str) -> dict:
    body = await api(HEALTH, user=getattr(world, who))
    assert "errors" not in body, body
    return body["data"]["health"]


async def test_only_whom_health_shows_detail_sees_it_here(make_api, world) -> None:
    # The in-process client calls from 127.0.0.1.
    async with make_api(**PROD, ops_allowed_addresses="10.0.0.0/8") as api:
        plain = (await api.client.get("/health")).text
        assert plain in ("ok", "unavailable"), "refused on /health too"
        for who in ROLES:
            assert await _health(api, world, who) == {"ok": plain == "ok", **HIDDEN}, who
    async with make_api(**PROD, ops_allowed_addresses="10.0.0.0/8, 127.0.0.1") as api:
        assert "workers" in (await api.client.get("/health")).json(), "allowed on /health too"
        for who in ROLES:
            seen = await _health(api, world, who)
            assert (seen["redisOk"], seen["workers"], seen["queueDepth"]) == (True, 0, 0), who
    async with make_api(**PROD) as api:  # production without either setting: nobody
        for who in ROLES:
            assert await _health(api, world, who) == {"ok": False, **HIDDEN}, who


async def test_anonymous_callers_are_still_refused(make_api) -> None:
    async with make_api(**PROD, ops_allowed_addresses="127.0.0.1") as api:
        body = await api(HEALTH)
    assert body["data"] is None
    assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
