"""GET /attachments/{id}: a message's file for exactly those who may read the message, always as
a download with headers that keep the browser from rendering or guessing it; anyone else gets
the same 404 as for a file that does not exist."""

from __future__ import annotations

from urllib.parse import unquote

from api.routes import disposition
from desk.helpdesk.attachments import CHUNK, CHUNKS_A_READ
from desk.work import conversation
from tests.api.tokens import bearer
from tests.schema.test_conversation import upload

PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)


async def _thread(client, world) -> tuple[int, int, int]:
    """Lin's file on her question, Chen's file on an internal note, and a staged upload."""
    rt = client.rt
    ticket = world.tickets["login"]
    shot = await upload(rt, world.customer, world.team, '截图 "1".png', PNG)
    await conversation.post_message(rt, world.customer, ticket, "It fails", attachment_ids=[shot])
    secret = await upload(rt, world.staff, world.team, "secret.txt", b"internal")
    await conversation.post_message(
        rt, world.staff, ticket, "Internal", internal=True, attachment_ids=[secret]
    )
    staged = await upload(rt, world.staff, world.team, "draft.txt", b"not sent yet")
    return shot, secret, staged


async def test_who_may_download_each_file(client, world):
    shot, secret, staged = await _thread(client, world)
    allowed = {
        shot: (world.customer, world.staff, world.admin),
        secret: (world.staff, world.admin),
        staged: (world.staff,),
    }
    everyone = (world.admin, world.staff, world.customer, world.customer2, world.outsider)
    for file_id, readers in allowed.items():
        for user in everyone:
            headers = await bearer(client, user)
            got = await client.get(f"/attachments/{file_id}", headers=headers)
            if user in readers:
                assert got.status_code == 200, (file_id, user, got.text)
                continue
            missing = await client.get("/attachments/99999999", headers=headers)
            assert got.status_code == missing.status_code == 404, (file_id, user)
            assert got.json() == missing.json()
    anon = await client.get(f"/attachments/{shot}")
    assert anon.status_code == 401


async def test_download_headers_keep_the_browser_from_rendering(client, world):
    shot, secret, _ = await _thread(client, world)
    got = await client.get(f"/attachments/{shot}", headers=await bearer(client, world.staff))
    assert got.content == PNG
    assert got.headers["content-type"] == "image/png"
    assert got.headers["content-length"] == str(len(PNG))
    assert got.headers["x-content-type-options"] == "nosniff"
    assert got.headers["cache-control"] == "private, no-store"
    assert "sandbox" in got.headers["content-security-policy"]
    cd = got.headers["content-disposition"]
    assert cd.startswith("attachment;")
    assert unquote(cd.split("filename*=UTF-8''")[1]) == '截图 "1".png'
    text = await client.get(f"/attachments/{secret}", headers=await bearer(client, world.staff))
    assert text.content == b"internal"


async def test_files_of_many_chunks_come_back_byte_for_byte(client, world):
    """Files read several chunks a statement: one ending exactly at a read's last chunk, one a
    byte past it, one of a single short chunk — each downloads as it was uploaded."""
    batch = CHUNK * CHUNKS_A_READ
    headers = await bearer(client, world.staff)
    for size in (batch, batch + 1, 2 * batch + CHUNK // 3, 10):
        data = bytes((i * 7 + size) % 251 for i in range(size))
        file_id = await upload(client.rt, world.staff, world.team, f"f{size}.bin", data)
        got = await client.get(f"/attachments/{file_id}", headers=headers)
        assert got.status_code == 200 and got.content == data, size


def test_disposition_keeps_quotes_and_controls_out_of_the_header():
    header = disposition('a"b\\c\r\nSet-Cookie: x.txt')
    assert "\r" not in header and "\n" not in header
    plain = header.split('filename="')[1].split('";')[0]
    assert '"' not in plain and "\\" not in plain
    assert unquote(header.split("filename*=UTF-8''")[1]) == 'a"b\\c\r\nSet-Cookie: x.txt'
