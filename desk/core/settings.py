"""Configuration: every setting taskdesk reads from the environment, validated once at start."""

from __future__ import annotations

import base64
import email.utils
import ipaddress
import ssl
import urllib.parse
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from typing import Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PLACEHOLDER_SECRETS = frozenset({"", "changeme", "change-me", "secret", "dev-secret-change-me"})
DEV_SECRET = "dev-secret-change-me"
# A fixed Fernet key for dev and tests only (refused in production): mailboxes' passwords are
# kept encrypted with MAILBOX_KEY (desk/work/mailboxes.py).
DEV_MAILBOX_KEY = "dGFza2Rlc2stZGV2LW1haWxib3gta2V5LTMyLWJ5dGU="


class Env(StrEnum):
    DEV = "dev"
    TEST = "test"
    PROD = "prod"


class ConfigError(SystemExit):
    """A setting is nonsense: the process stops with a message naming the variable."""


class Settings(BaseSettings):
    """Read from environment variables (names in upper case); see README's configuration table."""

    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    taskdesk_env: Env = Env.DEV
    # Empty means "run private embedded servers" (taskdesk dev, the tests).
    database_url: str = ""
    # What DATABASE_URL reaches: PostgreSQL itself ("none"), or a transaction pooler such as
    # PgBouncer in transaction mode ("transaction"; docs/architecture.md, "Connections"): then
    # connections carry no session state — no startup options, no prepared statements.
    db_pooler: Literal["none", "transaction"] = "none"
    # PostgreSQL itself, for what needs a session: migrations and the change feed's LISTEN.
    # Required with DB_POOLER=transaction; empty otherwise means DATABASE_URL.
    direct_database_url: str = ""
    # The change feed's listener only (older name, still honoured): empty means the direct URL.
    feed_database_url: str = ""
    redis_url: str = ""
    queue_prefix: str = Field(default="taskdesk", pattern=r"^[A-Za-z0-9_.:-]{1,64}$")
    secret_key: str = DEV_SECRET
    data_dir: str = ".taskdesk"

    # A web process's one pool (desk/core/pg.py; a worker sizes its own by its slots). The
    # README's "Connections" gives the deployment's budget; `taskdesk doctor` checks it.
    db_pool_size: int = Field(default=10, ge=1, le=100)

    export_max_active_per_user: int = Field(default=3, ge=1, le=1000)
    export_max_per_hour: int = Field(default=20, ge=1, le=100_000)
    export_max_rows: int = Field(default=2_000_000, ge=1)
    # CSV chunk builds running at once across every worker on this database (each takes a
    # database core while it runs): an export alone uses two, several exports take turns.
    export_build_slots: int = Field(default=2, ge=1, le=64)
    export_retention_hours: float = Field(default=24.0, gt=0)
    task_retention_days: float = Field(default=30.0, gt=0)

    import_max_bytes: int = Field(default=50 * 1024 * 1024, ge=1024)
    # A ticket message's files (docs/architecture.md, "Conversation"): each at most
    # ATTACHMENT_MAX_BYTES, at most MESSAGE_MAX_FILES of them and MESSAGE_MAX_BYTES in all.
    attachment_max_bytes: int = Field(default=25 * 1024 * 1024, ge=1024, le=1024**3)
    message_max_files: int = Field(default=10, ge=1, le=100)
    message_max_bytes: int = Field(default=50 * 1024 * 1024, ge=1024, le=4 * 1024**3)
    # Each batch pays a transaction, a stage, a progress write and a commit: at 1,000 rows that
    # was about a fifth of a 100k import (docs/architecture.md, "Import batches").
    import_batch_rows: int = Field(default=10_000, ge=1, le=100_000)

    lease_seconds: float = Field(default=30.0, ge=1, le=3600)
    # How long one attempt of a task may run (jobs/limits.py, docs/architecture.md "Run-time
    # limits"): past it the attempt is stopped, counted as failed and its slot freed. Exports
    # and imports add ROWS_TIME_LIMIT_SECONDS for every 100,000 rows once they know their size.
    email_time_limit_seconds: float = Field(default=120.0, ge=1, le=86_400)
    reminder_time_limit_seconds: float = Field(default=60.0, ge=1, le=86_400)
    noop_time_limit_seconds: float = Field(default=3600.0, ge=1, le=7 * 86_400)
    export_time_limit_seconds: float = Field(default=300.0, ge=1, le=7 * 86_400)
    import_time_limit_seconds: float = Field(default=300.0, ge=1, le=7 * 86_400)
    rows_time_limit_seconds: float = Field(default=120.0, ge=0, le=86_400)
    max_attempts: int = Field(default=5, ge=1, le=100)
    retry_base_seconds: float = Field(default=2.0, gt=0, le=3600)
    retry_max_seconds: float = Field(default=300.0, gt=0)
    redelivery_seconds: float = Field(default=15.0, ge=1, le=3600)
    dispatch_interval: float = Field(default=0.5, gt=0, le=60)
    dispatch_lookahead_seconds: float = Field(default=3600.0, ge=0, le=80_000)
    # How often each worker's scheduler looks for due export schedules (jobs/scheduler.py); an
    # occurrence runs at most this late.
    scheduler_interval_seconds: float = Field(default=15.0, ge=0.05, le=600)
    # Slots per worker process and lane (desk/ledger/lanes.py): short tasks (reminders) and long ones
    # (exports, imports) never take each other's slots.
    worker_max_jobs: int = Field(default=10, ge=1, le=1000)
    worker_long_slots: int = Field(default=3, ge=1, le=1000)
    long_team_max_running: int = Field(default=2, ge=1, le=1000)
    # At most this many of one team's due e-mails wait in Redis at a time (desk/ledger/sends.py,
    # "Fair sends"): another team's reminder waits behind at most this many, not a whole storm.
    team_mail_max_queued: int = Field(default=50, ge=1, le=100_000)
    # 0.01 s: a task starts ~5 ms after its enqueue on average (0.05 s: ~25 ms); an idle worker
    # polls Redis 100 times a second for it (~5 % of a core, measured by bench/).
    worker_poll_delay: float = Field(default=0.01, gt=0, le=10)
    # An idle lane waits this long at most between polls: the send script's wake-up makes it poll
    # at once (jobs/wake.py, docs/architecture.md "Wake-ups"), so this bounds only what a lost
    # wake-up costs; a lane with work in flight, or without its wake-ups, polls every
    # WORKER_POLL_DELAY as before.
    worker_idle_poll_seconds: float = Field(default=0.25, gt=0, le=10)
    worker_grace_seconds: float = Field(default=20.0, ge=0, le=3600)
    heartbeat_ttl_seconds: int = Field(default=20, ge=2, le=3600)

    mutation_rate_per_minute: int = Field(default=120, ge=1)
    # How long a client's idempotency key names its task (a retry or double click within it gets
    # the same task, even one that has finished).
    idempotency_window_seconds: float = Field(default=600.0, ge=10, le=86_400)

    # Request bodies are counted while they are read (web/limits.py): page forms at this size,
    # sign-in and GraphQL at their own small fixed sizes, import uploads at IMPORT_MAX_BYTES.
    form_max_bytes: int = Field(default=1024 * 1024, ge=16 * 1024, le=64 * 1024 * 1024)
    # Failed sign-ins in a sliding window (desk/people/throttle.py): per account from one client
    # address, per account from all addresses, per address over all accounts.
    login_window_seconds: int = Field(default=900, ge=10, le=86_400)
    login_max_per_pair: int = Field(default=10, ge=1, le=10_000)
    login_max_per_account: int = Field(default=100, ge=1, le=100_000)
    login_max_per_address: int = Field(default=100, ge=1, le=100_000)
    # Mail in (desk/work/mail_gate.py): a sender's messages into one mailbox beyond this many in
    # the window are marked throttled (kept raw, no ticket, no mail out); the admins hear once.
    inbound_flood_max: int = Field(default=20, ge=1, le=100_000)
    inbound_flood_window_seconds: int = Field(default=600, ge=10, le=86_400)
    # argon2 runs in this many threads at most, off the event loop (each hash takes ~64 MiB).
    password_hash_threads: int = Field(default=2, ge=1, le=64)
    # Onboarding links (desk/people/invitations.py, desk/people/resets.py): how long they work,
    # and how many an admin may send (invitations) or an address and a client may ask for
    # (password resets) per hour.
    invitation_ttl_hours: float = Field(default=168.0, gt=0, le=24 * 90)
    invitation_max_per_hour: int = Field(default=50, ge=1, le=10_000)
    password_reset_ttl_minutes: int = Field(default=60, ge=5, le=24 * 60)
    password_reset_max_per_email: int = Field(default=5, ge=1, le=1000)
    password_reset_max_per_client: int = Field(default=20, ge=1, le=10_000)
    # /health detail and /metrics: a bearer token, and/or client addresses or networks
    # ("10.0.0.0/8,127.0.0.1"). With neither, only dev/test show them; prod says a plain "ok".
    ops_token: str = Field(default="", max_length=256)
    ops_allowed_addresses: str = Field(default="", max_length=2000)
    # GraphQL cost bounds (docs/graphql.md): a request's estimated cost (list sizes x nested
    # fields), the database connections one request may hold at once, the bytes of ticket text
    # one response may carry, and how long one statement of the web process may run.
    graphql_max_cost: int = Field(default=10_000, ge=100, le=1_000_000)
    graphql_request_connections: int = Field(default=2, ge=1, le=20)
    graphql_max_response_bytes: int = Field(default=8 * 1024 * 1024, ge=64 * 1024, le=2**30)
    web_statement_timeout_ms: int = Field(default=5_000, ge=100, le=600_000)
    # Requests one web process serves at a time (web/overload.py); more are refused at once
    # with 503 + Retry-After instead of all being served late. 48: above the benchmarks' 32
    # closed-loop connections. The bound adapts between the two counts so that answers start
    # within the target (a saturated process serves no more with more in flight, only later);
    # a minimum above the maximum is the maximum (setting only WEB_MAX_IN_FLIGHT low is sane).
    web_max_in_flight: int = Field(default=48, ge=1, le=10_000)
    web_min_in_flight: int = Field(default=8, ge=1, le=10_000)
    web_target_latency_ms: int = Field(default=60, ge=5, le=60_000)
    # Telemetry (desk/core/logs.py, desk/core/metrics.py, desk/core/tracing.py).
    log_format: Literal["text", "json"] = "text"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # A worker serves its own metrics on this port (0: off); one port per worker on a host.
    worker_metrics_port: int = Field(default=0, ge=0, le=65535)
    # Empty: no tracing at all (the opentelemetry packages are not even imported).
    otel_exporter_otlp_endpoint: str = Field(default="", max_length=500)
    # GraphQL subscriptions active at once (docs/graphql.md, "Subscriptions"): on one WebSocket,
    # and for one person across this web process (every WebSocket and event stream together).
    subscriptions_per_connection: int = Field(default=10, ge=1, le=1000)
    subscriptions_per_person: int = Field(default=50, ge=1, le=100_000)
    # E-mail (desk/work/mail.py): smtp://[user:pass@]host:port (add ?starttls=1 to upgrade the
    # connection), smtps:// for implicit TLS. Empty: EMAIL tasks fail saying so (`taskdesk dev`
    # points it at its own sink).
    smtp_url: str = Field(default="", max_length=500)
    mail_from: str = Field(default="taskdesk <taskdesk@localhost>", min_length=3, max_length=320)
    # The address people reach this deployment at: links in e-mails are built from it.
    public_url: str = Field(default="http://127.0.0.1:8000", min_length=8, max_length=500)
    # Mail in: the Fernet key (`python -c "from cryptography.fernet import Fernet;
    # print(Fernet.generate_key().decode())"`) that keeps mailboxes' passwords encrypted at rest.
    # Empty: the dev key outside production; in production no mailbox can be connected.
    mailbox_key: str = ""
    # Fetching mail (desk/work/fetch.py, docs/architecture.md "Mail in"). Each IMAP step (connect,
    # login, select, a batch's FETCH) waits at most MAIL_IMAP_TIMEOUT_SECONDS, so a hung server
    # never holds a fetch; one attempt of a fetch or a parse runs at most its own time limit.
    mail_imap_timeout_seconds: float = Field(default=30.0, ge=1, le=600)
    mail_fetch_time_limit_seconds: float = Field(default=180.0, ge=5, le=86_400)
    mail_parse_time_limit_seconds: float = Field(default=300.0, ge=5, le=86_400)
    mail_fetch_batch: int = Field(default=50, ge=1, le=1000)
    # Where the server offers IDLE, a fetch that found nothing waits this long for new mail and
    # fetches at once when the server announces it (0: no IDLE, the mailbox's cadence only). At
    # most MAIL_IDLE_MAX_PER_WORKER fetches of one worker wait in IDLE at once (each holds a
    # short-lane slot); beyond that a mailbox is fetched on its cadence.
    mail_idle_seconds: float = Field(default=60.0, ge=0, le=3600)
    mail_idle_max_per_worker: int = Field(default=4, ge=0, le=1000)
    # The operators' console (desk/console/mailboxes.py) and /metrics call an enabled mailbox
    # stale when its last good fetch is older than this many minutes.
    mailbox_stale_minutes: int = Field(default=10, ge=1, le=10_080)
    # A PEM file of certificate authorities trusted for IMAP over TLS besides the system's (a
    # private CA, a self-signed test server). Certificates are always verified.
    mail_ca_file: str = Field(default="", max_length=1000)

    @field_validator("database_url", "direct_database_url", "feed_database_url")
    @classmethod
    def _check_database_url(cls, v: str) -> str:
        if v and not v.startswith(("postgresql://", "postgresql+psycopg://", "postgres://")):
            raise ValueError("must be a postgresql:// URL (or empty for the embedded server)")
        return v

    @field_validator("mail_ca_file")
    @classmethod
    def _check_mail_ca_file(cls, v: str) -> str:
        if v:
            try:
                ssl.create_default_context().load_verify_locations(cafile=v)
            except (OSError, ssl.SSLError) as exc:
                raise ValueError(f"must be a readable PEM file of CA certificates: {exc}") from None
        return v

    @model_validator(mode="after")
    def _check_mail_limits(self) -> Settings:
        if self.mail_idle_seconds + self.mail_imap_timeout_seconds >= (
            self.mail_fetch_time_limit_seconds
        ):
            raise ValueError(
                "MAIL_FETCH_TIME_LIMIT_SECONDS must exceed MAIL_IDLE_SECONDS + "
                "MAIL_IMAP_TIMEOUT_SECONDS: a fetch waiting in IDLE must end within its limit"
            )
        return self

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, v: str) -> str:
        if v and not v.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must be a redis://, rediss:// or unix:// URL (or empty)")
        return v

    @field_validator("smtp_url")
    @classmethod
    def _check_smtp_url(cls, v: str) -> str:
        if v:
            smtp_parts(v)  # raises ValueError naming what is wrong
        return v

    @field_validator("mail_from")
    @classmethod
    def _check_mail_from(cls, v: str) -> str:
        _, address = email.utils.parseaddr(v)
        if "@" not in address or any(c in v for c in "\r\n"):
            raise ValueError("must be an address like `taskdesk <desk@example.com>`")
        return v

    @field_validator("public_url")
    @classmethod
    def _check_public_url(cls, v: str) -> str:
        parts = urllib.parse.urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
            raise ValueError("must be an http:// or https:// URL such as https://desk.example.com")
        return v.rstrip("/")

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, v: object) -> object:
        return v.upper() if isinstance(v, str) else v

    @field_validator("otel_exporter_otlp_endpoint")
    @classmethod
    def _check_otlp(cls, v: str) -> str:
        if v and not v.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL (or empty: no tracing)")
        return v

    @field_validator("secret_key")
    @classmethod
    def _check_secret(cls, v: str, info: ValidationInfo) -> str:
        if info.data.get("taskdesk_env") is Env.PROD and (v in PLACEHOLDER_SECRETS or len(v) < 16):
            raise ValueError(
                "a placeholder or shorter than 16 characters; set a long random value in "
                "production (e.g. `openssl rand -hex 32`)"
            )
        return v

    @field_validator("mailbox_key")
    @classmethod
    def _check_mailbox_key(cls, v: str, info: ValidationInfo) -> str:
        if not v:
            return v
        try:
            key = base64.urlsafe_b64decode(v.encode())
        except ValueError:
            key = b""
        if len(key) != 32 or len(v) != 44:
            raise ValueError("must be a Fernet key: 32 bytes in URL-safe base64 (44 characters)")
        if info.data.get("taskdesk_env") is Env.PROD and v == DEV_MAILBOX_KEY:
            raise ValueError("is the dev key; generate one for production (Fernet.generate_key())")
        return v

    @property
    def mailbox_secret(self) -> str:
        """The Fernet key of mailboxes' passwords; ValueError when production has none."""
        if self.mailbox_key:
            return self.mailbox_key
        if self.taskdesk_env is Env.PROD:
            raise ValueError("MAILBOX_KEY is not set: no mailbox password can be kept")
        return DEV_MAILBOX_KEY

    @field_validator("ops_token")
    @classmethod
    def _check_ops_token(cls, v: str) -> str:
        if v and len(v) < 16:
            raise ValueError("at least 16 characters (or empty to accept no token)")
        return v

    @field_validator("ops_allowed_addresses")
    @classmethod
    def _check_ops_addresses(cls, v: str) -> str:
        for item in filter(None, (x.strip() for x in v.split(","))):
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise ValueError(f"{item!r} is not an IP address or network") from None
        return v

    @cached_property
    def ops_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        items = (x.strip() for x in self.ops_allowed_addresses.split(","))
        return tuple(ipaddress.ip_network(x, strict=False) for x in items if x)

    @model_validator(mode="after")
    def _check_retry(self) -> Settings:
        if self.retry_max_seconds < self.retry_base_seconds:
            raise ValueError("RETRY_MAX_SECONDS must be >= RETRY_BASE_SECONDS")
        return self

    @model_validator(mode="after")
    def _check_polls(self) -> Settings:
        if self.worker_idle_poll_seconds < self.worker_poll_delay:
            raise ValueError("WORKER_IDLE_POLL_SECONDS must be >= WORKER_POLL_DELAY")
        return self

    @model_validator(mode="after")
    def _check_pooler(self) -> Settings:
        if self.db_pooler == "transaction" and self.database_url and not self.direct_database_url:
            raise ValueError(
                "DB_POOLER=transaction needs DIRECT_DATABASE_URL: a URL that reaches PostgreSQL "
                "itself, for migrations and the change feed's LISTEN (a transaction pooler "
                "keeps neither)"
            )
        return self

    @property
    def pooled(self) -> bool:
        """DATABASE_URL goes through a transaction pooler: no session state on its connections."""
        return self.db_pooler == "transaction"

    @cached_property
    def sqlalchemy_url(self) -> str:
        """The database URL in the form SQLAlchemy wants (psycopg 3 driver)."""
        return _sqlalchemy(self.database_url)

    @cached_property
    def libpq_url(self) -> str:
        """The database URL in the form psycopg wants."""
        return _libpq(self.database_url)

    @cached_property
    def feed_url(self) -> str:
        """The change feed's direct connection, in the form psycopg wants."""
        return _libpq(self.feed_database_url or self.direct_database_url or self.database_url)

    @cached_property
    def direct_url(self) -> str:
        """PostgreSQL itself (never a pooler), in the form psycopg wants."""
        return _libpq(self.direct_database_url or self.database_url)

    @cached_property
    def direct_sqlalchemy_url(self) -> str:
        """PostgreSQL itself (migrations), in the form SQLAlchemy wants."""
        return _sqlalchemy(self.direct_database_url or self.database_url)


