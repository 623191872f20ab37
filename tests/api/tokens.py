"""An API token's Authorization header for a test's person."""

from desk.people import users


async def bearer(client, user_id) -> dict[str, str]:
    _, token = await users.create_token(client.rt, user_id, "test")
    return {"Authorization": f"Bearer {token}"}
