"""The child processes of `taskdesk dev`: start them, watch them, restart a dead worker, stop them.

A worker that dies (a crash, `kill -9`) is started again after a back-off that doubles from
RESTART_FIRST to RESTART_MAX seconds and resets once a worker has run RESTART_RESET seconds, so
the product's promise (a killed worker loses nothing) can be tried in dev: the web server and
the private servers keep running meanwhile. A web server that dies ends the run (ChildDied): the
address the banner printed would be dead, and saying so beats a silent restart on a new port.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

RESTART_FIRST = 1.0  # seconds before the first restart of a dead worker
RESTART_MAX = 30.0  # the back-off stops growing here (a worker that cannot start at all)
RESTART_RESET = 60.0  # a worker that ran this long starts the back-off again from the start


class ChildDied(Exception):
    """A process that is not restarted (the web server) exited while it should be running."""


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str]
    proc: subprocess.Popen[bytes]
    restartable: bool = False
    started: float = 0.0
    backoff: float = RESTART_FIRST
    restart_at: float | None = None  # set while a dead worker waits for its restart

    def how_it_ended(self, code: int) -> str:
        how = (
            f"was killed by {signal.Signals(-code).name}"
            if code < 0
            else f"exited with code {code}"
        )
        return f"the {self.name} (pid {self.proc.pid}) {how}"


_libc: ctypes.CDLL | None = None


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM if `taskdesk dev` itself is killed (Linux)."""
    if _libc is not None:
        _libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _popen(argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    global _libc
    if sys.platform.startswith("linux") and _libc is None:
        _libc = ctypes.CDLL(None)  # loaded here, not in the forked child
    return subprocess.Popen(
        [sys.executable, "-m", "taskdesk", *argv],
        env=env,
        stdin=subprocess.DEVNULL,
        # Own process group: the terminal's Ctrl-C reaches only us, and we stop the children
        # in order (web and worker first, the servers last).
        process_group=0,
        preexec_fn=_die_with_parent,
    )


def spawn(name: str, argv: list[str], env: dict[str, str], *, restartable: bool = False) -> Child:
    return Child(name, argv, env, _popen(argv, env), restartable, time.monotonic())


def check_children(children: list[Child], say: Callable[[str], None]) -> None:
    """Raise ChildDied for a dead web server; schedule or carry out a dead worker's restart."""
    now = time.monotonic()
    for child in children:
        if child.restart_at is not None:
            if now >= child.restart_at:
                child.proc = _popen(child.argv, child.env)
                child.started, child.restart_at = now, None
                say(f"the {child.name} is running again (pid {child.proc.pid})")
            continue
        code = child.proc.poll()
        if code is None:
            continue
        if not child.restartable:
            raise ChildDied(child.how_it_ended(code))
        if now - child.started >= RESTART_RESET:
            child.backoff = RESTART_FIRST
        child.restart_at = now + child.backoff
        say(
            f"{child.how_it_ended(code)}; restarting it in {child.backoff:.0f} s "
            "(web and the servers keep running; its tasks resume after their lease)"
        )
        child.backoff = min(child.backoff * 2, RESTART_MAX)


def supervise(
    children: list[Child], say: Callable[[str], None], also: Callable[[], None] | None = None
) -> int:
    """Block until the web server dies (ChildDied) or a signal arrives (KeyboardInterrupt);
    `also` runs on every round (taskdesk/dev.py: the private servers' watch)."""
    while True:
        check_children(children, say)
        if also is not None:
            also()
        time.sleep(0.25)


def stop_children(children: list[Child], grace: float, say: Callable[[str], None]) -> None:
    """SIGTERM to each, up to `grace` seconds for a clean exit, then SIGKILL to its group."""
    for child in children:
        child.restart_at = None  # a worker waiting for its restart stays down
        if child.proc.poll() is None:
            child.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for child in children:
        try:
            child.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            say(f"the {child.name} did not stop within {grace:.0f}s: killing it")
            # Not yet reaped, so its pid is still its process group's id.
            os.killpg(child.proc.pid, signal.SIGKILL)
            child.proc.wait()
