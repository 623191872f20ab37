"""compose.yml cannot run here (no Docker daemon), so check what can go wrong on paper: every
command is a real `taskdesk` subcommand and every variable it sets is a real setting."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from desk.core.settings import Settings
from taskdesk.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def taskdesk_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in compose["services"].items() if "build" in s}


def env_names(service: dict[str, Any]) -> set[str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return {item.split("=", 1)[0] for item in env}
    return set(env)


def test_the_expected_services_are_there(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) >= {"postgres", "redis", "migrate", "web", "worker"}
    assert set(taskdesk_services(compose)) == {"migrate", "web", "worker"}


def test_every_command_is_a_real_taskdesk_subcommand(compose: dict[str, Any]) -> None:
    parser = build_parser()
    for name, service in taskdesk_services(compose).items():
        command = service["command"]
        assert isinstance(command, list) and command[0] == "taskdesk", name
        with contextlib.redirect_stderr(io.StringIO()) as err:
            try:
                parser.parse_args(command[1:])
            except SystemExit:
                pytest.fail(f"{name}: `{' '.join(command)}` is not valid: {err.getvalue()}")


def test_every_variable_is_a_setting(compose: dict[str, Any]) -> None:
    fields = {f.upper() for f in Settings.model_fields}
    shared = set(compose["x-env"])
    assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "TASKDESK_ENV", "QUEUE_PREFIX"} <= shared
    for name, service in taskdesk_services(compose).items():
        assert env_names(service) == shared, f"{name} uses the shared env block"
        assert env_names(service) <= fields, name
    assert compose["x-env"]["TASKDESK_ENV"] == "prod"


def test_the_shape_of_a_sound_deployment(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert int(services["postgres"]["image"].split(":")[1]) >= 15
    assert "healthcheck" in services["postgres"] and "healthcheck" in services["redis"]
    redis_cmd = " ".join(services["redis"]["command"])
    assert "--appendonly yes" in redis_cmd and "--maxmemory-policy noeviction" in redis_cmd
    assert services["migrate"]["restart"] == "no"
    assert services["worker"]["deploy"]["replicas"] == 2
    for name in ("web", "worker"):
        needs = services[name]["depends_on"]
        assert needs["migrate"]["condition"] == "service_completed_successfully", name
    assert "--host" in services["web"]["command"]


def test_the_image_runs_taskdesk() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "uv sync --frozen" in dockerfile
    assert 'CMD ["taskdesk", "serve"' in dockerfile
