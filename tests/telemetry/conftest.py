"""Telemetry tests: the GraphQL app fixtures, and reading a Prometheus scrape back as numbers."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.schema.conftest import api, make_api  # noqa: F401 - fixtures used here too

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> tuple[dict[str, str], Samples]:
    """(family name → type, (sample name, labels) → value), parsed by prometheus-client."""
    types: dict[str, str] = {}
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return types, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """A sample's value; 0 when absent (a counter not yet incremented)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def label_sets(samples: Samples, name: str) -> list[dict[str, str]]:
    return [dict(labels) for (n, labels) in samples if n == name]
