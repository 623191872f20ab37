"""`taskdesk tokens`: create (printed once), list (never the secret), revoke by id or prefix.
Run in-process (`taskdesk.cli.main`) with the test's settings in the environment."""

from __future__ import annotations

import asyncio

import pytest

from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.people import users
from taskdesk.cli import main
from tests.helpers import settings_env


@pytest.fixture
def cli(settings: Settings, world, monkeypatch, capsys):
    for name, value in settings_env(settings).items():
        monkeypatch.setenv(name, value)

    def run(*args: str) -> tuple[int, str, str]:
        code = main(["tokens", *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def _owner(settings: Settings, token: str) -> int | None:
    async def look() -> int | None:
        rt = await Runtime.open(settings, pool_size=1)
        try:
            return await users.user_for_token(rt, token)
        finally:
            await rt.close()

    return asyncio.run(look())


def test_create_list_revoke(cli, settings, world) -> None:
    code, out, err = cli("create", "--user", "ZHOU@acme.test", "--name", "nightly")
    assert code == 0 and "shown only now" in err
    token = out.strip()
    assert _owner(settings, token) == world.admin

    code, out, _ = cli("list", "--user", "zhou@acme.test")
    assert "nightly" in out and "active" in out and token not in out
    token_id = next(line.split()[0] for line in out.splitlines() if "nightly" in line)

    code, out, _ = cli("revoke", "--user", "zhou@acme.test", token_id)
    assert code == 0 and "revoked" in out
    assert _owner(settings, token) is None
    assert "revoked" in cli("list", "--user", "zhou@acme.test")[1]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("create", "--user", "nobody@x.test", "--name", "n"), "No user with email"),
        (("create", "--user", "zhou@acme.test", "--name", "  "), "name"),
        (("revoke", "--user", "zhou@acme.test", "tdk_00000000"), "has no token"),
        (("revoke", "--user", "chen@acme.test", "999"), "not found"),
    ],
)
def test_mistakes_are_one_line_messages(cli, args, says) -> None:
    code, _, err = cli(*args)
    assert code == 1 and says in err, err
