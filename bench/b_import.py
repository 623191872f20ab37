"""import-100k (issue 7): a ticket import of N rows vs PostgreSQL's own `COPY … FROM STDIN`.

Ours: `desk.imports.submit_import` (store + accept) and the IMPORT processor run to COMPLETED
in this process (`jobs.execution.execute`, as a worker runs it): parse, validate, resolve
people, upsert in batches with progress under the fence. Baseline: the same CSV bytes copied
into a scratch table with the same columns (no validation, no index). Alternating runs; each
run imports fresh external ids. Target: ratio ≤ 3 (rows are validated and upserted).

    python -m bench.b_import [--rows 100000] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

import psycopg
import sqlalchemy as sa

from bench import env
from bench.harness import alternate, runtime
from bench.stats import Row, Target, table
from desk import imports
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


async def measure(rows: int, runs: int) -> Row:
    servers = env.open_servers()
    log = Path("bench/results/import.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    name, url = await asyncio.to_thread(env.empty_db, servers, log)
    try:
        settings = env.settings_for(url, servers.redis_url, env.new_prefix("import"))
        async with runtime(settings) as rt:
            async with rt.engine.connect() as conn:
                team, admin = (
                    await conn.execute(
                        sa.text(
                            "SELECT t.id, m.user_id FROM team t JOIN membership m ON m.team_id = t.id "
                            "WHERE t.name = 'Acme Support' AND m.role = 'ADMIN' LIMIT 1"
                        )
                    )
                ).one()
            a, b = await alternate(
                runs, lambda i: _ours(rt, team, admin, rows, i), lambda i: _copy(url, rows, i)
            )
    finally:
        env.drop_db(servers, name)
        servers.close()
    return Row(
        "import-100k", "s", a, b, Target("ratio<=", 3.0),
        note=f"{rows:,} rows, upsert, batches of {settings.import_batch_rows}",
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.b_import", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    row = asyncio.run(measure(args.rows, args.runs))
    print(table([row]))


if __name__ == "__main__":
    main()
