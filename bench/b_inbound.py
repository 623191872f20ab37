"""inbound and fetch-lag (issue 42): mail in against a real IMAP server, a private Dovecot
(tests/imap_server.py, the tests' own), and real worker processes.

`inbound`: N messages (10,000; 1,000 with `--quick`) APPENDed to the Dovecot's INBOX before
timing: 70 % new tickets (four a sender, under INBOUND_FLOOD_MAX), 30 % replies threading by
In-Reply-To to our Message-ID of a ticket made beforehand by the same customer (three a ticket,
under the gate's loop bound). Ours: a new mailbox on that INBOX (its first fetch due at once),
one real worker with its defaults (fetch batches of MAIL_FETCH_BATCH, IDLE on) → every message
parsed (`max(parsed_at) - created`), messages/s; every outcome must be `ticket` or `reply`. The
floor, alternated in the same run: aioimaplib (the library our fetch uses) logs in, selects,
searches and fetches the same messages in the same batches with `BODY.PEEK[]`, and INSERTs each
batch's raw bytes into a scratch table, one commit a batch: messages/s. Target: ratio ≥ 0.5.
`inbound parse rss`: the worker's VmHWM over the run (reset through /proc/PID/clear_refs just
before) minus its VmRSS then; the note gives the peak itself. SMTP_URL is empty: the e-mails
the new tickets and replies queue fail at once (sending them is the e-mail rows' business).

`fetch-lag`: one message APPENDed at a time (a new ticket each), from the APPEND's OK to the
poll (every POLL s) that sees its ticket linked in `inbound_mail`: p50/p99 with IDLE (the
defaults: MAIL_IDLE_SECONDS 60) and with IDLE off (MAIL_IDLE_SECONDS=0) at a cadence of
CADENCE s, the next APPEND a random part of a cadence after the last was seen (so the
appends fall anywhere in the cadence; with IDLE, up to 1 s apart). Targets: p99 ≤ 2 s with IDLE,
≤ cadence + 2 s without.

Each row runs in a scratch database of its own (the table's seeded tickets are not touched).
Before each run and each lag sample the worker has finished every other due task (the demo's
SLA replan and time rules' runs, their e-mails): what is timed is the mail's work.

    python -m bench --only inbound,fetch-lag [--quick]
    python -m bench.b_inbound [--n 1000] [--runs 1] [--lag 10] [--only inbound|fetch-lag]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import random
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import aioimaplib
import psycopg
import sqlalchemy as sa

from bench import env, procs
from bench.harness import FULL, QUICK, Ctx, alternate, runtime, workers
from bench.stats import Row, Target, percentile, table
from desk.core.runtime import Runtime
from desk.helpdesk import tickets
from desk.people import senders
from desk.work import mailboxes
from tests.imap_server import PASSWORD, USER, ImapServer, available

N_FULL, N_QUICK = 10_000, 1_000
LAG_FULL, LAG_QUICK = 30, 6  # fetch-lag samples per mode
NEW_PER_SENDER = 4  # a customer's new tickets (INBOUND_FLOOD_MAX is 20 per window)
REPLIES_PER_TICKET = 3  # the gate calls more than 5 a window a loop
CADENCE = 5  # s: the mailbox's cadence for the no-IDLE lag (the smallest allowed)
POLL = 0.02  # s between looks for the ticket (the lag's resolution)
WITHIN = 1800.0  # s: the longest one inbound run may take


@asynccontextmanager
async def dovecot() -> AsyncIterator[ImapServer]:
    why = available()
    if why:
        raise RuntimeError(why)
    # Not under the results folder: as root, Dovecot's mail process (its own user) must reach it.
    root = Path(tempfile.mkdtemp(prefix="taskdesk-bench-imap-"))
    server = await asyncio.to_thread(ImapServer, root)
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)
        shutil.rmtree(root, ignore_errors=True)


def _mail(sender: str, subject: str, mid: str, in_reply_to: str = "") -> bytes:
    reply = f"In-Reply-To: {in_reply_to}\r\nReferences: {in_reply_to}\r\n" if in_reply_to else ""
    body = "\r\n".join(
        ["Hello,", "", f"about {subject.lower()}: the invoice of last month shows the wrong "
         "amount, and the export of our orders stops halfway.", "", "Thanks,", sender]
    )  # fmt: skip
    return (
        f"From: Customer <{sender}>\r\nTo: help@acme.test\r\nSubject: {subject}\r\n"
        f"Message-ID: {mid}\r\nDate: Mon, 07 Dec 2026 10:00:00 +0000\r\n{reply}"
        f"Content-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n"
    ).encode()


async def _team(rt: Runtime) -> tuple[int, int]:
    """(the big team, one of its admins), as the demo seed made them."""
    async with rt.engine.connect() as conn:
        row = (
            await conn.execute(
                sa.text(
                    "SELECT t.id, (SELECT m.user_id FROM membership m WHERE m.team_id = t.id "
                    " AND m.role = 'ADMIN' ORDER BY m.user_id LIMIT 1) AS admin FROM team t "
                    "WHERE t.name = :n"
                ),
                {"n": env.BIG_TEAM},
            )
        ).one()
    return int(row.id), int(row.admin)


async def _threads(rt: Runtime, team: int, count: int) -> list[tuple[int, str]]:
    """`count` tickets opened beforehand, each by its own customer: (ticket id, address)."""
    out = []
    for k in range(count):
        address = f"thread{k}@cust.test"
        async with rt.engine.begin() as conn:
            user = await senders.customer_for(conn, team, address, f"Thread {k}")
            ticket, _m, _msg = await tickets.insert_ticket(
                conn, rt, user, team, f"Earlier question {k}", "Opened before the run."
            )
        out.append((ticket.id or 0, address))
    return out


def messages(n: int, threads: list[tuple[int, str]]) -> list[bytes]:
    """Three in ten replies (In-Reply-To our Message-ID of a thread's ticket), the rest new."""
    out, replies, new = [], 0, 0
    for i in range(n):
        if i % 10 < 3 and replies < len(threads) * REPLIES_PER_TICKET:
            ticket, address = threads[replies // REPLIES_PER_TICKET]
            ref = f"<taskdesk-ticket-{ticket}-{replies}@desk.acme.test>"
            out.append(_mail(address, f"Re: Earlier question {ticket}", f"<m{i}@cust.test>", ref))
            replies += 1
        else:
            sender = f"new{new // NEW_PER_SENDER}@cust.test"
            out.append(_mail(sender, f"Question {i} about invoices", f"<m{i}@cust.test>"))
            new += 1
    return out


async def _mailbox(rt: Runtime, imap: ImapServer, folder: str, cadence: int = 30) -> int:
    team, admin = await _team(rt)
    async with rt.engine.begin() as conn:
        box = await mailboxes.create(
            conn, rt.settings, team_id=team, created_by_id=admin, host=imap.host, port=imap.port,
            use_tls=False, username=USER, password=PASSWORD, folder=folder,
            cadence_seconds=cadence, now=rt.clock(),
        )  # fmt: skip
    return box.id


async def _switch_off(rt: Runtime, box: int) -> None:
    """Its fetch chain ends (a fetch in IDLE ends at its next wake-up), so runs do not add up."""
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text("UPDATE mailbox SET enabled = false WHERE id = :b"), {"b": box})


async def _parsed(rt: Runtime, box: int, n: int, within: float) -> datetime:
    """When the mailbox's last of `n` messages was parsed."""
    sql = sa.text(
        "SELECT count(*) FILTER (WHERE parsed_at IS NOT NULL) AS done, max(parsed_at) AS last "
        "FROM inbound_mail WHERE mailbox_id = :b"
    )
    deadline = time.monotonic() + within
    done = 0
    while time.monotonic() < deadline:
        async with rt.engine.connect() as conn:
            row = (await conn.execute(sql, {"b": box})).one()
        done = int(row.done)
        if done >= n:
            return row.last  # type: ignore[no-any-return]
        await asyncio.sleep(0.2)
    raise TimeoutError(f"only {done}/{n} messages parsed after {within:.0f} s")


async def _outcomes(rt: Runtime, box: int) -> dict[str, int]:
    async with rt.engine.connect() as conn:
        found = await conn.execute(
            sa.text(
                "SELECT coalesce(outcome, '-') AS o, count(*) AS c FROM inbound_mail "
                "WHERE mailbox_id = :b GROUP BY 1"
            ),
            {"b": box},
        )
        return {r.o: int(r.c) for r in found}


# What else the demo's data has the worker do (its SLA policy's team replan, its time rules'
# runs, their e-mails): let it finish before a run, so the run is the mail's work alone.
_BUSY = sa.text(
    "SELECT count(*) FROM background_task WHERE kind NOT IN ('MAIL_FETCH', 'MAIL_PARSE') "
    "AND (status = 'RUNNING' OR (status = 'WAITING' AND run_at <= now()))"
)


async def settled(rt: Runtime, within: float = 300) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        async with rt.engine.connect() as conn:
            if not (await conn.execute(_BUSY)).scalar_one():
                return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"the worker still busy with other tasks after {within:.0f} s")


