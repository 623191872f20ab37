"""`python -m bench.inproc`: the status-read row's CPU per request, in this process, no server.

On a machine shared with other people's benchmarks, wrk's req/s swing with their load; the
process CPU time one request costs (time.process_time) moves much less. This drives the ASGI
apps directly — ours (`api.app.create_app`, `GET /tasks/{id}` with `HX-Request` and a session
cookie) and the baseline (bench/baseline_app.py `GET /task/{id}`) — from 32 concurrent callers
in turns that alternate, and prints CPU µs per request of each and their ratio. uvicorn's own
work (parsing the request, writing the answer) is not in it: the wrk row measures that.

    python -m bench.inproc [--seconds 2] [--turns 5] [--path /watch?bell=-1] [--profile OUT]

`--profile OUT` also writes a cProfile (CPU clock) of ours over one extra turn.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench import env
from bench.harness import load_people, runtime
from bench.web import session_cookie
from desk.work import tasks

CALLERS = 32
Scope = dict[str, Any]


def _scope(path: str, headers: list[tuple[bytes, bytes]]) -> Callable[[], Scope]:
    bare, _, query = path.partition("?")

    def make() -> Scope:  # what uvicorn hands the app: a new scope per request
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "server": ("127.0.0.1", 8000),
            "client": ("127.0.0.1", 50000),
            "scheme": "http",
            "method": "GET",
            "root_path": "",
            "path": bare,
            "raw_path": bare.encode(),
            "query_string": query.encode(),
            "headers": [(b"host", b"127.0.0.1:8000"), *headers],
            "state": {},
        }

    return make


async def _call(app: Any, scope: Scope) -> tuple[int, bytes]:
    got: list[dict[str, Any]] = []
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.sleep(3600)  # as uvicorn: nothing more until the client goes
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        got.append(message)

    await app(scope, receive, send)
    return got[0]["status"], b"".join(m.get("body", b"") for m in got[1:])


async def _turn(app: Any, make: Callable[[], Scope], seconds: float) -> tuple[int, float]:
    """(requests, CPU seconds) of CALLERS concurrent callers for `seconds`."""
    stop = time.monotonic() + seconds
    count = 0

    async def caller() -> None:
        nonlocal count
        while time.monotonic() < stop:
            status, _ = await _call(app, make())
            assert status == 200, status
            count += 1

    began = time.process_time()
    await asyncio.gather(*(caller() for _ in range(CALLERS)))
    return count, time.process_time() - began


def main(args: argparse.Namespace) -> None:
    servers = env.open_servers()
    log = env.PRIVATE_ROOT / "inproc.log"
    name, url = env.empty_db(servers, log)  # migrations run their own event loop
    try:
        settings = env.settings_for(url, servers.redis_url, env.new_prefix("inproc"))
        asyncio.run(_run(args, settings))
    finally:
        env.drop_db(servers, name)
        servers.close()


async def _run(args: argparse.Namespace, settings: Any) -> None:
    async with runtime(settings) as rt:
        people = await load_people(rt)
        task = await tasks.create_export(rt, people.zhou, people.big_team, {"q": "inproc"})
    cookie = session_cookie(settings, people.zhou).encode()
    if args.served:
        await asyncio.to_thread(_served, args, settings, task.id or 0, cookie.decode())
    else:
        await _measure(args, settings, task.id or 0, cookie)


def _served(args: argparse.Namespace, settings: Any, task_id: int, cookie: str) -> None:
    """The same two endpoints under uvicorn, driven by wrk; CPU per request from /proc."""
    from bench.b_http import cpu_seconds
    from bench.web import BASELINE, OURS, check_ok, lua_request, serve, wrk

    path = (args.path or f"/tasks/{task_id}").replace("{id}", str(task_id))
    scripts = {
        "ours": (path, lua_request("GET", {"HX-Request": "true", "Cookie": cookie})),
        "bare": (f"/task/{task_id}", lua_request("GET", {})),
    }
    wenv = env.worker_env(settings)
    logs = env.PRIVATE_ROOT
    prof = {n: (logs / f"profile-{n}.txt" if args.profile else None) for n in scripts}
    with (
        serve(args.ours or OURS, wenv, logs / "inproc-ours.log", prof["ours"]) as ours,
        serve(args.bare or BASELINE, wenv, logs / "inproc-bare.log", prof["bare"]) as bare,
    ):
        served = {"ours": ours, "bare": bare}
        urls = {n: served[n].url + scripts[n][0] for n in scripts}
        for n in scripts:
            wrk(urls[n], scripts[n][1], CALLERS, 1)
        print(f"served: {path}; wrk -c{CALLERS}, {args.seconds:g} s turns")
        us: dict[str, list[float]] = {n: [] for n in scripts}
        rps: dict[str, list[float]] = {n: [] for n in scripts}
        for i in range(args.turns):
            for n in list(scripts)[i % 2 :] + list(scripts)[: i % 2]:
                began = cpu_seconds(served[n].pid)
                got = wrk(urls[n], scripts[n][1], CALLERS, args.seconds)
                check_ok(got, n)
                us[n].append((cpu_seconds(served[n].pid) - began) / got["requests"] * 1e6)
                rps[n].append(got["rps"])
    for n in scripts:
        print(
            f"{n}: {statistics.median(us[n]):.0f} µs/request ({min(us[n]):.0f}-{max(us[n]):.0f}),"
            f" {statistics.median(rps[n]):.0f} req/s"
        )
    print(
        f"bare/ours: CPU {statistics.median(us['bare']) / statistics.median(us['ours']):.2f},"
        f" req/s {statistics.median(rps['ours']) / statistics.median(rps['bare']):.2f}"
    )
    if args.profile:
        print(f"profiles: {prof['ours']} {prof['bare']} (python -m bench.profiling FILE)")


async def _measure(args: argparse.Namespace, settings: Any, task_id: int, cookie: bytes) -> None:
    from api.app import create_app
    from bench import baseline_app

    os.environ |= env.worker_env(settings) | {"DATABASE_URL": settings.database_url}
    os.environ["REDIS_URL"] = settings.redis_url
    ours, base = create_app(settings), baseline_app.create_app()
    path = (args.path or f"/tasks/{task_id}").replace("{id}", str(task_id))
    makers = {
        "ours": _scope(path, [(b"hx-request", b"true"), (b"cookie", cookie)]),
        "bare": _scope(f"/task/{task_id}", []),
    }
    apps = {"ours": ours, "bare": base}
    async with ours.router.lifespan_context(ours), base.router.lifespan_context(base):
        for n in apps:  # warm-up: pools, caches
            await _turn(apps[n], makers[n], 1.0)
        print(f"ours: {path}; {CALLERS} callers, {args.seconds:g} s turns")
        us: dict[str, list[float]] = {n: [] for n in apps}
        for i in range(args.turns):
            for n in list(apps)[i % 2 :] + list(apps)[: i % 2]:
                count, cpu = await _turn(apps[n], makers[n], args.seconds)
                us[n].append(cpu / count * 1e6)
        for n, values in us.items():
            low, high = min(values), max(values)
            print(f"{n}: {statistics.median(values):.0f} µs/request ({low:.0f}-{high:.0f})")
        ratio = statistics.median(us["bare"]) / statistics.median(us["ours"])
        print(f"bare/ours: {ratio:.2f}")
        if args.profile:
            prof = cProfile.Profile(time.process_time)
            prof.enable()
            await _turn(ours, makers["ours"], args.seconds)
            prof.disable()
            prof.dump_stats(args.profile)
            print(f"profile: {args.profile}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m bench.inproc", description=__doc__)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--turns", type=int, default=5)
    p.add_argument("--path", default="", help="ours instead of /tasks/{id} ({id}: the task)")
    p.add_argument("--profile", default="", help="a cProfile of ours into this file")
    p.add_argument("--served", action="store_true", help="under uvicorn, driven by wrk")
    p.add_argument("--ours", default="", help="--served: our app factory (module:function)")
    p.add_argument("--bare", default="", help="--served: the baseline's factory")
    main(p.parse_args())
