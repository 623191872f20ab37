"""Password hashing (argon2), off the event loop.

argon2 takes tens of milliseconds of CPU by design; run on the event loop, a few wrong-password
posts stall every other request of the process. `check_password` runs it in a small thread pool
(argon2-cffi releases the GIL while hashing) whose size is bounded, so a burst of sign-ins
waits its turn instead of taking every core. An unknown e-mail is checked against a dummy hash
of the same parameters: both answers take the same time, so timing does not tell which e-mails
have accounts.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from functools import cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from desk.core.errors import ValidationProblem

_hasher = PasswordHasher()
MIN_LENGTH, MAX_LENGTH = 8, 1000


def require_acceptable(password: object) -> str:
    """The password rule, for every face that sets one (CLI, reset link, invitation)."""
    if not isinstance(password, str) or not MIN_LENGTH <= len(password) <= MAX_LENGTH:
        raise ValidationProblem("password", f"use {MIN_LENGTH} to {MAX_LENGTH} characters")
    return password


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    """Blocking: call `check_password` from async code."""
    if not password_hash:
        return False
    try:
        # surrogatepass: a lone surrogate is just more bytes here, never an encoding error.
        return _hasher.verify(password_hash, password.encode("utf-8", "surrogatepass"))
    except (VerificationError, InvalidHashError):
        return False


@cache
def _dummy_hash() -> str:
    return _hasher.hash("taskdesk: no such account")


@cache
def _pool(threads: int) -> ThreadPoolExecutor:
    # One per size, made on first use (never at import); threads are daemonic workers that
    # idle at no cost between sign-ins.
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="argon2")


def _verify_or_dummy(password_hash: str | None, password: str) -> bool:
    if not password_hash:
        verify_password(_dummy_hash(), password)  # the same work as for a real account
        return False
    return verify_password(password_hash, password)


async def check_password(password_hash: str | None, password: str, *, threads: int) -> bool:
    """Does `password` match? None (or empty) means no such account: a dummy check, False.
    At most `threads` checks run at once in this process; others wait, the loop never does."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_pool(threads), _verify_or_dummy, password_hash, password)


async def hash_new(password: str, *, threads: int) -> str:
    """A new password, checked against the rule, hashed off the event loop."""
    require_acceptable(password)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_pool(threads), hash_password, password)