async def _ours(
    rt: Runtime, imap: ImapServer, worker: procs.Proc, n: int, rss: list[dict[str, float]]
) -> float:
    await settled(rt)
    before = procs.proc_status(worker.pid)["VmRSS"]
    procs.reset_peak_rss(worker.pid)
    began = datetime.now(UTC)
    box = await _mailbox(rt, imap, "INBOX")
    last = await _parsed(rt, box, n, WITHIN)
    peak = procs.proc_status(worker.pid)["VmHWM"]
    await _switch_off(rt, box)
    got = await _outcomes(rt, box)
    if set(got) - {"ticket", "reply"}:
        raise RuntimeError(f"not every message became a ticket or a reply: {got}")
    rss.append({"growth_mb": (peak - before) / 1024, "peak_mb": peak / 1024, **got})
    return n / (last - began).total_seconds()


async def _floor(url: str, imap: ImapServer, n: int, batch: int, run: int) -> float:
    """Bare: aioimaplib fetch of the same messages in the same batches, INSERT each batch."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        table_ = f"bench_inbound_raw_{run}"
        await conn.execute(f"CREATE TABLE {table_} (uid bigint, raw bytea)")
        await conn.commit()
        began = time.perf_counter()
        client = aioimaplib.IMAP4(imap.host, imap.port, timeout=30)
        await client.wait_hello_from_server()
        await client.login(USER, PASSWORD)
        await client.select("INBOX")
        found = await client.uid_search("UID 1:*")
        uids = [u for line in found.lines[:-1] for u in map(int, bytes(line).split())]
        stored = 0
        for start in range(0, len(uids), batch):
            part = ",".join(map(str, uids[start : start + batch]))
            got = await client.uid("fetch", part, "(UID BODY.PEEK[])")
            raws = [bytes(line) for line in got.lines if isinstance(line, bytearray)]
            await conn.execute(
                f"INSERT INTO {table_} SELECT u, r FROM unnest(%s::bigint[], %s::bytea[]) x(u, r)",
                (list(range(stored, stored + len(raws))), raws),
            )
            await conn.commit()
            stored += len(raws)
        seconds = time.perf_counter() - began
        await client.logout()
        await conn.execute(f"DROP TABLE {table_}")
        await conn.commit()
    if stored != n:
        raise RuntimeError(f"the floor fetched {stored} of {n} messages")
    return n / seconds


@asynccontextmanager
async def scratch(ctx: Ctx, tag: str) -> AsyncIterator[tuple[Ctx, Runtime]]:
    """A database of its own (demo people only) and a runtime on it."""
    name, url = await asyncio.to_thread(env.empty_db, ctx.servers, ctx.log(f"{tag}-db.log"))
    own = dataclasses.replace(ctx, db_name=name, db_url=url)
    try:
        async with runtime(own.settings(tag)) as rt:
            yield own, rt
    finally:
        await asyncio.to_thread(env.drop_db, ctx.servers, name)


async def measure_inbound(ctx: Ctx, n: int, runs: int) -> list[Row]:
    async with scratch(ctx, "inbound") as (own, rt), dovecot() as imap:
        team, _admin = await _team(rt)
        threads = await _threads(rt, team, -(-n * 3 // 10) // REPLIES_PER_TICKET)
        await asyncio.to_thread(imap.append_many, messages(n, threads))
        rss: list[dict[str, float]] = []
        async with workers(own, rt, "inbound") as [worker]:
            ours, base = await alternate(
                runs,
                lambda _i: _ours(rt, imap, worker, n, rss),
                lambda i: _floor(own.db_url, imap, n, rt.settings.mail_fetch_batch, i),
            )
    peak = max(r["peak_mb"] for r in rss)
    return [
        Row("inbound", "msgs/s", ours, base, Target("ratio>=", 0.5),
            note=f"{n:,} messages in a Dovecot INBOX, 30 % replies by In-Reply-To, one real "
            "worker: mailbox made -> last parsed; floor: aioimaplib fetch in the same batches "
            "+ INSERT of the raw bytes, one commit a batch", extra={"runs": rss}),
        Row("inbound parse rss", "MB", [r["growth_mb"] for r in rss],
            note=f"the worker's VmHWM over the run minus its VmRSS before; peak {peak:.0f} MB"),
    ]  # fmt: skip


async def _append(imap: ImapServer, folder: str, raw: bytes) -> float:
    def put() -> float:
        with imap.client() as client:
            typ, said = client.append(folder, "", None, raw)
            if typ != "OK":
                raise RuntimeError(f"APPEND refused: {said!r}")
            return time.monotonic()

    return await asyncio.to_thread(put)


async def _seen(rt: Runtime, box: int, mid: str, within: float = 60) -> float:
    sql = sa.text(
        "SELECT 1 FROM inbound_mail WHERE mailbox_id = :b AND message_id = :m "
        "AND ticket_id IS NOT NULL"
    )
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        async with rt.engine.connect() as conn:
            if (await conn.execute(sql, {"b": box, "m": mid})).first() is not None:
                return time.monotonic()
        await asyncio.sleep(POLL)
    raise TimeoutError(f"{mid} made no ticket within {within:.0f} s")


async def _lags(
    rt: Runtime, imap: ImapServer, folder: str, samples: int, cadence: int, pace_s: float
) -> list[float]:
    """Seconds from each APPEND's OK to its ticket seen; a warm-up message first, not counted."""
    await asyncio.to_thread(_create_folder, imap, folder)
    box = await _mailbox(rt, imap, folder, cadence)
    pace = random.Random(42)
    out: list[float] = []
    try:
        for i in range(samples + 1):
            mid = f"<lag-{folder}-{i}@cust.test>"
            raw = _mail(f"lag{i}@cust.test", f"Lag {folder} {i}", mid)
            await settled(rt)
            appended = await _append(imap, folder, raw)
            seen = await _seen(rt, box, mid, within=cadence + 60)
            if i:
                out.append(seen - appended)
            await asyncio.sleep(pace.uniform(0, pace_s))  # pacing: anywhere in the cadence
    finally:
        await _switch_off(rt, box)
    return out


