"""A real `taskdesk serve` stops reading a chunked body at the route's limit (issue 12, point 1):
a 200 MB chunked body to /graphql is neither read into memory nor read to its end."""

from __future__ import annotations

import http.client
from urllib.parse import urlsplit

import pytest

from tests.helpers import serving

pytestmark = pytest.mark.slow  # starts real worker or server processes

CHUNK = b"x" * (64 * 1024)
OFFERED = 200 * 1024 * 1024


def test_chunked_graphql_body_is_cut_off_by_a_real_server(settings, world, tmp_path) -> None:
    with serving(settings, tmp_path / "web.log") as url:
        parts = urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        conn.putrequest("POST", "/graphql")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        sent = 0
        try:
            head = b'{"query": "{ me { id } }", "pad": "'
            conn.send(b"%x\r\n%s\r\n" % (len(head), head))
            while sent < OFFERED:
                conn.send(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
                sent += len(CHUNK)
        except OSError:
            pass  # the server answered and closed the connection: it will not read the rest
        try:
            r = conn.getresponse()
            status, body = r.status, r.read().decode()
        except ConnectionResetError:  # the close overtook the answer: the in-process tests
            status, body = 413, "at most 64 KiB"  # check the answer; this one the cut-off
        conn.close()
        assert status == 413 and "at most 64 KiB" in body, (status, body)
        # Socket buffers take a few MB before the closed connection stops the sender; before,
        # the server read all 200 MB (into memory).
        assert sent < 32 * 1024 * 1024, sent
