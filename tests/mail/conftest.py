"""Fixtures of the e-mail tests: settings and a runtime sending to the real SMTP server process
of tests/conftest.py's `smtp` fixture (tests/smtp_server.py)."""

from __future__ import annotations

import pytest

from desk.core.runtime import Runtime
from desk.core.settings import Settings
from tests.smtp_server import SmtpServer


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
