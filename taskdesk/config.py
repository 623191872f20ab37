"""Settings for the CLI commands: the environment, plus the dev servers when no URL is set.

`serve`, `worker`, `migrate` and `seed` run against DATABASE_URL / REDIS_URL. When one is empty
and `taskdesk dev` has its private servers running under the data folder, the command uses
those; otherwise it stops with a ConfigError that says what to do.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from desk.settings import ConfigError, Settings, load_settings
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


def resolve_settings(data_dir: str | None = None, *, quiet: bool = False) -> Settings:
    """Validated settings with both URLs filled in, or ConfigError naming the missing one."""
    settings = load_settings()
    overrides: dict[str, object] = {}
    if data_dir:
        overrides["data_dir"] = data_dir
    root = data_root(settings, data_dir)
    for name, current, find in (
        ("database_url", settings.database_url, running_dev_database),
        ("redis_url", settings.redis_url, running_dev_redis),
    ):
        if current:
            continue
        url = find(root)
        if url is None:
            raise ConfigError(
                f"{name.upper()} is not set: run `taskdesk dev`, or set it "
                f"(no dev server is running under {root}/)"
            )
        if not quiet:
            print(f"taskdesk: {name.upper()} not set; using the dev server: {url}", file=sys.stderr)
        overrides[name] = url
    return load_settings(**overrides) if overrides else settings


def export_to_environ(settings: Settings) -> None:
    """Let child processes (uvicorn workers, the app factory) see the resolved URLs."""
    os.environ["DATABASE_URL"] = settings.database_url
    os.environ["REDIS_URL"] = settings.redis_url
    os.environ["DATA_DIR"] = settings.data_dir
