"""The load drill's report: requests per second (asked and served), latencies per kind of
request, the answers by status (204 = nothing changed, 503/429 = refused, with Retry-After),
errors, the pages' requests per minute, the tasks accepted and completed, the checks, and the
CPU share of each process group."""

from __future__ import annotations

import argparse
from typing import Any

from bench.stats import percentile

KINDS = (
    ("watch", "page watcher (/watch)"),
    ("create", "createExport / scheduleReminder"),
)
REFUSED = ("503", "429")


def _merge(clients: list[dict[str, Any]], key: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for c in clients:
        for k, v in c[key].items():
            out[k] = out.get(k, [] if isinstance(v, list) else 0) + v
    return out


def _statuses(clients: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for c in clients:
        for kind, counts in c["statuses"].items():
            mine = out.setdefault(kind, {})
            for status, n in counts.items():
                mine[status] = mine.get(status, 0) + n
    return out


def traffic(args: argparse.Namespace, clients: list[dict[str, Any]]) -> list[str]:
    latency = _merge(clients, "latency")
    errors = _merge(clients, "errors")
    statuses = _statuses(clients)
    seconds = max(c["elapsed"] for c in clients)
    requests = sum(len(v) for v in latency.values()) + sum(errors.values())
    refused = sum(n for by in statuses.values() for s, n in by.items() if s in REFUSED)
    served = requests - refused - sum(errors.values())
    every = [ms for v in latency.values() for ms in v]
    window = sum(c["window_requests"].get("watch", 0) for c in clients)
    people = sum(c["people"] for c in clients)
    lines = [
        f"requests: {requests:,} in {seconds:.0f} s (the load window and the last rows' polls) "
        f"= {requests / seconds:,.0f} req/s asked, {served / seconds:,.0f} req/s served; "
        f"p99 {percentile(every, 99):.1f} ms; errors: {sum(errors.values())}; "
        f"refused (503/429, Retry-After): {refused}",
        f"page watcher: {window / people / (args.seconds / 60):.1f} requests per page per minute "
        f"in the load window (pages following their tasks; an idle page asks every 5 s)",
    ]
    for key, label in KINDS:
        ms = latency.get(key, [])
        by = statuses.get(key, {})
        answers = ", ".join(f"{s}: {n:,}" for s, n in sorted(by.items()))
        size = sum(c["body_bytes"].get(key, 0) for c in clients) / max(1, by.get("200", 0))
        lines.append(
            f"  {label:32} {len(ms):7,} requests  p50 {percentile(ms, 50):7.1f} ms  "
            f"p99 {percentile(ms, 99):7.1f} ms  errors {errors.get(key, 0)}  ({answers}; "
            f"a 200 {size / 1000:.1f} kB)"
        )
    return lines


def timeline(clients: list[dict[str, Any]], step: float = 10.0) -> list[str]:
    """Asked, served and the polls' p50/p99 per `step` seconds of the run (`--timeline`)."""
    entries = [e for c in clients for e in c.get("timeline", [])]
    if not entries:
        return []
    start = min(e[0] for e in entries)
    slots: dict[int, list[Any]] = {}
    for e in entries:
        slots.setdefault(int((e[0] - start) // step), []).append(e)
    lines = [
        "per 10 s (from the first request): asked/s, served/s, refused, polls' p50 / p99, "
        "refusals' p99 (a refusal is answered before any work: its time is the queue's)"
    ]
    for slot, got in sorted(slots.items()):
        served = [e for e in got if e[4] == "s"]
        polls = [e[3] for e in served if e[1] == "watch"]
        refused = [e[3] for e in got if e[4] == "r"]
        lines.append(
            f"  {slot * step:5.0f} s  {len(got) / step:6.0f}  {len(served) / step:6.0f}  "
            f"{len(refused):6,}  {percentile(polls, 50):7.1f}  "
            f"{percentile(polls, 99):7.1f} ms  {percentile(refused, 99):7.1f} ms"
        )
    return lines


def render(args: argparse.Namespace, outcome: dict[str, Any]) -> tuple[str, bool]:
    clients = outcome["clients"]
    latency = _merge(clients, "latency")
    errors = _merge(clients, "errors")
    v = outcome["verify"]
    lines = [
        f"load drill: {args.people} people, {args.rate:g} new tasks/s for {args.seconds:g} s, "
        f"{args.workers} workers, {args.web} web process(es)",
        *traffic(args, clients),
        *timeline(clients),
    ]
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
    rows = latency.get("watch", [])
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
