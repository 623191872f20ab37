"""`taskdesk teams create` and `taskdesk invite`: the printed link works (accepting it makes the
account and the membership), a taken name and a bad role are clear errors, and both are audited."""

from __future__ import annotations

import asyncio

import psycopg

from desk.core.models import Role
from desk.core.runtime import Runtime
from desk.people import invitations, users
from taskdesk.cli import main
from tests.helpers import settings_env


def _env(settings, monkeypatch) -> None:
    for name, value in settings_env(settings).items():
        monkeypatch.setenv(name, value)


def _on_runtime(settings, action):
    """Run `action(rt)` on a Runtime of its own (main() runs its own event loop, so these tests
    are synchronous)."""

    async def run():
        rt = await Runtime.open(settings, pool_size=1)
        try:
            return await action(rt)
        finally:
            await rt.close()

    return asyncio.run(run())


def _link(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(("/invitations/", "http")))


def test_create_a_team_with_its_first_admin(settings, world, monkeypatch, capsys):
    _env(settings, monkeypatch)
    assert main(["teams", "create", "Initech", "--admin", "boss@initech.test"]) == 0
    out = capsys.readouterr().out
    assert "team 'Initech' created" in out and "as ADMIN" in out
    token = _link(out).rsplit("/", 1)[1]
    done = _on_runtime(
        settings,
        lambda rt: invitations.accept(
            rt, token, display_name="Boss", password="boss password", user_id=None
        ),
    )
    assert done.role is Role.ADMIN and done.team_name == "Initech"
    signed = _on_runtime(
        settings, lambda rt: users.authenticate(rt, "boss@initech.test", "boss password")
    )
    assert signed is not None
    assert main(["teams", "create", "initech"]) == 1
    assert "already exists" in capsys.readouterr().err
    with psycopg.connect(settings.libpq_url) as conn:
        trail = conn.execute("SELECT actor, action FROM ops_audit ORDER BY id").fetchall()
    assert trail[:2] == [("cli", "team_create"), ("cli", "invite")]


def test_invite_prints_a_working_link(settings, world, monkeypatch, capsys):
    _env(settings, monkeypatch)
    assert main(["invite", "--team", "acme", "--email", "agent@acme.test", "--role", "staff"]) == 0
    token = _link(capsys.readouterr().out).rsplit("/", 1)[1]
    pending = _on_runtime(settings, lambda rt: invitations.peek(rt, token))
    assert pending.invitation.role is Role.STAFF and pending.invitation.team_id == world.team
    assert main(["invite", "--team", "Nope", "--email", "a@acme.test", "--role", "STAFF"]) == 1
    assert "No team is called" in capsys.readouterr().err
    assert main(["invite", "--team", "Acme", "--email", "a@acme.test", "--role", "BOSS"]) == 1
    assert "role" in capsys.readouterr().err
