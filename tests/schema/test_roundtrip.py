"""The whole way, as a script would go: a token from `taskdesk tokens create`, a real
`taskdesk serve` (uvicorn) process and a real worker process; createExport, poll task(id) until
it completes, download the CSV from downloadUrl; then revoke the token from the command line."""

from __future__ import annotations

import csv
import io
import subprocess
import sys

import httpx
import pytest

from desk.core.settings import Settings
from tests.helpers import ROOT, running_workers, serving, settings_env, wait_for

pytestmark = pytest.mark.slow

CREATE = """mutation($t: ID!) { createExport(teamId: $t) {
  __typename ... on Task { id statusLabel } ... on TaskConflict { existingTask { id } } } }"""
POLL = "query($id: ID!) { task(id: $id) { status statusLabel progress resultSummary downloadUrl } }"


def taskdesk(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "taskdesk", *args],
        cwd=ROOT,
        env=settings_env(settings),
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_export_poll_download_over_http(settings, world, tmp_path) -> None:
    made = taskdesk(settings, "tokens", "create", "--user", "chen@acme.test", "--name", "e2e")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("tdk_") and "shown only now" in made.stderr

    with serving(settings, tmp_path / "web.log") as base, running_workers(settings, tmp_path):
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=10) as client:

            async def up() -> bool:
                try:
                    return (await client.get("/health")).status_code in (200, 503)
                except httpx.TransportError:
                    return False

            await wait_for(up, timeout=30, what="taskdesk serve to answer")

            async def gql(query: str, variables: dict[str, object]) -> dict[str, object]:
                r = await client.post("/graphql", json={"query": query, "variables": variables})
                assert r.status_code == 200, r.text
                body = r.json()
                assert "errors" not in body, body
                return body["data"]  # type: ignore[no-any-return]

            created = (await gql(CREATE, {"t": world.team}))["createExport"]
            assert created["__typename"] == "Task" and created["statusLabel"] == "Queued"

            async def completed() -> dict[str, object] | None:
                task = (await gql(POLL, {"id": created["id"]}))["task"]
                return task if task["status"] in ("COMPLETED", "FAILED") else None  # type: ignore[index]

            task = await wait_for(completed, timeout=60, interval=0.2, what="the export")
            assert task["status"] == "COMPLETED", task
            assert task["resultSummary"] == "4 rows exported."

            r = await client.get(task["downloadUrl"])  # type: ignore[arg-type]
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
            rows = list(csv.DictReader(io.StringIO(r.content.decode("utf-8-sig"))))
            titles = {row["title"] for row in rows}
            assert {"Cannot log in", "Printer on fire", "Old issue"} <= titles and len(rows) == 4
            assert not any(t.startswith("=") for t in titles)  # formula cells neutralised

            revoked = taskdesk(settings, "tokens", "revoke", "--user", "chen@acme.test", token[:12])
            assert revoked.returncode == 0, revoked.stderr
            r = await client.post("/graphql", json={"query": "{ me { id } }"})
            assert r.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
