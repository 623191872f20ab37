"""Settings: nonsense stops the process with a message naming the variable."""

from __future__ import annotations

import pytest

from desk.core.settings import ConfigError, Env, Settings, load_settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests here read only what they set (CI may export DATABASE_URL and friends)."""
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)


def message(exc: pytest.ExceptionInfo[ConfigError]) -> str:
    return str(exc.value.code)


def test_defaults_are_a_valid_dev_configuration() -> None:
    s = load_settings()
    assert s.taskdesk_env is Env.DEV
    assert s.database_url == "" and s.redis_url == ""  # dev/test start embedded servers


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("LEASE_SECONDS", "soon"),
        ("LEASE_SECONDS", "0"),
        ("MAX_ATTEMPTS", "-1"),
        ("TASKDESK_ENV", "staging"),
        ("QUEUE_PREFIX", "has spaces"),
        ("DATABASE_URL", "mysql://db/x"),
        ("REDIS_URL", "http://cache:6379"),
        ("EXPORT_MAX_ROWS", "lots"),
    ],
)
def test_a_bad_value_names_its_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as exc:
        load_settings()
    assert f"  {variable}: " in message(exc)
    assert "Traceback" not in message(exc)


def test_every_bad_variable_gets_its_own_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEASE_SECONDS", "x")
    monkeypatch.setenv("REDIS_URL", "nope")
    with pytest.raises(ConfigError) as exc:
        load_settings()
    lines = message(exc).splitlines()
    assert lines[0] == "taskdesk: invalid configuration"
    assert any(line.startswith("  LEASE_SECONDS:") for line in lines)
    assert any(line.startswith("  REDIS_URL:") for line in lines)


def test_config_error_stops_the_process() -> None:
    assert issubclass(ConfigError, SystemExit)


@pytest.mark.parametrize("secret", [None, "changeme", "dev-secret-change-me", "short"])
def test_placeholder_secret_refused_in_prod(
    monkeypatch: pytest.MonkeyPatch, secret: str | None
) -> None:
    monkeypatch.setenv("TASKDESK_ENV", "prod")
    if secret is not None:
        monkeypatch.setenv("SECRET_KEY", secret)
    with pytest.raises(ConfigError) as exc:
        load_settings()
    assert "SECRET_KEY" in message(exc)


@pytest.mark.parametrize("env", ["dev", "test"])
def test_placeholder_secret_allowed_outside_prod(monkeypatch: pytest.MonkeyPatch, env: str) -> None:
    monkeypatch.setenv("TASKDESK_ENV", env)
    assert load_settings().secret_key == "dev-secret-change-me"


def test_a_real_secret_is_accepted_in_prod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKDESK_ENV", "prod")
    monkeypatch.setenv("SECRET_KEY", "3f0c1c7e9a4b5d6e7f8091a2b3c4d5e6")
    assert load_settings().taskdesk_env is Env.PROD


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:p@db:5432/taskdesk",
        "postgres://u:p@db/taskdesk",
        "postgresql+psycopg://u:p@db/taskdesk",
        "postgresql://taskdesk@/taskdesk?host=/tmp/sock&port=5432",
    ],
)
def test_database_url_forms(url: str) -> None:
    s = load_settings(database_url=url)
    assert s.sqlalchemy_url.startswith("postgresql+psycopg://")
    assert s.libpq_url.startswith("postgresql://")
    assert s.libpq_url.split("://", 1)[1] == url.split("://", 1)[1]


@pytest.mark.parametrize(
    "url", ["redis://localhost:6379/0", "rediss://u:p@cache:6380/1", "unix:///tmp/redis.sock"]
)
def test_redis_url_forms(url: str) -> None:
    assert load_settings(redis_url=url).redis_url == url


def test_names_are_case_insensitive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("queue_prefix", "lower")
    assert load_settings().queue_prefix == "lower"


def test_a_transaction_pooler_needs_a_direct_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://app@pgbouncer:6432/taskdesk")
    monkeypatch.setenv("DB_POOLER", "transaction")
    with pytest.raises(ConfigError) as exc:
        load_settings()
    assert "DIRECT_DATABASE_URL" in message(exc)
    monkeypatch.setenv("DIRECT_DATABASE_URL", "postgresql://app@db:5432/taskdesk")
    s = load_settings()
    assert s.pooled and s.direct_sqlalchemy_url == "postgresql+psycopg://app@db:5432/taskdesk"
    assert s.feed_url == "postgresql://app@db:5432/taskdesk"
    monkeypatch.setenv("DB_POOLER", "session")
    with pytest.raises(ConfigError) as exc:
        load_settings()
    assert "DB_POOLER" in message(exc)