def _sqlalchemy(url: str) -> str:
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _libpq(url: str) -> str:
    for prefix in ("postgresql+psycopg://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql://" + url[len(prefix) :]
    return url


@dataclass(frozen=True)
class SmtpParts:
    """SMTP_URL taken apart (never logged whole: it may carry a password)."""

    host: str
    port: int
    implicit_tls: bool
    starttls: bool
    username: str | None
    password: str | None


def smtp_parts(url: str) -> SmtpParts:
    """`smtp://[user:pass@]host[:port][?starttls=1]` or `smtps://…`; ValueError on anything else."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("smtp", "smtps"):
        raise ValueError("must be smtp://[user:pass@]host:port or smtps://… (or empty)")
    query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
    if set(query) - {"starttls"} or query.get("starttls", ["0"])[-1] not in ("0", "1"):
        raise ValueError("the only option is ?starttls=1 (or 0)")
    try:
        port = parts.port
    except ValueError:
        raise ValueError("the port must be a number from 1 to 65535") from None
    if not parts.hostname:
        raise ValueError("names no host (smtp://host:port)")
    implicit = parts.scheme == "smtps"
    starttls = query.get("starttls", ["0"])[-1] == "1"
    if implicit and starttls:
        raise ValueError("smtps:// is TLS already; ?starttls=1 is for smtp://")
    return SmtpParts(
        host=parts.hostname,
        port=port or (465 if implicit else 25),
        implicit_tls=implicit,
        starttls=starttls,
        username=urllib.parse.unquote(parts.username) if parts.username else None,
        password=urllib.parse.unquote(parts.password) if parts.password else None,
    )


def load_settings(**overrides: object) -> Settings:
    """Build settings or stop the process with one readable line per bad variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            name = "_".join(str(p) for p in err["loc"]).upper() or "configuration"
            lines.append(f"  {name}: {err['msg'].removeprefix('Value error, ')}")
        raise ConfigError("taskdesk: invalid configuration\n" + "\n".join(lines)) from None
