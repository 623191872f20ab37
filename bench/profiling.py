"""Profiles of the processes under test (`python -m bench --profile`), and reading them back.

`recording(pid, out)` runs `py-spy record` (non-blocking sampling, 100 Hz, collapsed stacks)
on a worker or web process while a benchmark uses it; `python -m bench.profiling FILE…` prints
the frames where the busy time went: by own time and including callees, as shares of samples.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _py_spy() -> str | None:
    local = Path(sys.executable).parent / "py-spy"
    return str(local) if local.exists() else shutil.which("py-spy")


@contextmanager
def recording(pid: int, out: Path | None) -> Iterator[None]:
    """Sample `pid` into `out` (collapsed stacks) until the block ends; no-op when out is None."""
    spy_bin = _py_spy() if out is not None else None
    if out is None or spy_bin is None:
        yield
        return
    args = [spy_bin, "record", "-p", str(pid), "-f", "raw", "-r", "100", "--nonblocking"]
    args.append("--subprocesses")  # uvicorn --workers N: the children serve
    with out.with_suffix(".spy.log").open("ab") as log:
        spy = subprocess.Popen([*args, "-o", str(out)], stdout=log, stderr=log)
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        try:
            spy.wait(30)
        except subprocess.TimeoutExpired:
            spy.kill()


def load(paths: list[Path]) -> tuple[Counter[str], Counter[str], int]:
    own: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    for path in paths:
        for line in path.read_text(errors="replace").splitlines():
            stack, _, n = line.rstrip().rpartition(" ")
            if not stack or not n.isdigit():
                continue
            frames = stack.split(";")
            total += int(n)
            own[frames[-1]] += int(n)
            for f in set(frames):
                incl[f] += int(n)
    return own, incl, total


def summary(paths: list[Path], top: int = 25) -> str:
    own, incl, total = load(paths)
    if not total:
        return "no samples"
    lines = [f"{total} samples (busy only); own time:"]
    lines += [f"  {n / total:6.1%}  {f}" for f, n in own.most_common(top)]
    lines.append("including callees:")
    lines += [f"  {n / total:6.1%}  {f}" for f, n in incl.most_common(top * 2)]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.profiling", description=__doc__)
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    print(summary(args.files, args.top))


if __name__ == "__main__":
    main()
