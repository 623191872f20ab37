"""The many-host drill's report: the load drill's traffic lines; before and after the kill (asked
and served per second, p99, failed requests and when); what the balancer saw of each member; the
tasks (accepted, completed, lost, doubled); the peak PostgreSQL connections beside the budget;
and the PASS/FAIL lines."""

from __future__ import annotations

import argparse
from collections import Counter
from datetime import datetime
from typing import Any

from bench.load.report import traffic
from bench.stats import percentile

# A client's timeline entry: wall-clock start, kind, status (0: no answer), ms, outcome
# ("s"erved, "r"efused with Retry-After, "e"rror).
Entry = tuple[float, str, int, float, str]
MEMBER_COLUMNS = ("status", "stot", "hrsp_2xx", "hrsp_5xx", "eresp", "econ", "wretr", "wredis")


def phase(entries: list[Entry], start: float, end: float) -> dict[str, Any]:
    """The requests that started in [start, end): counts, per second, latency of the answered."""
    mine = [e for e in entries if start <= e[0] < end]
    outcomes = Counter(e[4] for e in mine)
    answered = [e[3] for e in mine if e[4] != "e"]
    seconds = max(end - start, 1e-9)
    return {
        "seconds": round(seconds, 1),
        "asked": len(mine),
        "served": outcomes["s"],
        "refused": outcomes["r"],
        "errors": outcomes["e"],
        "asked_per_s": len(mine) / seconds,
        "served_per_s": outcomes["s"] / seconds,
        "p50_ms": percentile(answered, 50),
        "p99_ms": percentile(answered, 99),
    }


def ended(e: Entry) -> float:
    """When a request was answered or failed (wall clock)."""
    return e[0] + e[3] / 1000


def failures(entries: list[Entry], since: float) -> dict[str, Any]:
    """Failed requests that ended at or after `since` (those in flight then included): how
    many, when (seconds after it), what."""
    failed = sorted((ended(e), e) for e in entries if e[4] == "e" and ended(e) >= since)
    return {
        "count": len(failed),
        "first_s": failed[0][0] - since if failed else None,
        "last_s": failed[-1][0] - since if failed else None,
        "what": dict(Counter(f"{e[1]} {e[2] or 'no answer'}" for _, e in failed)),
    }


def answers_lost(entries: list[Entry], created: dict[int, float]) -> int:
    """Tasks in the ledger that nobody was told of, each matched to a different create request
    that failed (no answer, or a 5xx) while it was in flight when the task was accepted: the
    request's answer was lost, the task was not made twice. The rest count as doubled."""
    slack = 0.5  # two clocks (PostgreSQL's, the client's) on one machine
    failed = [e for e in entries if e[1] == "create" and e[4] == "e"]
    matched = 0
    for t in sorted(created.values()):
        hit = next((e for e in failed if e[0] - slack <= t <= ended(e) + slack), None)
        if hit is not None:
            failed.remove(hit)
            matched += 1
    return matched


def silent_seconds(entries: list[Entry], start: float, end: float) -> list[int]:
    """Whole seconds after `start` (until `end`) in which no request that started got a
    member's answer (served, or refused with Retry-After: a member answering that it is busy)."""
    answered = {int(e[0] - start) for e in entries if e[4] != "e" and start <= e[0] < end}
    return [s for s in range(int(end - start)) if s not in answered]


def marked_down(log: str, member: str, since: float) -> float | None:
    """Seconds from `since` until HAProxy logged `member` DOWN (its log lines start with an ISO
    time), or None when it did not."""
    for line in log.splitlines():
        if f"web/{member} is DOWN" in line:
            try:  # HAProxy also writes the warning to stderr, without a time: skip that one
                return datetime.fromisoformat(line.split()[0]).timestamp() - since
            except (ValueError, IndexError):
                continue
    return None


def _members(rows: list[dict[str, str]]) -> list[str]:
    out = []
    for r in rows:
        if r.get("pxname") == "web" and r.get("svname") != "FRONTEND":
            cells = "  ".join(f"{c} {r.get(c, '')}" for c in MEMBER_COLUMNS)
            out.append(f"  {r['svname']:8} {cells}")
    return out


def _error_kinds(clients: list[dict[str, Any]]) -> list[tuple[str, int]]:
    kinds: Counter[str] = Counter()
    for c in clients:
        kinds.update(c["error_kinds"])
    return kinds.most_common(8)


def _phase_line(name: str, p: dict[str, Any]) -> str:
    return (
        f"  {name:6} {p['seconds']:5.1f} s: {p['asked']:,} asked ({p['asked_per_s']:,.0f}/s), "
        f"{p['served']:,} served ({p['served_per_s']:,.0f}/s), {p['refused']:,} refused, "
        f"{p['errors']} failed; p50 {p['p50_ms']:.1f} ms, p99 {p['p99_ms']:.1f} ms"
    )


