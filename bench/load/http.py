"""A small HTTP/1.1 keep-alive client on asyncio streams, for the load drill's simulated people.

httpx spent ~10 ms of CPU per request here, so the load generators ate the CPU the server
needed; this client does the minimum — a pool of keep-alive connections to one host, requests
with Content-Length bodies, responses with Content-Length or chunked bodies — at a fraction of
that cost.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


class HTTPError(Exception):
    def __init__(self, message: str, *, stale: bool = False) -> None:
        super().__init__(message)
        self.stale = stale  # a reused keep-alive connection turned out to be closed


@dataclass
class Response:
    status_code: int
    headers: dict[str, str]
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]
# uvicorn closes a keep-alive connection after 5 s idle; one idle longer than this is not reused
# (as browsers and httpx expire theirs), so a POST never meets a connection closing under it.
IDLE_EXPIRY = 4.0


class Client:
    def __init__(self, base_url: str, connections: int, timeout: float = 30.0) -> None:
        parts = urlsplit(base_url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.timeout = timeout
        self._idle: list[tuple[Conn, float]] = []  # with when each went idle (monotonic)
        self._last: dict[int, int] = {}  # id of an idle connection's writer -> its last status
        self._slots = asyncio.Semaphore(connections)

    async def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes = b""
    ) -> Response:
        async with self._slots:
            self._expire()
            reused = bool(self._idle)
            try:
                return await self._attempt(method, path, headers, body)
            except HTTPError as exc:
                # The server closes idle keep-alive connections (uvicorn: after 5 s); a GET
                # that met such a closed connection is sent again once, on a new one.
                if not (reused and method == "GET" and exc.stale):
                    raise
                self._idle.clear()
                return await self._attempt(method, path, headers, body)

    async def _attempt(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> Response:
        conn, idle_since = self._idle.pop() if self._idle else (None, 0.0)
        fresh = conn is None
        last = self._last.pop(id(conn[1]), 0) if conn else 0
        try:
            if conn is None:
                conn = await asyncio.open_connection(self.host, self.port)
            response = await asyncio.wait_for(
                self._exchange(conn, method, path, headers, body), self.timeout
            )
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
            if conn is not None:
                conn[1].close()
            stale = not fresh and isinstance(exc, (asyncio.IncompleteReadError, OSError))
            idle = time.monotonic() - idle_since
            on = "a new connection" if fresh else f"a connection idle {idle:.0f} s after a {last}"
            if conn is not None:
                on += f" (port {(conn[1].get_extra_info('sockname') or ('', 0))[1]})"
            raise HTTPError(f"{type(exc).__name__} on {on}: {exc}", stale=stale) from exc
        if response.headers.get("connection", "").lower() == "close":
            conn[1].close()
        else:
            self._idle.append((conn, time.monotonic()))
            self._last[id(conn[1])] = response.status_code
        return response

    def _expire(self) -> None:
        cutoff = time.monotonic() - IDLE_EXPIRY
        while self._idle and self._idle[0][1] < cutoff:  # the oldest first: LIFO reuse
            writer = self._idle.pop(0)[0][1]
            self._last.pop(id(writer), None)
            writer.close()

    async def get(self, path: str, headers: dict[str, str]) -> Response:
        return await self.request("GET", path, headers)

    async def post_json(self, path: str, doc: Any, headers: dict[str, str]) -> Response:
        body = json.dumps(doc).encode()
        return await self.request(
            "POST", path, headers | {"Content-Type": "application/json"}, body
        )

    async def _exchange(
        self, conn: Conn, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> Response:
        reader, writer = conn
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        lines.append(f"Content-Length: {len(body)}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(head[0].split(" ", 2)[1])
        got = {}
        for line in head[1:]:
            if line:
                k, _, v = line.partition(":")
                got[k.strip().lower()] = v.strip()
        if "content-length" in got:
            content = await reader.readexactly(int(got["content-length"]))
        elif got.get("transfer-encoding", "").lower() == "chunked":
            content = await _chunked(reader)
        else:
            content = b""
        return Response(status, got, content)

    async def aclose(self) -> None:
        for (_, writer), _ in self._idle:
            writer.close()
        self._idle.clear()


async def _chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
