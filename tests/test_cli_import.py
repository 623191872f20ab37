"""`taskdesk import FILE --wait`: through the ledger and a real worker, to the summary."""

import subprocess
import sys

import pytest

from tests.helpers import ROOT, running_workers, settings_env


def _taskdesk(settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "taskdesk", *args],
        cwd=ROOT, env=settings_env(settings), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.slow
async def test_import_and_wait_with_report(rt, world, settings, tmp_path):
    src = tmp_path / "tickets.csv"
    src.write_text("external_id,title,status\nE-1,From the CLI,OPEN\nE-2,,OPEN\n", encoding="utf-8")
    report = tmp_path / "rejected.csv"
    with running_workers(settings, tmp_path):
        done = _taskdesk(
            settings,
            "import",
            str(src),
            "--team",
            "Acme",
            "--mode",
            "create",
            "--wait",
            "--report",
            str(report),
        )
    assert done.returncode == 0, done.stderr
    assert "COMPLETED — 1 created, 0 updated, 0 unchanged, 1 rejected." in done.stdout
    assert "2 / 2 rows" in done.stderr
    assert report.read_text(encoding="utf-8-sig").splitlines()[1] == "3,title,missing"


async def test_import_refuses_bad_input_clearly(rt, world, settings, tmp_path):
    missing = _taskdesk(settings, "import", str(tmp_path / "nope.csv"), "--team", "Acme")
    assert missing.returncode == 2 and "no such file" in missing.stderr
    junk = tmp_path / "junk.csv"
    junk.write_bytes(b"\x00\x01binary")
    bad = _taskdesk(settings, "import", str(junk), "--team", "Acme")
    assert bad.returncode == 1 and "not a CSV" in bad.stderr
    staff = _taskdesk(settings, "import", str(junk), "--team", "Acme", "--user", "chen@acme.test")
    assert staff.returncode == 1 and "admins" in staff.stderr
    assert "Traceback" not in missing.stderr + bad.stderr + staff.stderr
