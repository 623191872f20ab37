"""The rolling-upgrade drill (docs/architecture.md, "Migrations"): the previous release's web and
two workers run under load (reminders and exports asked for through its GraphQL API); this
release's migrations are applied while they run; then the workers are replaced one by one and the
web last, the load going on throughout. Every reminder fires exactly once, every export
completes, no request gets an error and no process logs one.

The previous release is the commit before the one that added the newest migration, taken from
git (`git archive`) into a temporary directory and run from there with the same virtualenv.
A release from before the stale-plan guard (desk.core.db.stale_plan) fails a request per
pooled connection whose prepared `SELECT *` a migration changed: only that error, and only from
such a release, is tolerated, and the run says how many."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import tarfile
import uuid
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from io import BytesIO
from pathlib import Path

import httpx
import psycopg
import pytest
from graphql import GraphQLSchema, build_client_schema, build_schema, get_introspection_query

from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.people import users
from taskdesk import migrate
from tests.conftest import Servers
from tests.helpers import free_port, settings_env, wait_for, wait_until

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
NEWEST = sorted((ROOT / "migrations" / "versions").glob("[0-9]*_*.py"))[-1]
TICKETS = 48  # one reminder each (a ticket has one active reminder)
EXPORTS = 3  # what one person may have running at once
PHASES = ("old release", "new schema", "one worker rolled", "workers rolled", "web rolled")

SCHEDULE = """mutation($t: ID!, $at: DateTime!) { scheduleReminder(ticketId: $t, at: $at) {
  __typename ... on Task { id } ... on Problem { message } } }"""
EXPORT = """mutation($team: ID!, $q: String!) { createExport(teamId: $team, filter: {q: $q}) {
  __typename ... on Task { id } ... on Problem { message } } }"""


STALE_PLAN = "cached plan must not change result type"


def _guarded(tree: Path) -> bool:
    """Whether a release retries statements whose prepared plan a migration made stale
    (desk.core.db.stale_plan). One without it fails a request per pooled connection and
    statement after a migration adds a column under its `SELECT *`: the drill tolerates exactly
    that error from such a release's processes, and nothing else."""
    return "def stale_plan" in (tree / "desk" / "core" / "db.py").read_text()


def _shape(schema: GraphQLSchema) -> set[tuple[str, str]]:
    """Every (type, field or enum value) of a GraphQL schema: what tells two releases apart
    (each release's schema.graphql is its code's, tests/schema/test_schema_file.py)."""
    shape: set[tuple[str, str]] = set()
    for name, kind in schema.type_map.items():
        if name.startswith("__"):
            continue
        members = getattr(kind, "fields", None) or getattr(kind, "values", None) or {}
        shape |= {(name, member) for member in members}
    return shape


