"""compose.yml's optional `observability` profile, on paper (no Docker here): Prometheus scrapes
the web app and every worker's metrics port, and its targets link to the operators' console."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def load(path: str) -> dict[str, Any]:
    data = yaml.safe_load((ROOT / path).read_text())
    assert isinstance(data, dict)
    return data


def test_prometheus_runs_only_in_the_observability_profile() -> None:
    compose = load("compose.yml")
    prom = compose["services"]["prometheus"]
    assert prom["profiles"] == ["observability"]
    assert "build" not in prom  # not a taskdesk process: test_compose.py checks those
    mounted = [v.split(":")[0] for v in prom["volumes"] if v.startswith("./")]
    assert mounted == ["./deploy/prometheus.yml"] and (ROOT / mounted[0]).is_file()
    optional = {"prometheus": ["observability"], "pgbouncer": ["pgbouncer"]}
    for name, service in compose["services"].items():
        assert service.get("profiles") == optional.get(name), f"{name}: profiles"


def test_prometheus_scrapes_web_and_every_worker_port() -> None:
    compose = load("compose.yml")
    port = int(compose["x-env"]["WORKER_METRICS_PORT"])
    assert port > 0, "workers must serve their metrics for the profile to scrape them"
    jobs = {job["job_name"]: job for job in load("deploy/prometheus.yml")["scrape_configs"]}
    assert jobs["taskdesk-web"]["static_configs"][0]["targets"] == ["web:8000"]
    (dns,) = jobs["taskdesk-worker"]["dns_sd_configs"]
    assert dns["names"] == ["worker"] and dns["port"] == port
    web_port = compose["services"]["web"]["command"][-1]
    assert web_port == "8000"


def test_every_target_links_to_the_console() -> None:
    config = load("deploy/prometheus.yml")
    assert config["global"]["external_labels"]["taskdesk_console"].endswith("/ops")
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs["taskdesk-web"]["static_configs"][0]["labels"]["console"].endswith("/ops")
    relabel = jobs["taskdesk-worker"]["relabel_configs"]
    assert any(
        r["target_label"] == "console" and r["replacement"].endswith("/ops") for r in relabel
    )
