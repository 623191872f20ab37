"""The drill's "hosts": each a web process and its workers, started with an environment of its
own (its own ports), all sharing the bench's one
PostgreSQL and Redis; and the kill -9 of a whole host.

The product names every connection itself (`application_name`: taskdesk-web,
taskdesk-web-feed, taskdesk-worker <id>; desk/core/db.py), whatever `PGAPPNAME` says. Every
process reports the machine's one hostname (the worker id starts with it): the hosts are
separate by environment and ports, not by network namespace.
"""

from __future__ import annotations

import os
import signal
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path

from bench import procs
from bench.web import OURS, Served, free_port, serve

READY_WITHIN = 240.0


@dataclass
class Host:
    name: str
    web: Served
    workers: list[procs.Proc] = field(default_factory=list)
    metrics_ports: list[int] = field(default_factory=list)

    def pids(self) -> list[int]:
        return [self.web.pid, *(w.pid for w in self.workers)]


def spread(workers: int, hosts: int) -> list[int]:
    """Workers per host, the first hosts getting the remainder: 4 over 3 is 2+1+1."""
    return [workers // hosts + (i < workers % hosts) for i in range(hosts)]


def parse_spread(text: str | None, workers: int, hosts: int) -> list[int]:
    """`--spread 2,1,1`, or the even spread; every host gets a web process, so one entry each."""
    if not text:
        return spread(workers, hosts)
    counts = [int(n) for n in text.split(",")]
    if len(counts) != hosts or min(counts) < 0:
        raise SystemExit(f"--spread needs {hosts} counts of 0 or more (one a host), got {text!r}")
    return counts


def start(stack: ExitStack, name: str, base_env: dict[str, str], workers: int, logs: Path) -> Host:
    """Start host `name`: its web process (answering before this returns) and `workers`
    workers, each with its own metrics port; `stack` stops them (SIGTERM) at the end."""
    ports = [free_port() for _ in range(workers)]
    procs_ = [
        stack.enter_context(
            procs.worker(
                base_env | {"PGAPPNAME": f"{name}-worker{i}", "WORKER_METRICS_PORT": str(port)},
                logs / f"{name}-worker{i}.log",
            )
        )
        for i, port in enumerate(ports)
    ]
    # Seven processes start at once on a small shared machine: give each web more than 60 s.
    web_env = base_env | {"PGAPPNAME": f"{name}-web"}
    web = stack.enter_context(
        serve(OURS, web_env, logs / f"{name}-web.log", ready_within=READY_WITHIN)
    )
    return Host(name, web, procs_, ports)


def tree(pid: int) -> list[int]:
    """`pid` and every process below it."""
    out = [pid]
    for kid in procs.children(pid):
        out += tree(kid)
    return out


def kill(host: Host) -> list[int]:
    """kill -9 every process of the host (the web's whole tree, the workers): no handler runs,
    no lease is given back, no registration removed — as when a machine dies."""
    doomed = [p for pid in host.pids() for p in tree(pid)]  # the tree before anything dies
    for pid in doomed:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return doomed