def _create_folder(imap: ImapServer, folder: str) -> None:
    with imap.client() as client:
        client.create(folder)


async def measure_lag(ctx: Ctx, samples: int) -> list[Row]:
    async with scratch(ctx, "fetchlag") as (own, rt), dovecot() as imap:
        async with workers(own, rt, "lag-idle"):
            idle = await _lags(rt, imap, "lagidle", samples, 30, 1.0)
        async with workers(own, rt, "lag-poll", mail_idle_seconds=0):
            poll = await _lags(rt, imap, "lagpoll", samples, CADENCE, CADENCE)
    ms = [x * 1000 for x in idle]
    mp = [x * 1000 for x in poll]
    note = f"{samples} messages, APPEND OK -> ticket seen (polled every {POLL * 1000:.0f} ms)"
    return [
        Row("fetch-lag idle p50", "ms", [percentile(ms, 50)], note=note + "; IDLE on",
            extra={"lags_ms": ms}),
        Row("fetch-lag idle p99", "ms", [percentile(ms, 99)], target=Target("value<=", 2000)),
        Row("fetch-lag no-idle p50", "ms", [percentile(mp, 50)],
            note=f"MAIL_IDLE_SECONDS=0, cadence {CADENCE} s", extra={"lags_ms": mp}),
        Row("fetch-lag no-idle p99", "ms", [percentile(mp, 99)],
            target=Target("value<=", (CADENCE + 2) * 1000)),
    ]  # fmt: skip


