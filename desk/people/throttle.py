"""Rate limits shared by every web process through Redis: changes per user (GraphQL mutations
and page form posts alike) and sign-in attempts per account and per client address.

Fixed windows keyed by the injected clock (`rt.clock()`), so tests move time instead of
waiting; each key expires two windows later. Redis trouble lets requests through (logged):
sign-in and triggers must keep working while Redis restarts, and the argon2 cost still bounds a
guesser in the meantime.
"""

from __future__ import annotations

import hashlib
import logging
import math

from redis.exceptions import RedisError

from desk.core.errors import RateLimited
from desk.core.runtime import Runtime

log = logging.getLogger("taskdesk.throttle")
REDIS_TROUBLE = (RedisError, OSError, TimeoutError)


class Throttled(RateLimited):
    """Too many requests: slow down and try again later."""

    def __init__(self, message: str, retry_after: int) -> None:
        self.retry_after_seconds = max(1, retry_after)
        super().__init__(message)


class LoginThrottled(Throttled):
    code = "LOGIN_THROTTLED"


def _window(rt: Runtime, seconds: int) -> tuple[int, int]:
    """(window number, seconds until it ends) for windows of `seconds` on the injected clock."""
    now = rt.clock().timestamp()
    number = int(now // seconds)
    return number, math.ceil((number + 1) * seconds - now)


# INCR and EXPIRE of every key as one command: the same round trip a pipeline took, without
# redis-py building a pipeline per request (~6 % of an accepted export's web CPU, profiled).
_COUNT = """
local out = {}
for i, key in ipairs(KEYS) do
  out[i] = redis.call('INCR', key)
  redis.call('EXPIRE', key, ARGV[1])
end
return out
"""


async def _count(rt: Runtime, keys: list[str], ttl: int) -> list[int] | None:
    """Increment each key in one round trip; None when Redis cannot be reached."""
    try:
        replies = await rt.redis.eval(_COUNT, len(keys), *keys, str(ttl))  # type: ignore[misc]
    except REDIS_TROUBLE as exc:
        log.warning("rate limit skipped, Redis unavailable: %s", exc)
        return None
    return [int(n) for n in replies]


# --- Changes per user -------------------------------------------------------------------------


def mutation_key(rt: Runtime, user_id: int, window: int) -> str:
    return f"{rt.settings.queue_prefix}:ratelimit:mutation:{user_id}:{window}"


async def count_change(rt: Runtime, user_id: int) -> None:
    """Count one change (a GraphQL mutation or a page's form post) against the user's
    per-minute budget; raises Throttled (429, Retry-After) beyond MUTATION_RATE_PER_MINUTE."""
    window, left = _window(rt, 60)
    counts = await _count(rt, [mutation_key(rt, user_id, window)], 120)
    limit = rt.settings.mutation_rate_per_minute
    if counts is not None and counts[0] > limit:
        raise Throttled(f"At most {limit} changes a minute per user; try again in a minute.", left)


# --- Sign-in attempts -------------------------------------------------------------------------


def _login_keys(rt: Runtime, email: str, address: str, window: int) -> list[str]:
    # The e-mail is hashed: Redis need not hold a list of who was tried.
    account = email.strip().lower().encode("utf-8", "surrogatepass")
    account_key = hashlib.sha256(account).hexdigest()[:32]
    base = f"{rt.settings.queue_prefix}:throttle:login"
    return [f"{base}:account:{account_key}:{window}", f"{base}:address:{address}:{window}"]


async def login_attempt(rt: Runtime, email: str, address: str) -> None:
    """Count a sign-in attempt before its password is checked; raises LoginThrottled when the
    account or the client address has used up its attempts in this window (no hash is run)."""
    s = rt.settings
    window, left = _window(rt, s.login_window_seconds)
    counts = await _count(rt, _login_keys(rt, email, address, window), 2 * s.login_window_seconds)
    if counts is None:
        return
    per_account, per_address = counts
    if per_account > s.login_max_per_account or per_address > s.login_max_per_address:
        minutes = max(1, math.ceil(left / 60))
        raise LoginThrottled(
            f"Too many sign-in attempts. Please wait {minutes} minute"
            f"{'s' if minutes != 1 else ''} and try again.",
            left,
        )


async def login_succeeded(rt: Runtime, email: str, address: str) -> None:
    """A right password clears the account's count (its owner is back), not the address's."""
    window, _ = _window(rt, rt.settings.login_window_seconds)
    try:
        await rt.redis.delete(_login_keys(rt, email, address, window)[0])
    except REDIS_TROUBLE as exc:
        log.warning("could not clear the sign-in count: %s", exc)
