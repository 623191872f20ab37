"""CPU time of the web process per accepted export (createExport, 16 wrk connections, 16 staff
of one team): load-independent where wall-clock latency is not. Run from the tree to measure:
`python -m bench.accept_cpu <seconds> [floor]` (a scratch database on the bench's own servers,
bench/env.py: private ones under .taskdesk/bench/ unless TEST_DATABASE_URL/DATABASE_URL say
otherwise). With `floor`, the same for bench/baseline_app.py's accept (the trigger's floor)."""

import asyncio
import sys
import tempfile
from pathlib import Path

from bench import env
from bench.b_http import TRIGGER_CONNECTIONS, _trigger_script, staff_people
from bench.procs import cpu_seconds
from bench.web import BASELINE, OURS, serve, session_cookie, wrk
from desk.core.runtime import Runtime
from desk.core.settings import Settings
from taskdesk import migrate
from tests.factories import make_world


def main() -> None:
    seconds = float(sys.argv[1])
    app = BASELINE if sys.argv[2:] == ["floor"] else OURS
    servers = env.open_servers()
    db = "taskdesk_bench_run_cpu_" + Path.cwd().name.replace("-", "_")
    try:
        url = env.create_db(servers, db)
        migrate.upgrade(url)
        settings = env.settings_for(url, servers.redis_url, env.new_prefix("cpu"))
        measure(settings, seconds, app, db)
    finally:
        env.drop_db(servers, db)
        servers.close()


def measure(settings: Settings, seconds: float, app: str, db: str) -> None:
    async def prepare() -> tuple[int, list[int]]:
        rt = await Runtime.open(settings)
        try:
            w = await make_world(rt)
            return w.team, await staff_people(rt, w.team, TRIGGER_CONNECTIONS)
        finally:
            await rt.close()

    team, people = asyncio.run(prepare())
    cookies = [session_cookie(settings, u) for u in people]
    web_env = env.worker_env(settings)
    with serve(app, web_env, Path(tempfile.gettempdir()) / f"cpu-{db}.log") as web:
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
        f"{Path.cwd()} ({app}): {got['requests']} accepts in {seconds:g} s ({got['rps']:.0f}/s), "
        f"web CPU {used:.2f} s = {1000 * used / got['requests']:.2f} ms per accept; "
        f"p50 {got['p50_us'] / 1000:.0f} ms p99 {got['p99_us'] / 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
