"""Test helpers: wait on a condition with a deadline, run a task as a worker would (in this
process), and run real worker processes."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import httpx

from desk.console import task_admin
from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.work import tasks
from jobs.execution import execute
from jobs.processors import registry

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")

# Deadlines only stop hangs: every `wait_for` waits this many times its stated timeout, so a
# busy machine (two xdist processes on two shared cores, worker processes starting) does not
# turn slowness into failures. TASKDESK_TEST_PATIENCE=1 gives the stated times.
PATIENCE = float(os.environ.get("TASKDESK_TEST_PATIENCE", "3"))


async def wait_for(
    probe: Callable[[], Awaitable[T]],
    *,
    timeout: float = 20.0,
    interval: float = 0.05,
    what: str = "condition",
) -> T:
    """Poll `probe` until it returns something truthy; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout * PATIENCE
    last: T | None = None
    while time.monotonic() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(
        f"timed out after {timeout * PATIENCE:g}s waiting for {what} (last value: {last!r})"
    )


async def run_task(rt: Runtime, task_id: int) -> None:
    """What a worker does with the task's message, in this process."""
    row = await task_admin.get(rt, task_id)
    assert await execute(rt, registry(), task_id, row.run) == "done"


async def export_over_the_limit(rt: Runtime, user_id: int, team_id: int, limit: int) -> int:
    """An export of every ticket of the team, run here with EXPORT_MAX_ROWS at `limit` (below
    the team's count): it fails at once. Returns its id."""
    task = await tasks.create_export(rt, user_id, team_id, {})
    rt.settings = rt.settings.model_copy(update={"export_max_rows": limit})
    assert await execute(rt, registry(), task.id or 0, task.run) == "failed"
    return task.id or 0


def settings_env(settings: Settings, **overrides: object) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL"))}
    env |= {
        "TASKDESK_ENV": "test",
        "DATABASE_URL": settings.database_url,
        "REDIS_URL": settings.redis_url,
        "QUEUE_PREFIX": settings.queue_prefix,
        "SECRET_KEY": settings.secret_key,
        "PYTHONUNBUFFERED": "1",
    }
    env |= {k.upper(): str(v) for k, v in overrides.items()}
    return env


class WorkerProcess:
    """A real `taskdesk worker` process (python -m jobs.worker), logging to a file."""

    def __init__(self, settings: Settings, log_path: Path, **overrides: object) -> None:
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jobs.worker"],
            cwd=ROOT,
            env=settings_env(settings, **overrides),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """kill -9: no goodbye, no cleanup."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self) -> None:
        self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout: float = 30.0) -> int:
        return self.proc.wait(timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


@contextmanager
def running_workers(
    settings: Settings, tmp_path: Path, count: int = 1, **overrides: object
) -> Iterator[list[WorkerProcess]]:
    workers = [
        WorkerProcess(settings, tmp_path / f"worker{i}.log", **overrides) for i in range(count)
    ]
    try:
        yield workers
    finally:
        for w in workers:
            w.stop()


def wait_until(
    condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.1
) -> None:
    """The blocking twin of `wait_for`, for fixtures outside the event loop (a starting process)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        httpx.get(f"{url}/health", timeout=1)
    except httpx.TransportError:
        return False
    return True


@contextmanager
def serving(settings: Settings, log_path: Path) -> Iterator[str]:
    """A real `taskdesk serve` on a free port with the test's settings; yields its URL once it
    answers (or fails with its log if it died)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "taskdesk", "serve", "--port", str(port), "--log-level", "warning"],
            cwd=ROOT, env=settings_env(settings), stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        wait_until(lambda: proc.poll() is not None or _answers(url), 180, f"{url} to answer")
        if proc.poll() is not None:
            raise AssertionError("server did not start:\n" + log_path.read_text())
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Upload:
    """An upload's bytes, read as Starlette's UploadFile reads them (a post reads each file
    again from its start when its transaction runs again)."""

    def __init__(self, data: bytes) -> None:
        self.buf = io.BytesIO(data)

    async def read(self, size: int = -1) -> bytes:
        return self.buf.read(size)

    async def seek(self, at: int) -> None:
        self.buf.seek(at)
