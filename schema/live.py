"""What a live GraphQL subscription holds besides its resolver (docs/graphql.md, "Subscriptions"):
the credential its connection was opened with, the limits on how many run at once and how fast
they are started, and the context each one runs with.

- `Hub`, one per web app: every person's active subscriptions in this process
  (SUBSCRIPTIONS_PER_PERSON) and the subscribe counts of the current minute.
- `Connection`, one per WebSocket (or per event stream, which carries one subscription): its
  active subscriptions (SUBSCRIPTIONS_PER_CONNECTION), its subscribe rate, its `Credential`.
- `StreamContext`, the GraphQL context of one subscription: the request context of
  `schema.context` plus its connection, made per operation (`operation()`) so operations of one
  WebSocket never share loaders or a response budget, and `fresh()` before each event, since a
  subscription lives for hours: a DataLoader keeps what it read, and an event must read the
  ledger as it is now (docs/architecture.md, "Visibility": never cached).

The rate is counted here, in memory, not through `desk.people.throttle`: that counts a person's
changes across processes in Redis, while a connection lives in one process and a subscribe
changes nothing. Time is the runtime's injected clock.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from desk.core.errors import DeskError
from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.people import sessions, users
from desk.people.throttle import Throttled
from schema.context import Context

SUBSCRIBES_PER_MINUTE = 60  # subscribe operations one connection (an SSE person) may start


class TooManySubscriptions(DeskError):
    """Too many subscriptions at once: complete one before starting another."""

    code = "TOO_MANY_SUBSCRIPTIONS"
    http_status = 429


@dataclass(frozen=True)
class Credential:
    """How a connection signed in: a session cookie's secret or an API token. Asked again when
    the change feed says a session of its person ended, and at every subscribe: logout, a
    password change, removal from a team or a revoked token end its streams."""

    via: Literal["cookie", "token"]
    secret: str = field(repr=False)

    async def user_id(self, rt: Runtime) -> int | None:
        if self.via == "token":
            return await users.user_for_token(rt, self.secret)
        found = await sessions.lookup(rt, self.secret)
        return found.user_id if found else None


class Hub:
    """The web app's bookkeeping of live subscriptions (one event loop: no locks needed)."""

    def __init__(self, settings: Settings) -> None:
        self.per_connection = settings.subscriptions_per_connection
        self.per_person = settings.subscriptions_per_person
        self.held: Counter[int] = Counter()  # person -> active subscriptions
        self._rates: dict[object, tuple[int, int]] = {}  # rate key -> (minute, subscribes)

    def connection(self, person: int | None = None) -> Connection:
        """A new WebSocket's bookkeeping; with `person`, an event stream's, whose subscribe rate
        is counted per person (each stream is a request of its own)."""
        return Connection(self, person)

    def count(self, key: object, now: float, *, dry: bool = False) -> None:
        """One subscribe for `key` in the minute of `now` (epoch seconds); Throttled beyond
        SUBSCRIBES_PER_MINUTE. `dry`: only whether one more would pass."""
        minute = int(now // 60)
        seen, n = self._rates.get(key, (minute, 0))
        n = n + 1 if seen == minute else 1
        if not dry:
            self._rates[key] = (minute, n)
        if len(self._rates) > 10_000:  # keys of past minutes are worth nothing
            self._rates = {k: v for k, v in self._rates.items() if v[0] == minute}
        if n > SUBSCRIBES_PER_MINUTE:
            left = math.ceil((minute + 1) * 60 - now)
            raise Throttled(
                f"At most {SUBSCRIBES_PER_MINUTE} subscribe operations a minute per connection; "
                "try again in a minute.",
                left,
            )

    def forget(self, key: object) -> None:
        self._rates.pop(key, None)


class Connection:
    """One WebSocket's (or event stream's) subscriptions, rate and credential."""

    def __init__(self, hub: Hub, person: int | None = None) -> None:
        self.hub = hub
        self.active = 0
        self.credential: Credential | None = None
        self._rate_key: object = ("person", person) if person is not None else self

    def admit(self, user_id: int, now: float) -> None:
        """Count a subscribe and take a slot for it, or raise (Throttled, TooManySubscriptions).
        Every admitted subscription calls `leave` once when it ends."""
        self.hub.count(self._rate_key, now)
        self._room(user_id)
        self.active += 1
        self.hub.held[user_id] += 1

    def check(self, user_id: int, now: float) -> None:
        """Raise what `admit` would raise now, counting and taking nothing (an event stream's
        early answer: a status, not an event)."""
        self.hub.count(self._rate_key, now, dry=True)
        self._room(user_id)

    def _room(self, user_id: int) -> None:
        if self.active >= self.hub.per_connection:
            limit = self.hub.per_connection
            raise TooManySubscriptions(
                f"At most {limit} subscriptions at once on one connection: complete one first."
            )
        if self.hub.held[user_id] >= self.hub.per_person:
            limit = self.hub.per_person
            raise TooManySubscriptions(
                f"At most {limit} subscriptions at once per person: complete one first."
            )

    def leave(self, user_id: int) -> None:
        self.active -= 1
        self.hub.held[user_id] -= 1
        if self.hub.held[user_id] <= 0:
            del self.hub.held[user_id]

    def close(self) -> None:
        if self._rate_key is self:
            self.hub.forget(self)


@dataclass
class StreamContext(Context):
    """The context of one subscription (see the module docstring)."""

    live: Connection | None = None

    def operation(self) -> StreamContext:
        """A context of its own for one operation on this connection, signed in as it is."""
        return StreamContext(
            rt=self.rt,
            request=self.request,
            request_id=self.request_id,
            caller=self.caller,
            auth_error=self.auth_error,
            live=self.live,
        )

    def fresh(self) -> None:
        """Before each event: nothing read for an earlier event is reused (loaders), and each
        event has the whole response budget (GRAPHQL_MAX_RESPONSE_BYTES)."""
        self._loaders = None
        self._spent = 0
