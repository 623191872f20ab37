"""SMTP_URL, MAIL_FROM and PUBLIC_URL are checked at start: nonsense stops the process with a
line naming the variable and what to write instead."""

from __future__ import annotations

import pytest

from desk.core.settings import ConfigError, load_settings, smtp_parts


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("SMTP_URL", "mail.example.com:25", "smtp://"),
        ("SMTP_URL", "http://mail.example.com", "smtp://"),
        ("SMTP_URL", "smtp://", "host"),
        ("SMTP_URL", "smtp://mail.example.com:99999", "port"),
        ("SMTP_URL", "smtp://mail.example.com:25?tls=yes", "starttls"),
        ("SMTP_URL", "smtp://mail.example.com:25?starttls=maybe", "starttls"),
        ("SMTP_URL", "smtps://mail.example.com?starttls=1", "TLS already"),
        ("MAIL_FROM", "nobody", "address"),
        ("MAIL_FROM", "desk@example.com\r\nBcc: x@y.test", "address"),
        ("PUBLIC_URL", "desk.example.com", "http"),
        ("PUBLIC_URL", "ftp://desk.example.com", "http"),
    ],
)
def test_nonsense_names_its_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, says: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as exc:
        load_settings()
    text = str(exc.value)
    assert f"  {variable}: " in text and says in text and "Traceback" not in text


def test_the_forms_that_work() -> None:
    plain = smtp_parts("smtp://mail.example.com")
    assert (plain.host, plain.port, plain.implicit_tls, plain.starttls) == (
        "mail.example.com",
        25,
        False,
        False,
    )
    tls = smtp_parts("smtps://u%40x:p%2Fw@mail.example.com")
    assert (tls.port, tls.implicit_tls, tls.username, tls.password) == (465, True, "u@x", "p/w")
    upgrade = smtp_parts("smtp://mail.example.com:587?starttls=1")
    assert (upgrade.port, upgrade.starttls) == (587, True)
    s = load_settings(public_url="https://desk.example.com/", mail_from="Desk <desk@example.com>")
    assert s.public_url == "https://desk.example.com" and s.smtp_url == ""
