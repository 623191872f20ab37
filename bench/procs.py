"""Processes the benchmarks start: real workers, baseline workers, load generators; and what
/proc says about them (resident memory, CPU time). Every wait here has a deadline."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.env import ROOT

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS / VmHWM (and friends) of a process, in kB."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.startswith("Vm"):
                out[key] = int(value.split()[0])
    return out


def reset_peak_rss(pid: int) -> bool:
    """Reset VmHWM to the current RSS (Linux: write 5 to clear_refs); False if not allowed."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def cpu_seconds(pid: int, *, reaped: bool = False) -> float:
    """User + system CPU time of a process so far; `reaped`: with that of its children that
    exited and were waited for (a PostgreSQL postmaster's closed backends)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    used = int(fields[11]) + int(fields[12])
    if reaped:
        used += int(fields[13]) + int(fields[14])
    return used / CLK_TCK


def children(pid: int) -> list[int]:
    """Direct children of `pid` (e.g. a PostgreSQL postmaster's backends)."""
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            kids.append(int(entry))
    return kids


def tree_cpu_seconds(pid: int, *, reaped: bool = False) -> float:
    """CPU of a process and its living children; `reaped`: and of those that exited."""
    return cpu_seconds(pid, reaped=reaped) + sum(cpu_seconds(k) for k in children(pid))


def machine_busy_seconds() -> float:
    """CPU time every core of the machine has spent busy so far (/proc/stat: all but idle and
    iowait), whoever spent it: the processes under test, their servers and the load."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle, iowait = values[3], values[4]
    return (sum(values[:8]) - idle - iowait) / CLK_TCK


class Proc:
    """A child process logging to a file; stopped with SIGTERM, then SIGKILL after a deadline."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log_path = log
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log = log.open("ab")
        self.proc = subprocess.Popen(
            args,
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()

    def __enter__(self) -> Proc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def worker(env: dict[str, str], log: Path) -> Proc:
    """A real taskdesk worker: `python -m jobs.worker`."""
    return Proc([sys.executable, "-m", "jobs.worker"], env, log)


def run_json(module: str, args: list[str], env: dict[str, str], timeout: float) -> Any:
    """Run `python -m module args…` to completion and parse the JSON it prints last."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{module} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def spawn_json(
    module: str, args: list[str], env: dict[str, str], log: Path
) -> subprocess.Popen[str]:
    """Start `python -m module args…` (stderr to `log`); collect it with `collect_json`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            text=True,
        )


def collect_json(p: subprocess.Popen[str], timeout: float) -> Any:
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate(timeout=10)
        raise RuntimeError(f"process {p.args!r} overran {timeout:.0f} s") from None
    if p.returncode != 0:
        raise RuntimeError(f"process {p.args!r} failed ({p.returncode}); see its log")
    return json.loads(out.strip().splitlines()[-1])


def wait_until(probe: Any, timeout: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
