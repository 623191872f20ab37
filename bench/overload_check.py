"""Overload check (issue 11): one web process, wrk with 200 connections on the GraphQL status read
while a probe asks once every 100 ms and records each answer's status and latency.
Run: `python -m bench.overload_check <WEB_MAX_IN_FLIGHT> <seconds>` (a scratch database
`acc_overload` on the local server; the figures are in bench/README.md, issue 11)."""

import asyncio
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psycopg

from bench import env
from bench.web import OURS, lua_request, serve, session_cookie, wrk
from desk.core.runtime import Runtime
from desk.work import tasks
from taskdesk import migrate
from tests.factories import make_world

TASK_QUERY = "query Status($id: ID!) { task(id: $id) { id status statusLabel progress } }"
LUA_COUNT = """
counts = {}
response = function(status, headers, body)
  if status ~= 200 and status ~= 503 then bad_total = (bad_total or 0) + 1 end
  if status == 503 then n503 = (n503 or 0) + 1 end
end
"""


def main() -> None:
    limit, seconds = int(sys.argv[1]), float(sys.argv[2])
    db = "acc_overload"
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {db}")
        c.execute(f"CREATE DATABASE {db}")
    url = f"postgresql://postgres@127.0.0.1:5432/{db}"
    migrate.upgrade(url)
    settings = env.settings_for(
        url, "redis://127.0.0.1:6379/0", env.new_prefix("ovl"), web_max_in_flight=limit
    )

    async def prepare() -> tuple[int, int]:
        rt = await Runtime.open(settings)
        try:
            w = await make_world(rt)
            t = await tasks.create_export(rt, w.staff, w.team, {"q": "overload"})
            return w.staff, t.id or 0
        finally:
            await rt.close()

    staff, task_id = asyncio.run(prepare())
    cookie = session_cookie(settings, staff)
    body = json.dumps({"query": TASK_QUERY, "variables": {"id": str(task_id)}})
    lua = lua_request("POST", {"Content-Type": "application/json", "Cookie": cookie}, body)
    with serve(
        OURS, env.worker_env(settings), Path(tempfile.gettempdir()) / "overload-web.log"
    ) as web:
        probes: list[tuple[int, float]] = []
        stop = threading.Event()

        def probe() -> None:
            with httpx.Client(timeout=30) as client:
                while not stop.is_set():
                    began = time.perf_counter()
                    r = client.post(
                        web.url + "/graphql",
                        content=body,
                        headers={"Content-Type": "application/json", "Cookie": cookie},
                    )
                    probes.append((r.status_code, (time.perf_counter() - began) * 1000))
                    if r.status_code == 503:
                        assert r.headers["retry-after"] and "OVERLOADED" in r.text
                    time.sleep(0.1)

        wrk(web.url + "/graphql", lua, 32, 2)  # warm-up
        th = threading.Thread(target=probe)
        th.start()
        before = httpx.get(web.url + "/metrics").text
        got = wrk(web.url + "/graphql", lua, 200, seconds)
        stop.set()
        th.join()
        after = httpx.get(web.url + "/metrics").text
    print(served_quantiles(before, after))
    served = sorted(ms for s, ms in probes if s == 200)
    refused = sorted(ms for s, ms in probes if s == 503)
    print(
        f"WEB_MAX_IN_FLIGHT={limit}: wrk 200 conns {seconds:g}s: {got['rps']:.0f} answers/s, "
        f"non-2xx {got['status']} (503s), timeouts {got['timeout']}, other errors {got['connect'] + got['read'] + got['write']}, "
        f"all-answers p50 {got['p50_us'] / 1000:.0f} ms p99 {got['p99_us'] / 1000:.0f} ms"
    )
    print(
        f"  probe (1 request / 100 ms): {len(served)} served p50 {pct(served, 0.5):.0f} ms p99 {pct(served, 0.99):.0f} ms max {max(served or [0]):.0f} ms; "
        f"{len(refused)} refused (503) p50 {pct(refused, 0.5):.1f} ms max {max(refused or [0]):.1f} ms"
    )


def pct(xs: list[float], p: float) -> float:
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


def buckets(text: str) -> dict[float, float]:
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for fam in text_string_to_metric_families(text):
        for smp in fam.samples:
            if (
                smp.name == "taskdesk_http_request_duration_seconds_bucket"
                and smp.labels.get("method") == "POST"
                and smp.labels.get("status") == "200"
            ):
                out[float(smp.labels["le"])] = smp.value
    return out


def served_quantiles(before: str, after: str) -> str:
    b, a = buckets(before), buckets(after)
    d = sorted((le, a[le] - b.get(le, 0)) for le in a)
    total = d[-1][1]
    res = []
    for q in (0.5, 0.99):
        le = next(le for le, n in d if n >= q * total)
        res.append(f"p{int(q * 100)} <= {le * 1000:g} ms")
    return (
        f"server-side time of the {total:.0f} served /graphql answers (histogram buckets): "
        + ", ".join(res)
    )


if __name__ == "__main__":
    main()
