"""Rate limits shared by every web process through Redis: changes per user (GraphQL mutations
and page form posts alike) and failed sign-ins (per account and client address, per account,
per address; see "Sign-in attempts" below).

Both read the injected clock (`rt.clock()`), so tests move time instead of waiting: changes are
counted in fixed one-minute windows (each key expires two windows later), sign-ins in sliding
windows. Redis trouble lets requests through (logged):
sign-in and triggers must keep working while Redis restarts, and the argon2 cost still bounds a
guesser in the meantime.
"""

from __future__ import annotations

import hashlib
import logging
import math
import secrets
import weakref
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from desk.core import messages
from desk.core.errors import RateLimited
from desk.core.gather import Gather, Stopped
from desk.core.runtime import Runtime

log = logging.getLogger("taskdesk.throttle")
REDIS_TROUBLE = (RedisError, OSError, TimeoutError)


class Throttled(RateLimited):
    """Too many requests: slow down and try again later."""

    def __init__(self, message: str, retry_after: int) -> None:
        self.retry_after_seconds = max(1, retry_after)
        super().__init__(message)


class LoginThrottled(Throttled):
    """Too many sign-in attempts: the same answer whichever limit was met, and whether or not an
    account uses the address (`text` says when to try again, in the reader's language)."""

    code = "LOGIN_THROTTLED"

    def __init__(self, retry_after: int) -> None:
        minutes = max(1, math.ceil(retry_after / 60))
        self.text = messages.message("login.throttled", minutes=minutes)
        super().__init__(self.text.text, retry_after)


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


CHANGE_TTL = 120  # two one-minute windows


def _changes(rt: Runtime) -> Gather[str, int | None]:
    """The process's counter of changes: the counts asked for at the same moment (concurrent
    mutations of one web process) share one round trip (desk/core/gather.py)."""
    found = _counters.get(rt.redis)
    if found is None:

        async def count(keys: list[str]) -> list[int | None]:
            counts = await _count(rt, keys, CHANGE_TTL)
            return list(counts) if counts is not None else [None] * len(keys)

        found = _counters[rt.redis] = Gather(count)
    return found


_counters: weakref.WeakKeyDictionary[Any, Gather[str, int | None]] = weakref.WeakKeyDictionary()


# --- Changes per user -------------------------------------------------------------------------


def mutation_key(rt: Runtime, user_id: int, window: int) -> str:
    return f"{rt.settings.queue_prefix}:ratelimit:mutation:{user_id}:{window}"


async def count_change(rt: Runtime, user_id: int) -> None:
    """Count one change (a GraphQL mutation or a page's form post) against the user's
    per-minute budget; raises Throttled (429, Retry-After) beyond MUTATION_RATE_PER_MINUTE."""
    window, left = _window(rt, 60)
    try:
        count = await _changes(rt).call(mutation_key(rt, user_id, window))
    except Stopped:  # the process is stopping: let it through, as when Redis is away
        return
    limit = rt.settings.mutation_rate_per_minute
    if count is not None and count > limit:
        raise Throttled(f"At most {limit} changes a minute per user; try again in a minute.", left)


# --- Sign-in attempts -------------------------------------------------------------------------
#
# Failed sign-ins are counted in sliding windows of LOGIN_WINDOW_SECONDS (a Redis sorted set of
# attempt times per key, so no boundary lets twice the limit through), three ways:
# - per (account, client address) pair, LOGIN_MAX_PER_PAIR: the lock a guesser meets. A
#   stranger's wrong passwords lock only their own pair, never the owner at their address;
# - per account over every address, LOGIN_MAX_PER_ACCOUNT: a much higher ceiling against
#   guessing spread over many addresses (reaching it locks the account everywhere, by design);
# - per client address over every account, LOGIN_MAX_PER_ADDRESS: against one address trying
#   many accounts.
# An attempt is counted before its password is checked (so parallel guesses cannot all slip in
# under the limit) and uncounted when it succeeds: successes never count against an address (a
# hundred agents behind one NAT address all sign in at 9:00; only attempts still being checked
# at the same moment count, a few per hash thread), and a success clears its pair.
# The keys are the typed e-mail, hashed, whether or not an account uses it: the answer to a
# locked attempt is the same for an account that does not exist.

