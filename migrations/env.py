"""Alembic environment (async): the URL comes from the caller or from DATABASE_URL."""

import asyncio
from logging.config import fileConfig

from alembic import context
from sqlalchemy import pool
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine
from sqlmodel import SQLModel

# Imported for their side effect: they register the tables on SQLModel.metadata.
import desk.core.clock_models
import desk.core.mail_models
import desk.core.models
import desk.core.thread_models  # noqa: F401
from desk.core.settings import load_settings

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = SQLModel.metadata


def _url() -> str:
    url = config.attributes.get("url") or load_settings().direct_sqlalchemy_url
    if not url:
        raise SystemExit(
            "DATABASE_URL is not set (use `taskdesk migrate`, which knows the dev servers)"
        )
    return str(url)


def do_run_migrations(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


async def run_async_migrations() -> None:
    # Named like every taskdesk connection (docs/architecture.md, "Connections").
    engine = create_async_engine(
        _url(), poolclass=pool.NullPool, connect_args={"application_name": "taskdesk-migrate"}
    )
    async with engine.connect() as connection:
        await connection.run_sync(do_run_migrations)
    await engine.dispose()


if context.is_offline_mode():
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(run_async_migrations())
