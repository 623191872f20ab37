"""`taskdesk password`: a new password for a user, and every session of theirs ends."""

from __future__ import annotations

import io

import psycopg

from taskdesk.cli import main
from tests.helpers import settings_env
from tests.sessions import signed_in


def test_password_change_signs_the_user_out_everywhere(settings, world, monkeypatch, capsys):
    for name, value in settings_env(settings).items():
        monkeypatch.setenv(name, value)
    signed_in(settings, world.staff)
    signed_in(settings, world.staff)
    signed_in(settings, world.admin)
    monkeypatch.setattr("sys.stdin", io.StringIO("a-brand-new-password\n"))
    assert main(["password", "--user", "CHEN@acme.test"]) == 0
    assert "2 session(s) ended" in capsys.readouterr().err
    with psycopg.connect(settings.libpq_url) as conn:
        live = conn.execute(
            "SELECT user_id, count(*) FROM web_session WHERE revoked_at IS NULL GROUP BY 1"
        ).fetchall()
        stored = conn.execute(
            "SELECT password_hash FROM app_user WHERE id = %s", (world.staff,)
        ).fetchone()
    assert dict(live) == {world.admin: 1}
    from desk.people.passwords import verify_password

    assert verify_password(stored[0], "a-brand-new-password")
    monkeypatch.setattr("sys.stdin", io.StringIO("short\n"))
    assert main(["password", "--user", "chen@acme.test"]) == 1
    assert "8 to 1000" in capsys.readouterr().err