_ATTEMPT = """
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local wait = 0
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local n, limit = redis.call('ZCARD', key), tonumber(ARGV[3 + i])
  if n >= limit then
    -- the attempt that must leave the window before one more fits
    local out = redis.call('ZRANGE', key, n - limit, n - limit, 'WITHSCORES')
    wait = math.max(wait, tonumber(out[2]) + window - now)
  end
end
if wait > 0 then return tostring(wait) end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[3])
  redis.call('EXPIRE', key, math.ceil(window))
end
return '0'
"""

_SUCCEEDED = """
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return 1
"""


@dataclass(frozen=True)
class LoginAttempt:
    """One counted attempt: its keys (pair, account, address) and its own entry in them."""

    keys: list[str]
    member: str


def _login_keys(rt: Runtime, email: str, address: str) -> list[str]:
    # The e-mail is hashed: Redis need not hold a list of who was tried.
    account = email.strip().lower().encode("utf-8", "surrogatepass")
    account_key = hashlib.sha256(account).hexdigest()[:32]
    base = f"{rt.settings.queue_prefix}:throttle:login"
    return [
        f"{base}:pair:{account_key}:{address}",
        f"{base}:account:{account_key}",
        f"{base}:address:{address}",
    ]


async def login_attempt(rt: Runtime, email: str, address: str) -> LoginAttempt | None:
    """Count a sign-in attempt before its password is checked; raises LoginThrottled (no hash is
    run) while the pair, the account or the address has its limit of attempts in the window.
    None when Redis cannot be reached (the attempt goes ahead, uncounted)."""
    s = rt.settings
    keys = _login_keys(rt, email, address)
    member = secrets.token_hex(8)
    limits = (s.login_max_per_pair, s.login_max_per_account, s.login_max_per_address)
    now = f"{rt.clock().timestamp():.6f}"
    try:
        reply = await rt.redis.eval(  # type: ignore[misc]
            _ATTEMPT, len(keys), *keys, now, str(s.login_window_seconds), member, *map(str, limits)
        )
    except REDIS_TROUBLE as exc:
        log.warning("sign-in throttle skipped, Redis unavailable: %s", exc)
        return None
    wait = float(reply)
    if wait > 0:
        raise LoginThrottled(math.ceil(wait))
    return LoginAttempt(keys, member)


async def login_succeeded(rt: Runtime, attempt: LoginAttempt | None) -> None:
    """A right password: the attempt no longer counts anywhere, and its pair starts afresh."""
    if attempt is None:
        return
    try:
        await rt.redis.eval(_SUCCEEDED, len(attempt.keys), *attempt.keys, attempt.member)  # type: ignore[misc]
    except REDIS_TROUBLE as exc:
        log.warning("could not clear the sign-in count: %s", exc)


# --- Onboarding links -------------------------------------------------------------------------
#
# Invitations per admin, password resets per typed address and per client address: counted in
# fixed one-hour windows like changes. A password reset is counted whether or not an account
# uses the address (the key is the address, hashed), so a throttled answer tells nothing either.


def _hashed(value: str) -> str:
    return hashlib.sha256(value.strip().lower().encode("utf-8", "surrogatepass")).hexdigest()[:32]


async def count_invitation(rt: Runtime, user_id: int) -> None:
    """Raises Throttled beyond INVITATION_MAX_PER_HOUR invitations by one admin."""
    window, left = _window(rt, 3600)
    key = f"{rt.settings.queue_prefix}:ratelimit:invite:{user_id}:{window}"
    counts = await _count(rt, [key], 7200)
    limit = rt.settings.invitation_max_per_hour
    if counts is not None and counts[0] > limit:
        raise Throttled(f"At most {limit} invitations an hour per admin; try again later.", left)


async def count_password_reset(rt: Runtime, email: str, address: str) -> None:
    """Raises Throttled beyond PASSWORD_RESET_MAX_PER_EMAIL for the address typed or
    PASSWORD_RESET_MAX_PER_CLIENT for the client asking (the same answer for both)."""
    s = rt.settings
    window, left = _window(rt, 3600)
    base = f"{s.queue_prefix}:ratelimit:reset"
    keys = [f"{base}:email:{_hashed(email)}:{window}", f"{base}:client:{address}:{window}"]
    counts = await _count(rt, keys, 7200)
    limits = (s.password_reset_max_per_email, s.password_reset_max_per_client)
    if counts is not None and any(n > limit for n, limit in zip(counts, limits, strict=True)):
        minutes = max(1, math.ceil(left / 60))
        raise Throttled(
            f"Too many password resets asked for; try again in {minutes} minutes.", left
        )
