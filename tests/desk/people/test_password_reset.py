"""desk.people.resets through desk.work.onboarding: asking for a reset answers the same, after the
same work, whether or not an account uses the address; the link sets the password once, expires,
ends every session of that person, and is throttled per address and per client."""

from __future__ import annotations

import statistics
import time

import pytest
import sqlalchemy as sa

from desk.core.errors import LinkGone, NotFound, ValidationProblem
from desk.people import resets, sessions, users
from desk.people.throttle import Throttled
from desk.work import onboarding

NEW = "a brand new password"


async def _issue(rt, email: str) -> resets.Recipient | None:
    """What request_password_reset writes, with the token the e-mail would carry."""
    from datetime import timedelta

    async with rt.engine.begin() as conn:
        return await resets.issue(
            conn, email=email, client="test", now=rt.clock(), ttl=timedelta(minutes=60)
        )


async def _count(rt, table: str) -> int:
    async with rt.engine.connect() as conn:
        return int((await conn.execute(sa.text(f"SELECT count(*) FROM {table}"))).scalar_one())


async def test_same_answer_whether_or_not_the_address_exists(rt, world) -> None:
    assert await onboarding.request_password_reset(rt, "chen@acme.test", "1.2.3.4") is None
    assert await onboarding.request_password_reset(rt, "nobody@acme.test", "1.2.3.4") is None
    assert await _count(rt, "password_reset") == 1  # only the real account got a link
    async with rt.engine.connect() as conn:  # and an e-mail: the other one's was taken back
        to = (await conn.execute(sa.text("SELECT filters->>'to' FROM background_task"))).all()
    assert [r[0] for r in to] == ["chen@acme.test"]
    async with rt.engine.connect() as conn:
        details = [
            r.detail
            for r in await conn.execute(
                sa.text("SELECT detail FROM ops_audit WHERE action = 'password_reset_request'")
            )
        ]
    assert details == ["chen@acme.test", "nobody@acme.test (no account uses it)"]


async def test_same_time_within_noise(rt, world) -> None:
    rt.settings = rt.settings.model_copy(
        update={"password_reset_max_per_email": 1000, "password_reset_max_per_client": 1000}
    )
    timings: dict[str, list[float]] = {"known": [], "unknown": []}
    for i in range(60):  # interleaved, so load on the machine hits both alike
        for kind, email in (("known", "chen@acme.test"), ("unknown", f"ghost{i}@acme.test")):
            start = time.perf_counter()
            await onboarding.request_password_reset(rt, email, "10.0.0.1")
            timings[kind].append(time.perf_counter() - start)
    known, unknown = (statistics.median(timings[k]) for k in ("known", "unknown"))
    # The same statements run either way: the medians differ by noise only (a generous bound).
    assert abs(known - unknown) < max(0.003, 0.5 * min(known, unknown)), (known, unknown)


async def test_reset_sets_the_password_once_and_ends_every_session(rt, world) -> None:
    await sessions.open_session(rt, world.staff)
    await sessions.open_session(rt, world.staff)
    to = await _issue(rt, "CHEN@acme.test")
    assert to is not None and to.user_id == world.staff and to.path.endswith(to.token)
    done = await resets.reset(rt, to.token, NEW)
    assert done.sessions_ended == 2 and done.user_id == world.staff
    assert await users.authenticate(rt, "chen@acme.test", NEW) is not None
    with pytest.raises(LinkGone) as gone:
        await resets.reset(rt, to.token, "another password")
    assert gone.value.reason == "used"
    async with rt.engine.connect() as conn:
        actions = [
            r.action
            for r in await conn.execute(sa.text("SELECT action FROM ops_audit ORDER BY id"))
        ]
        assert to.token not in str(
            list(await conn.execute(sa.text("SELECT detail, actor FROM ops_audit")))
        )
    assert actions == ["password_reset_request", "password_reset"]


async def test_a_used_link_uses_up_the_others(rt, world) -> None:
    first, second = await _issue(rt, "chen@acme.test"), await _issue(rt, "chen@acme.test")
    assert first and second
    await resets.reset(rt, second.token, NEW)
    with pytest.raises(LinkGone):
        await resets.reset(rt, first.token, NEW)


async def test_expired_link_is_refused(rt, world, clock) -> None:
    to = await _issue(rt, "chen@acme.test")
    assert to is not None
    clock.advance(61 * 60)
    with pytest.raises(LinkGone) as gone:
        await resets.check(rt, to.token)
    assert gone.value.reason == "expired"
    with pytest.raises(LinkGone):
        await resets.reset(rt, to.token, NEW)


@pytest.mark.parametrize("token", ["", "z" * 43, "a" * 10_000, "\x00" * 30])
async def test_unknown_tokens_are_not_found(rt, world, token) -> None:
    with pytest.raises(NotFound):
        await resets.reset(rt, token, NEW)


async def test_bad_password_keeps_the_link(rt, world) -> None:
    to = await _issue(rt, "chen@acme.test")
    assert to is not None
    with pytest.raises(ValidationProblem) as bad:
        await resets.reset(rt, to.token, "short")
    assert bad.value.field == "password"
    await resets.check(rt, to.token)


@pytest.mark.parametrize("email", ["", "x\x00@acme.test", "a" * 10_000 + "@acme.test", "nope"])
async def test_odd_addresses_are_validation_problems(rt, world, email) -> None:
    with pytest.raises(ValidationProblem):
        await onboarding.request_password_reset(rt, email, "1.2.3.4")


async def test_throttled_per_address_and_per_client(rt, world) -> None:
    rt.settings = rt.settings.model_copy(
        update={"password_reset_max_per_email": 2, "password_reset_max_per_client": 3}
    )
    for _ in range(2):
        await onboarding.request_password_reset(rt, "nobody@acme.test", "1.1.1.1")
    with pytest.raises(Throttled) as per_address:  # the same answer for an unknown address
        await onboarding.request_password_reset(rt, "nobody@acme.test", "2.2.2.2")
    await onboarding.request_password_reset(rt, "chen@acme.test", "1.1.1.1")
    with pytest.raises(Throttled) as per_client:
        await onboarding.request_password_reset(rt, "lin@acme.test", "1.1.1.1")
    assert per_address.value.message == per_client.value.message
