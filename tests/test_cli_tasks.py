"""`taskdesk tasks`: the operators' window into the ledger, through the real command."""

import subprocess
import sys

from desk.ledger import lanes
from desk.work import tasks
from jobs import heartbeat
from tests.helpers import ROOT, settings_env


def _taskdesk(settings, *args: str, **env: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "taskdesk", *args],
        cwd=ROOT, env=settings_env(settings, **env), capture_output=True, text=True, timeout=60,
    )  # fmt: skip


async def test_export_list_show_cancel(rt, world, settings):
    made = _taskdesk(
        settings,
        "tasks",
        "export",
        "--user",
        "chen@acme.test",
        "--team",
        "Acme",
        "--status",
        "OPEN",
    )
    assert made.returncode == 0, made.stderr
    task_id = int(made.stdout.split()[1].rstrip(":"))
    again = _taskdesk(
        settings,
        "tasks",
        "export",
        "--user",
        "chen@acme.test",
        "--team",
        "Acme",
        "--status",
        "open",
    )
    assert f"following task {task_id}" in again.stderr

    listed = _taskdesk(settings, "tasks", "list", "--kind", "export")
    assert listed.returncode == 0 and f"{task_id}  EXPORT   WAITING" in listed.stdout

    shown = _taskdesk(settings, "tasks", "show", str(task_id))
    assert "status: WAITING" in shown.stdout
    assert "no worker is alive" in shown.stdout  # no worker runs in this test
    assert "in redis: queued" in shown.stdout and "long lane" in shown.stdout

    cancelled = _taskdesk(settings, "tasks", "cancel", str(task_id))
    assert f"task {task_id}: CANCELLED" in cancelled.stdout
    assert (await tasks.get_task(rt, world.staff, task_id)).status == "CANCELLED"


async def test_show_says_a_task_waits_for_its_paused_lane(rt, world, settings):
    live = heartbeat.Registration("live-worker")
    await heartbeat.run_once(rt, live)  # a worker is alive
    # ... and counts as alive for as long as the command takes to start (4 sweeps' time)
    slow = {"dispatch_interval": 60}
    await lanes.pause(rt, "long", None)
    task = await tasks.create_export(rt, world.staff, world.team, {})
    shown = _taskdesk(settings, "tasks", "show", str(task.id), **slow)
    assert shown.returncode == 0, shown.stderr
    assert "dispatched_at: None" in shown.stdout and "workers alive: 1" in shown.stdout
    assert "diagnosis: Waiting: its lane (long) is paused by an operator" in shown.stdout
    assert "handed to the queue" not in shown.stdout
    await lanes.resume(rt, "long")  # resumed, but no dispatcher has sent it yet
    await heartbeat.run_once(rt, live)
    shown = _taskdesk(settings, "tasks", "show", str(task.id), **slow)
    assert "diagnosis: Waiting: not handed to the queue yet" in shown.stdout


async def test_remind_and_clear_errors(rt, world, settings):
    ok = _taskdesk(
        settings,
        "tasks",
        "remind",
        "--user",
        "chen@acme.test",
        "--ticket",
        str(world.tickets["login"]),
        "--in-minutes",
        "5",
    )
    assert ok.returncode == 0 and "WAITING" in ok.stdout, ok.stderr
    refused = _taskdesk(
        settings,
        "tasks",
        "remind",
        "--user",
        "lin@acme.test",
        "--ticket",
        str(world.tickets["login"]),
        "--in-minutes",
        "5",
    )
    assert refused.returncode == 1 and "Only staff" in refused.stderr
    missing = _taskdesk(settings, "tasks", "show", "999999")
    assert missing.returncode == 1 and "No task 999999" in missing.stderr
    bad = _taskdesk(settings, "tasks", "list", "--status", "DONE")
    assert bad.returncode == 1 and "status" in bad.stderr
    assert "Traceback" not in refused.stderr + missing.stderr + bad.stderr


async def test_download_by_the_owner_only(rt, world, settings, tmp_path):
    from jobs.execution import execute
    from jobs.processors import registry

    task = await tasks.create_export(rt, world.staff, world.team, {"q": "printer"})
    assert await execute(rt, registry(), task.id, task.run) == "done"
    out = tmp_path / "x.csv"
    ok = _taskdesk(
        settings, "tasks", "download", str(task.id), "--user", "chen@acme.test", "-o", str(out)
    )
    assert ok.returncode == 0, ok.stderr
    assert b"Printer on fire" in out.read_bytes()
    refused = _taskdesk(
        settings, "tasks", "download", str(task.id), "--user", "zhou@acme.test", "-o", str(out)
    )
    assert refused.returncode == 1 and "not found" in refused.stderr
