"""What stops a fetched mail before it makes anything (docs/architecture.md, "Mail in"): a
stranger to a staff-only mailbox is held (no ticket, no account) until an admin accepts or
discards it; a flooding sender's excess is throttled with one notice to the admins while other
senders go on; a Message-ID read again under a new UIDVALIDITY makes no second ticket; a reply
loop is cut. On the real database, rows stored as a fetch stores them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from desk.core.errors import NotFound
from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.work import mail_gate, mail_parse
from desk.work.mail_review import release_held
from tests.conftest import FakeClock
from tests.factories import World
from tests.mail.inbound_helpers import mail, mailbox, outcomes, q, store


async def test_a_stranger_to_a_staff_only_mailbox_is_held_and_no_account_is_made(
    rt: Runtime, world: World
) -> None:
    box = await mailbox(rt, world.team, world.admin, staff_only=True)
    await store(rt, box, [
        mail("stranger@else.test", "Let me in", "Hello.", "<h1@else.test>"),
        mail("CHEN@acme.test", "Staff writes", "Internal.", "<h2@acme.test>"),  # a member
        mail("lin@acme.test", "Customer writes", "Mine.", "<h3@acme.test>"),  # a customer
    ])  # fmt: skip
    await mail_parse.parse_pending(rt, box)
    got = await outcomes(rt, box)
    assert [o for o, _ in got] == ["held", "ticket", "ticket"]
    assert got[0][1] is None
    assert await q(rt, "SELECT id FROM app_user WHERE email = 'stranger@else.test'") == []
    assert await q(rt, "SELECT id FROM ticket WHERE title = 'Let me in'") == []
    [held] = await q(rt, "SELECT raw, sender, problem FROM inbound_mail WHERE outcome = 'held'")
    assert b"Hello." in bytes(held.raw) and held.sender == "stranger@else.test"
    assert "held for review" in held.problem
    # The same mailbox, not staff-only: a stranger becomes a customer (the usual path).
    open_box = await mailbox(rt, world.team, world.admin, folder="Other")
    await store(rt, open_box, [mail("new@else.test", "Open door", "Hi.", "<o1@else.test>")])
    await mail_parse.parse_pending(rt, open_box)
    assert [o for o, _ in await outcomes(rt, open_box)] == ["ticket"]


async def test_an_admin_accepts_held_mail_and_it_is_read_as_usual_or_discards_it(
    rt: Runtime, world: World
) -> None:
    box = await mailbox(rt, world.team, world.admin, staff_only=True)
    await store(rt, box, [
        mail("ann@else.test", "Accept me", "Real question.", "<a1@else.test>"),
        mail("spam@else.test", "Discard me", "Buy now.", "<a2@else.test>"),
    ])  # fmt: skip
    await mail_parse.parse_pending(rt, box)
    [first, second] = [r.id for r in await q(rt, "SELECT id FROM inbound_mail ORDER BY id")]
    # Refused: staff (not admin) and an admin of another team are told it does not exist,
    # exactly as for a row that is not there (or not held).
    for by, row in [(world.staff, first), (world.outsider, first), (world.admin, 10**9)]:
        async with rt.engine.begin() as conn:
            with pytest.raises(NotFound, match="Held message not found"):
                await release_held(conn, row, as_customer=True, by=by, now=rt.clock())
    async with rt.engine.begin() as conn:
        done = await release_held(conn, first, as_customer=True, by=world.admin, now=rt.clock())
    assert done.outcome == "accepted" and done.customer_id is not None
    async with rt.engine.begin() as conn:
        gone = await release_held(conn, second, as_customer=False, by=world.admin, now=rt.clock())
    assert gone.outcome == "discarded"
    [role] = await q(rt, "SELECT m.role FROM membership m JOIN app_user u ON u.id = m.user_id "
                     "WHERE u.email = 'ann@else.test' AND m.team_id = :t", t=world.team)  # fmt: skip
    assert role.role == "CUSTOMER"
    queued = await q(rt, "SELECT kind FROM background_task WHERE kind = 'MAIL_PARSE' "
                     "AND status = 'WAITING'")  # fmt: skip
    assert len(queued) == 1  # the mailbox's parse reads the accepted mail again
    await mail_parse.parse_pending(rt, box)
    got = await outcomes(rt, box)
    assert got[0][0] == "ticket" and got[0][1] is not None and got[1] == ("discarded", None)
    assert await q(rt, "SELECT id FROM app_user WHERE email = 'spam@else.test'") == []
    # A second click changes nothing: neither row is held any more.
    async with rt.engine.begin() as conn:
        with pytest.raises(NotFound):
            await release_held(conn, second, as_customer=True, by=world.admin, now=rt.clock())


async def test_a_flooding_sender_is_throttled_with_one_notice_and_others_go_on(
    rt: Runtime, world: World, clock: FakeClock
) -> None:
    rt.settings = rt.settings.model_copy(
        update={"inbound_flood_max": 5, "inbound_flood_window_seconds": 600}
    )
    box = await mailbox(rt, world.team, world.admin)
    flood = [
        mail("bot@flood.test", f"Flood {n}", "Again.", f"<f{n}@flood.test>") for n in range(12)
    ]
    calm = [mail("ann@calm.test", f"Calm {n}", "Once.", f"<c{n}@calm.test>") for n in range(3)]
    await store(rt, box, flood[:6] + calm[:1] + flood[6:] + calm[1:])
    await mail_parse.parse_pending(rt, box)
    found = await q(rt, "SELECT sender, outcome FROM inbound_mail ORDER BY id")
    bot = [r.outcome for r in found if r.sender == "bot@flood.test"]
    assert bot == ["ticket"] * 5 + ["throttled"] * 7
    assert [r.outcome for r in found if r.sender == "ann@calm.test"] == ["ticket"] * 3
    assert len(await q(rt, "SELECT id FROM ticket WHERE title LIKE 'Flood %'")) == 5
    assert await q(rt, "SELECT id FROM background_task WHERE kind = 'EMAIL'") == []  # no mail out
    notes = await q(
        rt, "SELECT user_id, text FROM notification WHERE kind = :k", k=mail_gate.NOTICE
    )
    assert [n.user_id for n in notes] == [world.admin]  # once, to the team's admins
    assert "bot@flood.test" in notes[0].text
    # The window passes: the sender is read again (and a new flood would notify again).
    clock.advance(601)
    await store(rt, box, [mail("bot@flood.test", "Later", "Calm now.", "<late@flood.test>")])
    await mail_parse.parse_pending(rt, box)
    assert (await outcomes(rt, box))[-1][0] == "ticket"


async def test_a_flood_with_a_new_reply_to_each_time_is_still_one_sender(
    rt: Runtime, world: World
) -> None:
    # The counts match the From the fetch stored, not the Reply-To a reply would go to.
    rt.settings = rt.settings.model_copy(update={"inbound_flood_max": 3})
    box = await mailbox(rt, world.team, world.admin)
    flood = [
        mail("bot@flood.test", f"Flood {n}", "Again.", f"<r{n}@flood.test>",
             Reply_To=f"r{n}@elsewhere.test")
        for n in range(6)
    ]  # fmt: skip
    await store(rt, box, flood)
    await mail_parse.parse_pending(rt, box)
    assert [o for o, *_ in await outcomes(rt, box)] == ["ticket"] * 3 + ["throttled"] * 3


def test_the_flood_limit_is_checked_at_start() -> None:
    with pytest.raises(ValidationError, match="inbound_flood_max"):
        Settings(inbound_flood_max=0)
    with pytest.raises(ValidationError, match="inbound_flood_window_seconds"):
        Settings(inbound_flood_window_seconds=1)


async def test_a_message_id_read_again_under_a_new_uidvalidity_makes_no_second_ticket(
    rt: Runtime, world: World
) -> None:
    box = await mailbox(rt, world.team, world.admin)
    same = mail("cy@cust.test", "Renumbered", "Once.", "<same@cust.test>")
    await store(rt, box, [same], validity=1)
    await mail_parse.parse_pending(rt, box)
    await store(rt, box, [same], validity=2)  # the server renumbered: stored again, new UID
    await mail_parse.parse_pending(rt, box)
    got = await outcomes(rt, box)
    assert [o for o, _ in got] == ["ticket", "duplicate"]
    assert got[0][1] == got[1][1] is not None  # the copy names the ticket the first one made
    assert len(await q(rt, "SELECT id FROM ticket WHERE title = 'Renumbered'")) == 1


async def test_a_reply_loop_is_cut_by_the_loop_guard(rt: Runtime, world: World) -> None:
    box = await mailbox(rt, world.team, world.admin)
    await store(rt, box, [mail("loop@cust.test", "Loop", "Start.", "<l0@cust.test>")])
    await mail_parse.parse_pending(rt, box)
    [(_o, ticket)] = await outcomes(rt, box)
    n = mail_gate.LOOP_REPLIES + 3
    await store(rt, box, [
        mail("loop@cust.test", f"Re: [#{ticket}] Loop", f"Again {i}.", f"<l{i + 1}@cust.test>")
        for i in range(n)
    ])  # fmt: skip
    await mail_parse.parse_pending(rt, box)
    got = [o for o, _ in await outcomes(rt, box)]
    assert got == ["ticket"] + ["reply"] * mail_gate.LOOP_REPLIES + ["automatic"] * 3
    [why] = await q(rt, "SELECT problem FROM inbound_mail WHERE outcome = 'automatic' LIMIT 1")
    assert why.problem.startswith("loop guard")
