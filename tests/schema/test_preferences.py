"""notificationPreferences / setNotificationPreferences: your own, typed answers for odd input."""

from __future__ import annotations

from desk.people import preferences

READ = "{ notificationPreferences { exportReadyEmail reminderEmail } }"
SET = (
    "mutation($e: Boolean, $r: Boolean) { setNotificationPreferences(exportReadyEmail: $e, "
    "reminderEmail: $r) { __typename ... on NotificationPreferences { exportReadyEmail "
    "reminderEmail } ... on ValidationProblem { field message } } }"
)


async def test_read_and_set_your_own(api, rt, world) -> None:
    body = await api(READ, user=world.customer)
    assert body["data"]["notificationPreferences"] == {
        "exportReadyEmail": False,
        "reminderEmail": False,
    }
    body = await api(SET, {"e": True}, user=world.customer)
    got = body["data"]["setNotificationPreferences"]
    assert got == {
        "__typename": "NotificationPreferences",
        "exportReadyEmail": True,
        "reminderEmail": False,
    }
    body = await api(SET, {"r": True}, user=world.customer)  # the other choice stays
    assert body["data"]["setNotificationPreferences"]["exportReadyEmail"] is True
    assert await preferences.get(rt, world.customer) == preferences.Preferences(True, True)
    assert await preferences.get(rt, world.admin) == preferences.Preferences()
    body = await api(READ, user=world.admin)
    assert body["data"]["notificationPreferences"]["exportReadyEmail"] is False


async def test_nothing_to_change_is_a_validation_problem(api, world) -> None:
    body = await api(SET, {}, user=world.staff)
    assert body["data"]["setNotificationPreferences"]["__typename"] == "ValidationProblem"
    assert body["data"]["setNotificationPreferences"]["field"] == "preferences"


async def test_odd_types_are_refused_by_the_schema(api, world) -> None:
    body = await api(SET, {"e": "yes"}, user=world.staff)
    assert body["data"] is None and body["errors"]


async def test_anonymous_is_refused(api) -> None:
    body = await api(READ)
    assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    body = await api(SET, {"e": True})
    assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


async def test_customer_replies_by_mail_are_on_until_turned_off(api, rt, world) -> None:
    read = "{ notificationPreferences { ticketReplyEmail } }"
    body = await api(read, user=world.staff)
    assert body["data"]["notificationPreferences"] == {"ticketReplyEmail": True}
    off = (
        "mutation { setNotificationPreferences(ticketReplyEmail: false) { __typename "
        "... on NotificationPreferences { ticketReplyEmail exportReadyEmail } } }"
    )
    body = await api(off, user=world.staff)
    assert body["data"]["setNotificationPreferences"] == {
        "__typename": "NotificationPreferences", "ticketReplyEmail": False,
        "exportReadyEmail": False,
    }  # fmt: skip
    assert (await preferences.get(rt, world.staff)).ticket_reply_email is False
    assert (await preferences.get(rt, world.admin)).ticket_reply_email is True