def _previous_release(into: Path) -> str:
    """The tree before the newest migration, unpacked into `into`; returns its commit."""
    git = ["git", "-C", str(ROOT)]
    added = subprocess.run(
        [*git, "log", "--diff-filter=A", "--format=%H", "-1", "--", str(NEWEST)],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    if not added:
        pytest.fail(f"no git history for {NEWEST.name}: the drill needs a clone of the repository")
    archive = subprocess.run([*git, "archive", f"{added}^"], capture_output=True, check=True)
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return f"{added}^"


class Proc:
    """A web or worker process of one release's tree."""

    def __init__(self, tree: Path, args: list[str], settings: Settings, log: Path) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", *args], cwd=tree, env=settings_env(settings),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip

    def stop(self) -> None:
        """SIGTERM, as a deploy does: a worker finishes or hands back what it runs."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _web(tree: Path, settings: Settings, log: Path) -> tuple[Proc, str]:
    port = free_port()
    web = Proc(tree, ["taskdesk", "serve", "--port", str(port), "--log-level", "warning"],
               settings, log)  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if web.proc.poll() is not None:
            raise AssertionError(f"{log.name} died:\n{log.read_text()}")
        try:
            httpx.get(f"{url}/health", timeout=2)  # any answer: 503 until a worker beats
            return True
        except httpx.TransportError:
            return False

    wait_until(up, 180, f"{log.name} to answer")
    return web, url


@pytest.fixture
def drill_db(servers: Servers, settings: Settings) -> Iterator[Settings]:
    name = f"taskdesk_drill_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(servers.admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield settings.model_copy(update={"database_url": servers.db_url(name)})
    with psycopg.connect(servers.admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _world(url: str) -> tuple[int, int, list[int]]:
    """A team, its staff member and customer, and tickets assigned to the staff member."""
    with psycopg.connect(url) as conn:
        team = conn.execute("INSERT INTO team (name) VALUES ('Acme') RETURNING id").fetchone()[0]  # type: ignore[index]
        staff, customer = (
            conn.execute(
                "INSERT INTO app_user (email, display_name) VALUES (%s, %s) RETURNING id", (e, n)
            ).fetchone()[0]  # type: ignore[index]
            for e, n in (("chen@acme.test", "Chen"), ("lin@acme.test", "Lin"))
        )
        for user, role in ((staff, "STAFF"), (customer, "CUSTOMER")):
            conn.execute(
                "INSERT INTO membership (user_id, team_id, role) VALUES (%s, %s, %s)",
                (user, team, role),
            )
        tickets = [
            conn.execute(
                "INSERT INTO ticket (team_id, title, status, priority, creator_id, assignee_id) "
                "VALUES (%s, %s, 'OPEN', 'NORMAL', %s, %s) RETURNING id",
                (team, f"Drill ticket {i}", customer, staff),
            ).fetchone()[0]  # type: ignore[index]
            for i in range(TICKETS)
        ]
    return team, staff, tickets


class Load:
    """Reminders and exports asked for through whichever web is current, every answer kept."""

    def __init__(self, token: str, team: int, tickets: list[int]) -> None:
        self.url = ""
        self.headers = {"Authorization": f"Bearer {token}"}
        self.team, self.tickets = team, list(tickets)
        self.tasks: list[int] = []
        self.refused: list[str] = []
        self.exports = 0

    async def ask(self, client: httpx.AsyncClient, query: str, variables: dict) -> None:
        r = await client.post(f"{self.url}/graphql", json={"query": query, "variables": variables},
                              headers=self.headers)  # fmt: skip
        body = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
        found = next(iter((body.get("data") or {}).values()), None) or {}
        if r.status_code != 200 or found.get("__typename") != "Task":
            self.refused.append(f"{r.status_code} {r.text[:300]}")
        else:
            self.tasks.append(int(found["id"]))

    async def phase(self, reminders: int) -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            for _ in range(reminders):
                at = (datetime.now(UTC) + timedelta(seconds=2)).isoformat()
                await self.ask(client, SCHEDULE, {"t": str(self.tickets.pop()), "at": at})
            if self.exports < EXPORTS:  # each its own filters, so none is refused as a twin
                self.exports += 1
                q = f"Drill {self.exports}"
                await self.ask(client, EXPORT, {"team": str(self.team), "q": q})


async def test_a_rolling_upgrade_under_load_loses_and_doubles_nothing(
    drill_db: Settings, tmp_path: Path
) -> None:
    settings = drill_db.model_copy(update={"lease_seconds": 5.0})
    prev = tmp_path / "previous"
    prev.mkdir()
    release = _previous_release(prev)
    old_migrate = subprocess.run(  # noqa: ASYNC221 - before anything else runs
        [sys.executable, "-m", "taskdesk", "migrate"], cwd=prev, env=settings_env(settings),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert old_migrate.returncode == 0, old_migrate.stderr
    team, staff, tickets = await asyncio.to_thread(_world, settings.libpq_url)
    rt = await Runtime.open(settings)
    try:
        _, token = await users.create_token(rt, staff, "drill")
    finally:
        await rt.close()

    procs: list[Proc] = []
    old_web, url = _web(prev, settings, tmp_path / "web-old.log")
    workers = [
        Proc(prev, ["jobs.worker"], settings, tmp_path / f"worker{i}-old.log") for i in (1, 2)
    ]
    procs += [old_web, *workers]
    load = Load(token, team, tickets)
    load.url = url
    per_phase = TICKETS // len(PHASES)
    try:
        async with httpx.AsyncClient() as c:  # the old web really is the previous release
            r = await c.post(f"{url}/graphql", headers=load.headers,
                             json={"query": get_introspection_query()})  # fmt: skip
            served = build_client_schema(r.json()["data"])
            assert _shape(served) == _shape(build_schema((prev / "schema.graphql").read_text()))
        await load.phase(per_phase)  # old release
        await asyncio.to_thread(migrate.upgrade, settings.libpq_url)
        await load.phase(per_phase)  # new schema, old processes
        for i in (0, 1):
            workers[i].stop()
            workers[i] = Proc(ROOT, ["jobs.worker"], settings, tmp_path / f"worker{i + 1}-new.log")
            procs.append(workers[i])
            await load.phase(per_phase)
        new_web, load.url = _web(ROOT, settings, tmp_path / "web-new.log")
        procs.append(new_web)
        old_web.stop()
        await load.phase(TICKETS - 4 * per_phase)  # web rolled

        old_log = (tmp_path / "web-old.log").read_text()
        tolerated = [] if _guarded(prev) else [r for r in load.refused if _stale(r, old_log)]
        assert [r for r in load.refused if r not in tolerated] == [], load.refused
        if tolerated:
            warnings.warn(
                f"the previous release {release} has no stale-plan guard: {len(tolerated)} "
                f"request(s) to its web failed with {STALE_PLAN!r} after the migration",
                stacklevel=1,
            )
        assert len(load.tasks) + len(tolerated) == TICKETS + EXPORTS

        async def all_done() -> bool:
            with psycopg.connect(settings.libpq_url) as conn:
                left = conn.execute(
                    "SELECT count(*) FROM background_task WHERE id = ANY(%s) "
                    "AND status <> 'COMPLETED'", (load.tasks,),
                ).fetchone()  # fmt: skip
            return left == (0,)

        await wait_for(all_done, timeout=180, what="every reminder and export to complete")
    finally:
        for p in procs:
            p.stop()
    with psycopg.connect(settings.libpq_url) as conn:
        per_task = conn.execute(
            "SELECT t.id, count(n.id) FROM background_task t LEFT JOIN notification n "
            "ON n.task_id = t.id WHERE t.id = ANY(%s) AND t.kind = 'REMINDER' GROUP BY t.id",
            (load.tasks,),
        ).fetchall()
    reminders = len(load.tasks) - EXPORTS
    assert len(per_task) == reminders and all(n == 1 for _, n in per_task), per_task
    for log in sorted(tmp_path.glob("*.log")):  # noqa: ASYNC240 - after the drill
        text = log.read_text()
        if log.name.endswith("-old.log") and tolerated:
            text = "\n".join(_without_stale_plans(text))
        assert "Traceback" not in text and " ERROR " not in text, f"{log.name}:\n{text[-3000:]}"


def _stale(refusal: str, log: str) -> bool:
    """Whether a refused request failed on a stale plan: the web logged its request id so."""
    found = re.search(r'"requestId":"([0-9a-f]+)"', refusal)
    return bool(found) and any(
        found.group(1) in line and STALE_PLAN in line for line in log.splitlines()
    )


def _without_stale_plans(log: str) -> list[str]:
    """The log's records but those of the tolerated stale-plan error (a record: a line that
    starts with a date, and the lines after it until the next)."""
    kept, record = [], []
    for line in [*log.splitlines(), "2"]:
        if line[:1].isdigit() and record:
            if not any(STALE_PLAN in r for r in record):
                kept += record
            record = []
        record.append(line)
    return kept
