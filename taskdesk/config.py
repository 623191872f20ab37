"""Settings for the CLI commands: the environment, plus the dev servers when no URL is set.

`serve`, `worker`, `migrate`, `seed`, `tasks` and `import` run against DATABASE_URL /
REDIS_URL. When one is empty and `taskdesk dev` has its private servers running under the data
folder, the command uses those; otherwise it stops with a ConfigError that says what to do.

The data folder is --data-dir, else DATA_DIR, else `.taskdesk` (of the current folder, then of
the checkout). A `taskdesk dev` started with another one leaves a pointer (DEV_RECORD) in the
default folder while it runs, so the other commands find its servers without the flag.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from desk.core.settings import ConfigError, Settings, load_settings
from desk.work import mail_sink
from taskdesk.embedded import EmbeddedError, PostgresServer, RedisServer


def data_root(settings: Settings, data_dir: str | None = None) -> Path:
    """Where `taskdesk dev` keeps its servers: --data-dir, else DATA_DIR (default .taskdesk)."""
    return Path(data_dir or settings.data_dir)


def running_dev_database(root: Path) -> str | None:
    """The URL of the dev PostgreSQL under `root` if it is running, else None."""
    if not root.exists():  # nothing was ever started here: touch nothing
        return None
    try:
        pg = PostgresServer(root / "pg")
        return pg.url if pg.running() else None
    except (EmbeddedError, OSError):
        return None


def running_dev_redis(root: Path) -> str | None:
    rd = RedisServer(root / "redis")
    return rd.url if rd.running() else None


DEV_RECORD = "dev.json"  # in the default data folder while a `taskdesk dev` runs


def _is_running_dev(pid: object) -> bool:
    """Whether `pid` is a live taskdesk process (a record left by a killed dev is stale)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:  # a pid reused by another program since: not ours
        return b"taskdesk" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return sys.platform != "linux"


def write_dev_record(home: Path, data_dir: Path, web_url: str, urls: dict[str, str]) -> Path | None:
    """Leave a pointer to this dev's data folder in `home` (the default one); None when another
    running dev already owns it (that one stays what flagless commands find)."""
    record = home / DEV_RECORD
    try:
        if _is_running_dev(json.loads(record.read_text()).get("pid")):
            return None
    except (OSError, ValueError, AttributeError):
        pass
    body = {"pid": os.getpid(), "data_dir": str(data_dir.resolve()), "web": web_url, **urls}
    temp = record.with_suffix(f".{os.getpid()}.tmp")
    try:
        home.mkdir(parents=True, exist_ok=True)
        temp.write_text(json.dumps(body, indent=2) + "\n")
        temp.replace(record)  # readers never see half a file
    except OSError:  # a read-only folder: dev still runs, other commands need --data-dir
        return None
    return record


def remove_dev_record(record: Path) -> None:
    """Remove the pointer if it is still this process's."""
    try:
        if json.loads(record.read_text()).get("pid") == os.getpid():
            record.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def recorded_dev_data_dir(home: Path) -> Path | None:
    """The data folder of the running `taskdesk dev` that left a pointer in `home`, if any."""
    try:
        body = json.loads((home / DEV_RECORD).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(body, dict) or not _is_running_dev(body.get("pid")):
        return None
    return Path(str(body.get("data_dir", "")))


def _checkout_home() -> Path | None:
    """`.taskdesk` of the checkout this package runs from (None when installed elsewhere)."""
    top = Path(__file__).resolve().parent.parent
    return top / ".taskdesk" if (top / "pyproject.toml").exists() else None


def _candidate_roots(settings: Settings, data_dir: str | None) -> list[Path]:
    """Where to look for dev servers: the chosen folder only (--data-dir or DATA_DIR); else the
    default folder, the checkout's, and the folders a running dev points to from those."""
    root = data_root(settings, data_dir)
    if data_dir or os.environ.get("DATA_DIR"):
        return [root]
    out: list[Path] = []
    for home in (root, _checkout_home()):
        for candidate in (home, recorded_dev_data_dir(home) if home else None):
            if candidate and all(candidate.resolve() != seen.resolve() for seen in out):
                out.append(candidate)
    return out


def resolve_settings(data_dir: str | None = None, *, quiet: bool = False) -> Settings:
    """Validated settings with both URLs filled in, or ConfigError naming the missing one."""
    settings = load_settings()
    overrides: dict[str, object] = {}
    if data_dir:
        overrides["data_dir"] = data_dir
    roots = _candidate_roots(settings, data_dir)
    for name, current, find in (
        ("database_url", settings.database_url, running_dev_database),
        ("redis_url", settings.redis_url, running_dev_redis),
    ):
        if current:
            continue
        found = next(((r, u) for r in roots if (u := find(r)) is not None), None)
        if found is None:
            raise ConfigError(
                f"{name.upper()} is not set: run `taskdesk dev`, or set it "
                f"(no dev server is running under {roots[0]}/; if `taskdesk dev` runs with "
                "--data-dir DIR, pass the same --data-dir or set DATA_DIR)"
            )
        root, url = found
        if root != roots[0]:
            overrides["data_dir"] = str(root)
        if not quiet:
            print(f"taskdesk: {name.upper()} not set; using the dev server: {url}", file=sys.stderr)
        overrides[name] = url
    if not settings.smtp_url:  # e-mail goes to the running dev's sink, if there is one
        root = Path(str(overrides.get("data_dir", roots[0])))
        if sink := mail_sink.running_url(root):
            overrides["smtp_url"] = sink
    return load_settings(**overrides) if overrides else settings


def export_to_environ(settings: Settings) -> None:
    """Let child processes (uvicorn workers, the app factory) see the resolved URLs."""
    os.environ["DATABASE_URL"] = settings.database_url
    os.environ["REDIS_URL"] = settings.redis_url
    os.environ["DATA_DIR"] = settings.data_dir
    if settings.smtp_url:
        os.environ["SMTP_URL"] = settings.smtp_url
