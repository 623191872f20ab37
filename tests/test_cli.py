"""The `taskdesk` command, run as a real process: help texts, configuration errors, migrate and
seed against a database given by environment variables, and `taskdesk dev` end to end."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from taskdesk.cli import build_parser, main
from taskdesk.embedded import PostgresServer, RedisServer
from tests.conftest import Servers
from tests.helpers import free_port, wait_until

ROOT = Path(__file__).resolve().parent.parent
SUBCOMMANDS = sorted(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]


def clean_env(**values: str) -> dict[str, str]:
    """This process's environment without any taskdesk setting, plus `values`."""
    drop = ("DATABASE_URL", "REDIS_URL", "TEST_DATABASE_URL", "TEST_REDIS_URL", "TASKDESK_ENV",
            "SECRET_KEY", "QUEUE_PREFIX", "DATA_DIR")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k.upper() not in drop}
    return env | {"PYTHONUNBUFFERED": "1"} | values


def taskdesk(
    *args: str, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "taskdesk", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_top_level_help_from_module_and_console_script() -> None:
    for argv in (
        [sys.executable, "-m", "taskdesk"],
        [str(Path(sys.executable).parent / "taskdesk")],
    ):
        done = subprocess.run([*argv, "--help"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        for name in ("dev", "serve", "worker", "migrate", "seed"):
            assert f"    {name} " in done.stdout


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_each_subcommand_has_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0
    assert f"usage: taskdesk {name}" in capsys.readouterr().out


def test_config_error_exits_2_with_the_message() -> None:
    done = taskdesk("migrate", env=clean_env(REDIS_URL="ftp://nope", LEASE_SECONDS="soon"))
    assert done.returncode == 2
    assert "REDIS_URL" in done.stderr and "LEASE_SECONDS" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", ["serve", "worker", "migrate", "seed"])
def test_no_url_and_no_dev_servers_says_what_to_do(command: str, tmp_path: Path) -> None:
    done = taskdesk(command, "--data-dir", str(tmp_path / "none"), env=clean_env())
    assert done.returncode == 2
    assert "DATABASE_URL is not set: run `taskdesk dev`, or set it" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.fixture
def empty_database(servers: Servers) -> Iterator[str]:
    name = f"taskdesk_cli_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(servers.admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield servers.db_url(name)
    with psycopg.connect(servers.admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_migrate_then_seed_through_the_environment(empty_database: str, servers: Servers) -> None:
    env = clean_env(DATABASE_URL=empty_database, REDIS_URL=servers.redis_url, TASKDESK_ENV="test")
    migrated = taskdesk("migrate", env=env)
    assert migrated.returncode == 0, migrated.stderr
    seeded = taskdesk("seed", env=env)
    assert seeded.returncode == 0, seeded.stderr
    assert "created 2 teams, 7 users, 7 memberships, 230 tickets" in seeded.stderr
    again = taskdesk("seed", env=env)
    assert "created 0 teams, 0 users, 0 memberships, 0 tickets" in again.stderr
    bulk = taskdesk("seed", "--tickets", "1_000", "--team", "Globex", env=env)
    assert bulk.returncode == 0, bulk.stderr
    assert "added 1,000 tickets to 'Globex'" in bulk.stderr
    with psycopg.connect(empty_database) as conn:
        row = conn.execute(
            "SELECT count(*) FROM ticket k JOIN team t ON t.id = k.team_id WHERE t.name = 'Globex'"
        ).fetchone()
    assert row == (1030,)


def test_seed_refuses_demo_passwords_in_prod(empty_database: str, servers: Servers) -> None:
    env = clean_env(
        DATABASE_URL=empty_database,
        REDIS_URL=servers.redis_url,
        TASKDESK_ENV="prod",
        SECRET_KEY="a-real-secret-of-sufficient-length",
    )
    done = taskdesk("seed", env=env)
    assert done.returncode == 2 and "--allow-prod" in done.stderr


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "data"
    yield root
    # As root, the launcher keeps clusters where the `postgres` user can reach them.
    moved = PostgresServer(root / "pg").root
    if moved.parent == Path("/var/tmp"):
        shutil.rmtree(moved, ignore_errors=True)


def start_dev(
    data_dir: Path, tmp_path: Path, *args: str, cwd: Path = ROOT
) -> tuple[subprocess.Popen[bytes], str]:
    """`taskdesk dev` on a free port with no URLs set; returns once its banner is out."""
    port = free_port()
    out, err = tmp_path / "dev.out", tmp_path / "dev.err"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen(
            [sys.executable, "-m", "taskdesk", "dev", "--port", str(port), "--data-dir", str(data_dir), *args],
            cwd=cwd, env=clean_env(), stdout=o, stderr=e, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_until(lambda: answers(url) or proc.poll() is not None, 120, f"{url} to answer")
        assert proc.poll() is None, err.read_text()
        wait_until(lambda: "Press Ctrl-C" in out.read_text(), 10, "the banner")
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, url


def child_running(pid: int, word: str) -> int:
    """The pid of `pid`'s child process whose command line has `word` (Linux /proc)."""
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        if word.encode() in Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0"):
            return int(child)
    raise AssertionError(f"no child of {pid} runs {word!r}")


@pytest.mark.slow
def test_dev_comes_up_and_stops_only_what_it_started(data_dir: Path, tmp_path: Path) -> None:
    # A Redis that is already running there: dev must use it and leave it running.
    redis_there = RedisServer(data_dir / "redis", persist=False)
    redis_there.start()
    out, err = tmp_path / "dev.out", tmp_path / "dev.err"
    proc = None
    try:
        proc, url = start_dev(data_dir, tmp_path)
        banner = out.read_text()
        assert (
            f"{url}graphql" in banner and "zhou@acme.test" in banner and "taskdesk-demo" in banner
        )
        assert PostgresServer(data_dir / "pg").running()

        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0, err.read_text()
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        still_running = redis_there.running()
        redis_there.stop()
    assert not PostgresServer(data_dir / "pg").running(), "dev stops the PostgreSQL it started"
    assert still_running, "dev leaves alone the Redis it found running"
    assert "Traceback" not in err.read_text()


@pytest.mark.slow
def test_dev_stops_everything_when_a_child_dies(data_dir: Path, tmp_path: Path) -> None:
    proc, _ = start_dev(data_dir, tmp_path, "--no-worker")
    try:
        web = child_running(proc.pid, "serve")
        os.kill(web, signal.SIGKILL)
        assert proc.wait(timeout=60) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (
        f"the web server (pid {web}) was killed by SIGKILL; stopping the rest"
        in (tmp_path / "dev.err").read_text()
    )
    assert not PostgresServer(data_dir / "pg").running()
    assert not RedisServer(data_dir / "redis").running()


def health(url: str) -> dict[str, object]:
    try:
        with urllib.request.urlopen(f"{url}health", timeout=5) as r:
            return dict(json.load(r))
    except urllib.error.HTTPError as exc:  # 503 while no worker is alive: still a report
        return dict(json.load(exc))


def worker_pids(url: str) -> set[int]:
    """The pids of the workers whose heartbeat /health sees."""
    details = health(url).get("worker_details") or []
    assert isinstance(details, list)
    return {int(w["pid"]) for w in details}


@pytest.mark.slow
def test_dev_restarts_a_killed_worker_and_keeps_the_rest_running(
    data_dir: Path, tmp_path: Path
) -> None:
    # Started from `home` with --data-dir elsewhere: commands run from `home` without flags
    # must still find its servers.
    home = tmp_path / "home"
    home.mkdir()
    proc, url = start_dev(data_dir, tmp_path, cwd=home)
    err = tmp_path / "dev.err"
    try:
        first = child_running(proc.pid, "worker")
        assert f"worker     pid {first}" in (tmp_path / "dev.out").read_text()
        wait_until(lambda: first in worker_pids(url), 60, "the worker's heartbeat")
        os.kill(first, signal.SIGKILL)

        wait_until(lambda: "restarting it in 1 s" in err.read_text(), 30, "the restart notice")
        assert f"the worker (pid {first}) was killed by SIGKILL; restarting it" in err.read_text()
        wait_until(lambda: "is running again" in err.read_text(), 30, "the restarted worker")
        second = child_running(proc.pid, "worker")
        assert second != first
        wait_until(lambda: second in worker_pids(url), 60, "the new worker's heartbeat")
        assert proc.poll() is None and answers(url), "web keeps answering"
        assert (
            PostgresServer(data_dir / "pg").running() and RedisServer(data_dir / "redis").running()
        )

        # A second worker, and seed, from the folder dev was started in: no flags, no URLs.
        seeded = subprocess.run(
            [sys.executable, "-m", "taskdesk", "seed"], cwd=home, env=clean_env(),
            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert seeded.returncode == 0, seeded.stderr
        assert "using the dev server" in seeded.stderr and "created 0 teams" in seeded.stderr
        extra = subprocess.Popen(
            [sys.executable, "-m", "taskdesk", "worker"], cwd=home, env=clean_env(),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            wait_until(lambda: extra.pid in worker_pids(url), 60, "the second worker's heartbeat")
        finally:
            extra.terminate()
            extra.wait(60)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=90)
    assert not (home / ".taskdesk" / "dev.json").exists(), "dev removes its pointer on exit"
    assert "Traceback" not in err.read_text()


def readme_commands() -> list[str]:
    """Every `taskdesk …` command README shows (inline or in a code block), placeholders filled."""
    readme = (ROOT / "README.md").read_text()
    spans = re.findall(r"`((?:\.venv/bin/)?taskdesk [^`]+)`", readme)
    spans += re.findall(r"(?:\.venv/bin/|exec web )(taskdesk [^&#\n`]+)", readme)
    out = []
    for span in spans:
        line = re.sub(r"\[[^\]]*\]", "", span.removeprefix(".venv/bin/")).strip()
        if re.search(r" \w+/\w+/", line):  # `tasks list/show/…`: subcommands, not one command
            continue
        out.append(re.sub(r"\b(?:[A-Z]{1,5}|PID)\b", "1", line))
    return out


def test_every_taskdesk_command_in_the_readme_parses() -> None:
    commands = readme_commands()
    assert "taskdesk dev --data-dir 1" in commands and len(commands) > 10  # the regexes see them
    for command in commands:
        try:
            build_parser().parse_args(shlex.split(command)[1:])
        except SystemExit:
            pytest.fail(f"README shows a command taskdesk does not accept: {command}")
    # "pass the same --data-dir": every command that looks for the dev servers takes it.
    for argv in (
        ["worker"],
        ["serve"],
        ["migrate"],
        ["seed"],
        ["tasks", "list"],
        ["import", "f.csv", "--team", "t"],
        ["tokens", "list", "--user", "u"],
    ):
        build_parser().parse_args([*argv, "--data-dir", "x"])


def test_readme_says_what_a_new_machine_needs() -> None:
    readme = (ROOT / "README.md").read_text()
    for fact in (
        "apt-get install -y chromium fonts-noto-cjk",  # browser tests, Chinese screenshots
        "about 15 minutes on a 2-core machine",  # how long ./scripts/test takes
        "38\N{EN DASH}132 s per million",  # seed --tickets 1000000, measured under load
        "kill -9 PID",  # try a worker crash in dev
    ):
        assert fact in readme


def test_a_stale_dev_pointer_is_ignored_and_replaced(tmp_path: Path) -> None:
    from taskdesk.config import DEV_RECORD, recorded_dev_data_dir, write_dev_record

    home = tmp_path / ".taskdesk"
    home.mkdir()
    other = subprocess.Popen(["sleep", "60"])  # alive, but not taskdesk: a reused pid
    try:
        for pid in (2**22 + 1, other.pid):  # beyond pid_max: a dev killed long ago
            (home / DEV_RECORD).write_text(json.dumps({"pid": pid, "data_dir": "/elsewhere"}))
            assert recorded_dev_data_dir(home) is None
            assert write_dev_record(home, tmp_path / "data", "http://x/", {}) == home / DEV_RECORD
            assert json.loads((home / DEV_RECORD).read_text())["pid"] == os.getpid()
    finally:
        other.kill()
        other.wait()


@pytest.mark.slow
def test_dev_starts_again_a_private_redis_that_exited(data_dir: Path, tmp_path: Path) -> None:
    proc, url = start_dev(data_dir, tmp_path, "--no-worker")
    err = tmp_path / "dev.err"
    redis = RedisServer(data_dir / "redis")
    port = redis.port
    try:
        client = Redis.from_url(redis.url)
        client.set("taskdesk-test-kept", "1")
        with contextlib.suppress(RedisConnectionError):  # the server closes as it answers
            client.shutdown(nosave=True)
        client.close()
        wait_until(lambda: "Redis is running again" in err.read_text(), 60, "Redis revived")
        assert f"the private Redis exited (code 0); starting it again on port {port}" in (
            err.read_text()
        )
        assert redis.running() and redis.port == port
        again = Redis.from_url(redis.url)
        assert again.get("taskdesk-test-kept") == b"1", "its append-only file came back with it"
        again.close()
        assert proc.poll() is None and answers(url)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=90)
    assert not redis.running(), "dev stops the Redis it started again"
    assert "Traceback" not in err.read_text()
