"""Web servers under test and the HTTP load tool.

`serve()` runs an ASGI app factory (ours: `api.app:create_app`; the baseline:
`bench.baseline_app:create_app`) in its own uvicorn process on a free loopback port — one
process, no access log, the same flags for both. `wrk()` drives it from another process (wrk,
one thread, N connections, a fixed duration) and returns its summary. `session_cookie()` signs a
user in the way the sign-in page does (a web_session row, as tests/sessions.py makes).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench import procs
from bench.profiling import recording
from desk.core.settings import Settings

# What `taskdesk serve` runs (the process's collector settings included), logging warnings and up
# as the uvicorn flags below say: every benchmark of ours serves this.
OURS = "api.app:create_served_app"
BASELINE = "bench.baseline_app:create_app"

DONE_LUA = """
threads = {}
setup = function(thread) table.insert(threads, thread) end
done = function(summary, latency, requests)
  local e = summary.errors
  local bad = 0
  for _, t in ipairs(threads) do bad = bad + (t:get("bad_total") or 0) end
  io.write(string.format(
    '\\n{"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,'
    .. '"timeout":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"bad":%d}\\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, bad))
end
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Served:
    url: str  # base URL, no trailing slash
    pid: int


@contextmanager
def serve(
    factory: str,
    env: dict[str, str],
    log: Path,
    profile: Path | None = None,
    processes: int = 1,
    ready_within: float = 60,
) -> Iterator[Served]:
    """Run `factory` under uvicorn; yields its base URL and pid once it answers (within
    `ready_within` seconds), and profiles it into `profile` while in use, when given."""
    port = free_port()
    args = [sys.executable, "-m", "uvicorn", factory, "--factory", "--host", "127.0.0.1"]
    args += ["--port", str(port), "--log-level", "warning", "--no-access-log"]
    if processes > 1:
        args += ["--workers", str(processes)]
    if factory == OURS:
        env = {"LOG_LEVEL": "WARNING", **env}
    proc = procs.Proc(args, env, log)
    base = f"http://127.0.0.1:{port}"
    try:
        procs.wait_until(
            lambda: _answers(base) or not proc.alive(), ready_within, f"{factory} on {port}"
        )
        if not proc.alive():
            raise RuntimeError(f"{factory} exited; see {log}")
        with recording(proc.pid, profile):
            yield Served(base, proc.pid)
    finally:
        proc.stop()


def _answers(base: str) -> bool:
    try:
        httpx.get(base + "/__bench_ready__", timeout=1.0)
    except httpx.HTTPError:
        return False
    return True


def session_cookie(settings: Settings, user_id: int) -> str:
    """`taskdesk_session=…` for `user_id`, signed with the app's key as at sign-in."""
    from tests.sessions import cookie_header  # a server-side session row, as at sign-in

    return cookie_header(settings, user_id)


def lua_request(method: str, headers: dict[str, str], body: str | None = None) -> str:
    lines = [f'wrk.method = "{method}"']
    lines += [f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in headers.items()]
    if body is not None:
        lines.append(f"wrk.body = {json.dumps(body)}")
    return "\n".join(lines) + "\n"


def wrk(url: str, lua: str, connections: int, seconds: float) -> dict[str, Any]:
    """One wrk run (1 thread); its summary with requests/s added."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(lua + DONE_LUA)
        script = f.name
    try:
        done = subprocess.run(
            [
                "wrk",
                "-t1",
                f"-c{connections}",
                f"-d{seconds:g}s",
                "--timeout",
                "10s",
                "-s",
                script,
                url,
            ],
            capture_output=True,
            text=True,
            timeout=seconds + 60,
        )
    finally:
        Path(script).unlink(missing_ok=True)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed: {done.stderr[-2000:]}")
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    out["rps"] = out["requests"] / (out["duration_us"] / 1e6)
    out["errors"] = sum(out[k] for k in ("connect", "read", "write", "status", "timeout"))
    out["errors"] += out["bad"]
    return out


def check_ok(result: dict[str, Any], what: str) -> None:
    if result["errors"]:
        raise RuntimeError(f"{what}: {result['errors']} failed requests under load ({result})")
