"""import-100k (issues 7, 11): a ticket import of N rows vs PostgreSQL's own `COPY … FROM STDIN`.

Ours: `desk.imports.service.submit_import` (store + accept) and the IMPORT processor run to COMPLETED
in this process (`jobs.execution.execute`, as a worker runs it): parse, validate, resolve
people, upsert in batches with progress under the fence. Baseline (the issue's row): the same
CSV bytes copied into a scratch table with the same columns (no validation, no index); target
ratio ≤ 3. Second baseline (`import-100k-indexed`, information): the same rows, people already
resolved to ids, copied into a table made `LIKE ticket INCLUDING ALL` — ticket's six indexes
(the pg_trgm GIN too) and checks, no foreign keys — which grows run by run as `ticket` does:
what writing those rows costs the database at all. Information row `import-copy-ticket`: the
same COPY into `ticket` itself, whose three foreign keys (team, assignee, creator) are checked
row by row, against the indexed COPY: the part of the gap no import into `ticket` can avoid.
Alternating runs, each on fresh external ids,
in a scratch database of their own (the seeded tickets of `python -m bench` are not touched).

    python -m bench --only import-100k [--runs 3]      (in the table)
    python -m bench.b_import [--rows 100000] [--runs 3]  (alone: skips the table's seeding)
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

import psycopg
import sqlalchemy as sa

from bench import env
from bench.harness import Ctx, alternate, runtime
from bench.stats import Row, Target, table
from desk.imports import service as imports
from jobs.execution import execute
from jobs.processors import registry

COLUMNS = "external_id,title,status,priority,assignee_email,creator_email"


def make_csv(rows: int, tag: str) -> bytes:
    statuses, priorities = ("OPEN", "PENDING", "RESOLVED"), ("LOW", "NORMAL", "HIGH", "URGENT")
    lines = [COLUMNS] + [
        f"{tag}-{i},Imported ticket {i} about invoices,{statuses[i % 3]},{priorities[i % 4]},"
        f"{'chen@acme.test' if i % 2 else ''},lin@acme.test"
        for i in range(rows)
    ]
    return ("\n".join(lines) + "\n").encode()


async def _ours(rt: object, team: int, admin: int, rows: int, run: int) -> float:
    data = make_csv(rows, f"run{run}")
    began = time.perf_counter()
    task = await imports.submit_import(rt, admin, team, "bench.csv", data, "upsert")  # type: ignore[arg-type]
    outcome = await execute(rt, registry(), task.id or 0, task.run)  # type: ignore[arg-type]
    seconds = time.perf_counter() - began
    if outcome != "done":
        raise RuntimeError(f"import ended {outcome}")
    return seconds


async def _copy(url: str, rows: int, run: int) -> float:
    data = make_csv(rows, f"copy{run}")
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(
            "CREATE TEMP TABLE scratch (external_id text, title text, status text, priority text, "
            "assignee_email text, creator_email text)"
        )
        began = time.perf_counter()
        async with conn.cursor().copy("COPY scratch FROM STDIN (FORMAT csv, HEADER true)") as copy:
            await copy.write(data)
        return time.perf_counter() - began


_PEOPLE = (
    "SELECT t.id AS team, (SELECT m.user_id FROM membership m WHERE m.team_id = t.id "
    " AND m.role = 'ADMIN' LIMIT 1) AS admin, "
    " (SELECT id FROM app_user WHERE lower(email) = 'chen@acme.test') AS chen, "
    " (SELECT id FROM app_user WHERE lower(email) = 'lin@acme.test') AS lin "
    "FROM team t WHERE t.name = 'Acme Support'"
)


def _as_ticket_rows(data: bytes, ids: dict[str, int]) -> bytes:
    """The CSV's rows as COPY text for ticket's own columns, people already resolved."""
    people = {"chen@acme.test": str(ids["chen"]), "lin@acme.test": str(ids["lin"]), "": "\\N"}
    out = []
    for line in data.decode().splitlines()[1:]:
        ext, title, status, priority, assignee, creator = line.split(",")
        out.append(
            f"{ids['team']}\t{ext}\t{title}\t{status}\t{priority}\t{people[assignee]}\t{people[creator]}\n"
        )
    return "".join(out).encode()


async def _copy_indexed(
    url: str, rows: int, run: int, ids: dict[str, int], table: str = "bench_ticket_copy"
) -> float:
    payload = _as_ticket_rows(make_csv(rows, f"{table}-{run}"), ids)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        began = time.perf_counter()
        async with conn.cursor().copy(
            f"COPY {table} (team_id, external_id, title, status, priority, assignee_id, "
            "creator_id) FROM STDIN"
        ) as copy:
            await copy.write(payload)
        return time.perf_counter() - began


async def _measure(url: str, redis_url: str, rows: int, runs: int) -> list[Row]:
    settings = env.settings_for(url, redis_url, env.new_prefix("import"))
    indexed: list[float] = []
    into_ticket: list[float] = []
    async with runtime(settings) as rt:
        async with rt.engine.begin() as conn:
            ids = dict((await conn.execute(sa.text(_PEOPLE))).one()._mapping)
            await conn.execute(
                sa.text("CREATE TABLE bench_ticket_copy (LIKE ticket INCLUDING ALL)")
            )

        async def base(i: int) -> float:
            indexed.append(await _copy_indexed(url, rows, i, ids))
            into_ticket.append(await _copy_indexed(url, rows, i, ids, "ticket"))
            return await _copy(url, rows, i)

        a, b = await alternate(runs, lambda i: _ours(rt, ids["team"], ids["admin"], rows, i), base)
    note = f"{rows:,} rows, upsert, batches of {settings.import_batch_rows}"
    return [
        Row("import-100k", "s", a, b, Target("ratio<=", 3.0), note=note),
        Row("import-100k-indexed", "s", a, indexed, Target("ratio<=", 1.4),
            note="baseline: COPY into LIKE ticket INCLUDING ALL (its indexes, no FKs)"),
        Row("import-copy-ticket", "s", into_ticket, indexed,
            note="information: the same COPY into ticket itself (its foreign keys checked)"),
    ]  # fmt: skip


async def import_100k(ctx: Ctx) -> list[Row]:
    """The table's row: a scratch database of its own on the table's servers."""
    runs = ctx.sizes.long_runs
    name, url = await asyncio.to_thread(env.empty_db, ctx.servers, ctx.logs / "import.log")
    try:
        return await _measure(url, ctx.servers.redis_url, 100_000, runs)
    finally:
        await asyncio.to_thread(env.drop_db, ctx.servers, name)


async def measure(rows: int, runs: int) -> list[Row]:
    servers = env.open_servers()
    log = Path("bench/results/import.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    name, url = await asyncio.to_thread(env.empty_db, servers, log)
    try:
        return await _measure(url, servers.redis_url, rows, runs)
    finally:
        env.drop_db(servers, name)
        servers.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.b_import", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(table(asyncio.run(measure(args.rows, args.runs))))


if __name__ == "__main__":
    main()
