"""Fixtures of the e-mail tests: a real SMTP server process (tests/smtp_server.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from desk.core.runtime import Runtime
from desk.core.settings import Settings
from tests.helpers import wait_until
from tests.smtp_server import SmtpServer


@pytest.fixture
def smtp(tmp_path: Path) -> Iterator[SmtpServer]:
    server = SmtpServer(tmp_path / "smtp")
    try:
        wait_until(server.ready, 30, "the SMTP server to listen")
        yield server
    finally:
        server.stop()


@pytest.fixture
def mail_settings(settings: Settings, smtp: SmtpServer) -> Settings:
    """The test's settings, sending to the SMTP server above, retrying quickly."""
    return settings.model_copy(
        update={
            "smtp_url": smtp.url,
            "public_url": "https://desk.acme.test",
            "retry_base_seconds": 0.2,
            "retry_max_seconds": 1.0,
        }
    )


@pytest.fixture
def mail_rt(rt: Runtime, mail_settings: Settings) -> Runtime:
    rt.settings = mail_settings
    return rt