def _figures(args: argparse.Namespace, o: dict[str, Any]) -> dict[str, Any]:
    entries: list[Entry] = [tuple(e) for c in o["clients"] for e in c["timeline"]]
    kill, end = o["killed_at"], o["ended"]
    v = o["verify"]
    after = failures(entries, kill)
    explained = answers_lost(entries, o["strangers_created"])
    return {
        "before": phase(entries, o["began"], kill),
        "after": phase(entries, kill, end),
        "failed_before_kill": failures(entries, 0)["count"] - after["count"],
        "failed_after_kill": after,
        "silent_seconds_after_kill": silent_seconds(entries, kill, end),
        "marked_down_after_s": marked_down(o["balancer_log"], o["victim"], kill),
        "lost": len(v["lost"]),  # the still unfinished among them
        "doubled": v["doubled"] + len(v["strangers"]) - explained,
        "answers_lost": explained,
        "failed_requests": [e for e in sorted(entries) if e[4] == "e"][:300],
    }


def _checks(
    args: argparse.Namespace, o: dict[str, Any], f: dict[str, Any]
) -> list[tuple[bool, str]]:
    v, c, b = o["verify"], o["connections"], o["budget"]
    late = f["failed_after_kill"]["last_s"]
    kept = (
        not f["silent_seconds_after_kill"]
        and f["failed_before_kill"] == 0
        and (late is None or late <= args.settle)
    )
    # verify.py's problems but the lost, the strangers and the doubled: what the results say.
    other = v["problem_count"] - len(v["lost"]) - bool(v["strangers"]) - v["doubled"]
    return [
        (f["lost"] == 0, f"0 lost: {f['lost']} accepted tasks did not complete"),
        (f["doubled"] == 0, f"0 doubled: {f['doubled']} tasks made or done more than once"),
        (
            kept,
            f"balancer kept answering: no second after the kill without a member's answer "
            f"(silent: {f['silent_seconds_after_kill'] or 'none'}); failed requests "
            f"{f['failed_after_kill']['count']} ending at or after the kill, the last "
            f"{'-' if late is None else f'{late:.1f} s'} after it (allowed: {args.settle:g} s), "
            f"{f['failed_before_kill']} before it",
        ),
        _within_budget(args, c, b),
        (other <= 0, f"stored results check out (bench/load/verify.py): {max(other, 0)} problems"),
    ]


def _within_budget(
    args: argparse.Namespace, c: dict[str, Any], b: dict[str, Any]
) -> tuple[bool, str]:
    # Through PgBouncer a server connection carries the name of the client it serves (or last
    # served), so the hosts' names count PgBouncer's server connections as well.
    peak, where = c["peak_hosts"], " (PgBouncer's pool + the listeners)" if args.pgbouncer else ""
    return peak <= b["total"], (
        f"peak connections <= budget: the hosts' peak {peak} <= {b['total']}{where}"
    )


def render(args: argparse.Namespace, o: dict[str, Any]) -> tuple[str, bool, dict[str, Any]]:
    f = _figures(args, o)
    v, c, b = o["verify"], o["connections"], o["budget"]
    fa = f["failed_after_kill"]
    down = f["marked_down_after_s"]
    lines = [
        f"many-host drill: {args.hosts} hosts (web + workers {'+'.join(map(str, args.counts))}) "
        f"behind HAProxy{' and PgBouncer' if args.pgbouncer else ''}; {args.people} people, {args.rate:g} new tasks/s for {args.seconds:g} s; "
        f"kill -9 of {o['victim']} (web + {args.counts[args.kill_host - 1]} workers) at "
        f"{o['killed_at'] - o['began']:.1f} s; LEASE_SECONDS={args.lease_seconds:g}",
        *traffic(args, o["clients"]),
        "before and after the kill (by each request's start; the load window only):",
        _phase_line("before", f["before"]),
        _phase_line("after", f["after"]),
        f"failed at or after the kill (those in flight at it included): {fa['count']}"
        + (
            f", from +{fa['first_s']:.2f} s to +{fa['last_s']:.2f} s: {fa['what']}"
            if fa["count"]
            else ""
        )
        + f"; HAProxy marked {o['victim']} DOWN "
        + (f"+{down:.1f} s after the kill" if down is not None else "(not logged)"),
        *[f"  {n:6,} x {what}" for what, n in _error_kinds(o["clients"])],
        "balancer members at the end:",
        *_members(o["balancer"]),
        f"tasks: accepted {v['accepted']:,}, completed {v['completed']:,}, lost {f['lost']}, "
        f"doubled {f['doubled']}; rescued (more than one attempt) {v['more_than_one_attempt']}; "
        f"in the ledger though their answer was lost at the balancer {f['answers_lost']}",
        *[f"  {p}" for p in v["problems"][:10]],
        f"PostgreSQL connections (sampled every 0.5 s, {c['samples']} samples): peak of the "
        f"hosts {c['peak_hosts']}, of the run's database {c['peak_total']} (with the drill's "
        f"own); budget {b['total']} = {b['how']} (README, Connections; taskdesk doctor); "
        f"the server's max_connections {o['max_connections']}",
        "  peak by application_name: "
        + ", ".join(f"{a or '(none)'} {n}" for a, n in c["peak_by_name"].items()),
    ]
    checks = _checks(args, o, f)
    lines += [f"{'PASS' if ok else 'FAIL'} {text}" for ok, text in checks]
    return "\n".join(lines), all(ok for ok, _ in checks), f
