"""The load drill's report: requests per second, latencies per kind of request, errors, the
tasks accepted and completed, the checks, and the CPU share of each process group."""

from __future__ import annotations

import argparse
from typing import Any

from bench.stats import percentile

KINDS = (
    ("row", "task row (status)"),
    ("list", "task list check"),
    ("badge", "notification badge"),
    ("health", "health badge"),
    ("create", "createExport / scheduleReminder"),
)


def _merge(clients: list[dict[str, Any]], key: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for c in clients:
        for k, v in c[key].items():
            out[k] = out.get(k, [] if isinstance(v, list) else 0) + v
    return out


def render(args: argparse.Namespace, outcome: dict[str, Any]) -> tuple[str, bool]:
    clients = outcome["clients"]
    latency = _merge(clients, "latency")
    errors = _merge(clients, "errors")
    seconds = max(c["elapsed"] for c in clients)
    requests = sum(len(v) for v in latency.values()) + sum(errors.values())
    v = outcome["verify"]
    lines = [
        f"load drill: {args.people} people, {args.rate:g} new tasks/s for {args.seconds:g} s, "
        f"{args.workers} workers, {args.web} web process(es)",
        f"requests: {requests:,} in {seconds:.0f} s (the load window and the last rows' polls) "
        f"= {requests / seconds:,.0f} req/s; "
        f"errors: {sum(errors.values())}",
    ]
    for key, label in KINDS:
        ms = latency.get(key, [])
        lines.append(
            f"  {label:32} {len(ms):7,} requests  p50 {percentile(ms, 50):7.1f} ms  "
            f"p99 {percentile(ms, 99):7.1f} ms  errors {errors.get(key, 0)}"
        )
    kinds = _merge(clients, "error_kinds")
    for what, n in sorted(kinds.items(), key=lambda kv: -kv[1])[:8]:
        lines.append(f"  {n:6,} x {what}")
    attached = sum(c["attached"] for c in clients)
    seen = sum(c["finished_seen"] for c in clients)
    lines += [
        f"tasks: accepted {v['accepted']:,}, completed {v['completed']:,} "
        f"(still active after the wait: {outcome['unfinished']}), statuses {v['statuses']}; "
        f"conflicts attached to an existing task: {attached}; rows seen finishing by polling: {seen}",
        f"checks: {v['exports_checked']} stored CSVs parsed, reminders skipped "
        f"{v['skipped_reminders']}, tasks with more than one attempt {v['more_than_one_attempt']}, "
        f"problems {v['problem_count']}",
        *[f"  {p}" for p in v["problems"][:10]],
        "CPU (% of one core): "
        + ", ".join(f"{k} {pct:.0f}%" for k, pct in sorted(outcome["cpu_pct"].items())),
    ]
    ok = not errors or not sum(errors.values())
    ok = ok and v["problem_count"] == 0 and v["accepted"] == v["completed"]
    rows = latency.get("row", [])
    web_cpu = outcome["cpu_pct"].get("web", 0.0)
    verdict = "pass" if ok else "FAIL"
    if rows and percentile(rows, 50) > 1000:
        verdict += (
            f" (no errors or lost tasks required; but the status read is slow: p50 "
            f"{percentile(rows, 50) / 1000:.1f} s with the web at {web_cpu:.0f}% of a core: "
            "overloaded)"
        )
    lines.append(f"result: {verdict}")
    return "\n".join(lines), ok
