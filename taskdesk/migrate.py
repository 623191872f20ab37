"""Apply Alembic migrations from code (the `taskdesk migrate` command, `dev` and the tests)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

ROOT = Path(__file__).resolve().parent.parent


def alembic_config(url: str) -> Config:
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(ROOT / "migrations"))
    cfg.attributes["url"] = url
    cfg.attributes["configure_logger"] = False
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Blocking: call from a thread when an event loop is running (env.py runs its own)."""
    command.upgrade(alembic_config(url), revision)


def check(url: str) -> None:
    """Raise if the models and the migrations disagree (autogenerate finds a difference)."""
    command.check(alembic_config(url))