async def inbound(ctx: Ctx) -> list[Row]:
    return await measure_inbound(ctx, N_QUICK if ctx.quick else N_FULL, ctx.sizes.long_runs)


async def fetch_lag(ctx: Ctx) -> list[Row]:
    return await measure_lag(ctx, LAG_QUICK if ctx.quick else LAG_FULL)


async def _alone(args: argparse.Namespace) -> list[Row]:
    servers = await asyncio.to_thread(env.open_servers)
    logs = env.ROOT / "bench" / "results" / "logs" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    logs.mkdir(parents=True, exist_ok=True)
    ctx = Ctx(args.quick, QUICK if args.quick else FULL, servers, "", "", logs)
    try:
        rows: list[Row] = []
        if args.only in ("", "inbound"):
            rows += await measure_inbound(ctx, args.n, args.runs)
        if args.only in ("", "fetch-lag"):
            rows += await measure_lag(ctx, args.lag)
        return rows
    finally:
        await asyncio.to_thread(servers.close)


def main() -> None:
    p = argparse.ArgumentParser(
        prog="python -m bench.b_inbound", description=__doc__.split("\n")[0]
    )
    p.add_argument("--n", type=int, default=N_FULL, help="messages for inbound")
    p.add_argument("--runs", type=int, default=1, help="alternations of ours and the floor")
    p.add_argument("--lag", type=int, default=LAG_FULL, help="fetch-lag samples per mode")
    p.add_argument("--only", default="", choices=["", "inbound", "fetch-lag"])
    p.add_argument("--quick", action="store_true")
    print(table(asyncio.run(_alone(p.parse_args()))))


if __name__ == "__main__":
    main()
