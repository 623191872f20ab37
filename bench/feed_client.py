"""Load processes of bench/b_subscribe.py: GraphQL subscribers over real WebSockets, and the plain
LISTEN baseline (docs/architecture.md, "Change feed").

    python -m bench.feed_client subscribe PLAN.json   # PLAN: {"url", "query", "sockets": [...]}
    python -m bench.feed_client listen DSN

Each runs in its own process (one event loop cannot keep a receive time honest for hundreds of
sockets while the bench writes), prints `ready` once every subscription has had its first event
(the task as it is: the subscription listens from then on) or the LISTEN is in place, then
records what arrives until a line comes on stdin, and prints one JSON line:
`{"events": [[task id, progress or seq, receive time], …], …}`. Receive times are
`time.time()` as the message is read, comparable with the writer's on this machine.

The subscriber speaks graphql-transport-ws as a browser client does: `connection_init` (signed in
by the session cookie of the handshake), one `subscribe` per task, `pong` to each `ping`, and no
WebSocket-level pings of its own (browsers send none).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg
from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Subprotocol

CHANNEL = "taskdesk_feed"  # desk/core/feed.py CHANNEL
OPEN_WITHIN = 120.0  # only stops a hang


@dataclass
class Tally:
    events: list[tuple[int, float, float]] = field(default_factory=list)
    first: int = 0  # subscriptions that had their first event
    errors: list[str] = field(default_factory=list)
    pings: int = 0
    all_first: asyncio.Event = field(default_factory=asyncio.Event)


async def _init(ws: ClientConnection) -> None:
    await ws.send(json.dumps({"type": "connection_init", "payload": {}}))
    ack = json.loads(await asyncio.wait_for(ws.recv(), OPEN_WITHIN))
    if ack.get("type") != "connection_ack":
        raise RuntimeError(f"no connection_ack: {ack}")


async def _read(ws: ClientConnection, query: str, ids: list[int], tally: Tally, want: int) -> None:
    """Subscribe to each task, then record every `next` (task, its progress, receive time)."""
    for task in ids:
        payload = {"query": query, "variables": {"id": str(task)}}
        await ws.send(json.dumps({"id": str(task), "type": "subscribe", "payload": payload}))
    fresh = set(ids)
    async for raw in ws:
        now = time.time()
        msg = json.loads(raw)
        kind = msg.get("type")
        if kind == "ping":
            tally.pings += 1
            await ws.send(json.dumps({"type": "pong"}))
        elif kind == "next" and (task := int(msg["id"])) in fresh:
            fresh.discard(task)  # the task as it was: not news
            tally.first += 1
            if tally.first >= want:
                tally.all_first.set()
        elif kind == "next":
            data = (msg["payload"].get("data") or {}).get("taskUpdated") or {}
            tally.events.append((int(msg["id"]), float(data.get("progress", -1)), now))
        else:
            tally.errors.append(str(msg)[:300])


async def _socket(url: str, plan: dict[str, Any], query: str, tally: Tally, want: int) -> None:
    headers = {"Cookie": plan["cookie"]}
    try:
        async with connect(
            url,
            subprotocols=[Subprotocol("graphql-transport-ws")],
            additional_headers=headers,
            open_timeout=OPEN_WITHIN,
            ping_interval=None,
            max_queue=None,
        ) as ws:
            await _init(ws)
            await _read(ws, query, plan["tasks"], tally, want)
    except Exception as exc:  # recorded: the bench fails on any
        tally.errors.append(f"{type(exc).__name__}: {exc}"[:300])


async def _stdin_line() -> str:
    return await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)


async def subscribe(plan: dict[str, Any]) -> dict[str, Any]:
    tally = Tally()
    want = sum(len(s["tasks"]) for s in plan["sockets"])
    runs = [
        asyncio.create_task(_socket(plan["url"], s, plan["query"], tally, want))
        for s in plan["sockets"]
    ]
    began = time.monotonic()
    while not tally.all_first.is_set():  # ends early when a socket fails
        if tally.errors or time.monotonic() - began > OPEN_WITHIN:
            break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(tally.all_first.wait(), 0.2)
    opened = time.monotonic() - began
    print("ready" if tally.all_first.is_set() else "failed", flush=True)
    await _stdin_line()
    for r in runs:
        r.cancel()
    await asyncio.gather(*runs, return_exceptions=True)
    return {
        "events": tally.events,
        "subscribed": tally.first,
        "errors": tally.errors[:20],
        "pings": tally.pings,
        "open_seconds": opened,
    }


async def listen(dsn: str) -> dict[str, Any]:
    """The floor: a plain connection LISTENing to the feed's channel; each task id a notice names
    (its items' first field, migration 0011), with the receive time (seq: its count so far)."""
    events: list[tuple[int, float, float]] = []
    seen: dict[int, int] = {}
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(f"LISTEN {CHANNEL}")
        print("ready", flush=True)
        stop = asyncio.ensure_future(_stdin_line())
        while not stop.done():
            async for n in conn.notifies(timeout=1.0):
                now = time.time()
                if not n.payload.startswith("t:"):
                    continue
                for item in n.payload[2:].split(";"):
                    task = int(item.split(",", 1)[0])
                    seen[task] = seen.get(task, 0) + 1
                    events.append((task, float(seen[task]), now))
    return {"events": events, "errors": []}


def main(argv: list[str]) -> int:
    mode, arg = argv
    if mode == "subscribe":
        with open(arg) as f:
            run = subscribe(json.load(f))
    else:
        run = listen(arg)
    print(json.dumps(asyncio.run(run)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
