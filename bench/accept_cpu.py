"""CPU time of the web process per accepted export (createExport, 16 wrk connections, 16 staff
of one team): load-independent where wall-clock latency is not. Run from the tree to measure:
`python -m bench.accept_cpu <seconds>` (a scratch database named after the tree's folder)."""

import asyncio
import os
import sys
import tempfile
from pathlib import Path

import psycopg

from bench import env
from bench.b_http import TRIGGER_CONNECTIONS, _trigger_script, staff_people
from bench.web import OURS, serve, session_cookie, wrk
from desk.runtime import Runtime
from taskdesk import migrate
from tests.factories import make_world


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    seconds = float(sys.argv[1])
    db = "acc_cpu_" + Path.cwd().name.replace("-", "_")
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {db}")
        c.execute(f"CREATE DATABASE {db}")
    url = f"postgresql://postgres@127.0.0.1:5432/{db}"
    migrate.upgrade(url)
    settings = env.settings_for(url, "redis://127.0.0.1:6379/0", env.new_prefix("cpu"))

    async def prepare() -> tuple[int, list[int]]:
        rt = await Runtime.open(settings)
        try:
            w = await make_world(rt)
            return w.team, await staff_people(rt, w.team, TRIGGER_CONNECTIONS)
        finally:
            await rt.close()

    team, people = asyncio.run(prepare())
    cookies = [session_cookie(settings, u) for u in people]
    with serve(
        OURS, env.worker_env(settings), Path(tempfile.gettempdir()) / f"cpu-{db}.log"
    ) as web:
        wrk(web.url + "/graphql", _trigger_script(team, cookies, "warm"), TRIGGER_CONNECTIONS, 2)
        before = cpu_seconds(web.pid)
        got = wrk(
            web.url + "/graphql",
            _trigger_script(team, cookies, "run"),
            TRIGGER_CONNECTIONS,
            seconds,
        )
        used = cpu_seconds(web.pid) - before
    assert got["errors"] == 0, got
    print(
        f"{Path.cwd()}: {got['requests']} accepts in {seconds:g} s ({got['rps']:.0f}/s), "
        f"web CPU {used:.2f} s = {1000 * used / got['requests']:.2f} ms per accept; "
        f"p50 {got['p50_us'] / 1000:.0f} ms p99 {got['p99_us'] / 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
