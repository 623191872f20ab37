"""OpenTelemetry spans around accept, dispatch, claim, run and finish — only when asked for.

With OTEL_EXPORTER_OTLP_ENDPOINT empty (the default) nothing here imports opentelemetry and
every helper is a no-op: `traced` calls the function straight through, `span` yields None,
`message_context` adds nothing to a task message. With it set, `setup()` (called once by the
web and worker entry points) installs a tracer exporting over OTLP/HTTP; the packages come with
the `otel` extra (`uv sync --extra otel`).

The trace context travels in the task message as an optional W3C `tp` (traceparent) string
beside `{task_id, run}`: the worker `attach`es it, so its claim/run/finish spans join the
request that created the task. Sends by the dispatcher's sweep start traces of their own.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from desk.core import logs
from desk.core.settings import ConfigError, Settings

P = ParamSpec("P")
R = TypeVar("R")

_tracer: Any = None  # an opentelemetry Tracer once setup() ran with tracing on
_ATTRS = ("task_id", "run", "kind", "team_id", "execution_id", "request_id", "worker_id")


def setup(settings: Settings, service: str, exporter: Any = None) -> bool:
    """Start tracing when an endpoint is configured (or, in tests, an exporter is given)."""
    global _tracer
    endpoint = settings.otel_exporter_otlp_endpoint
    if not endpoint and exporter is None:
        _tracer = None
        return False
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError:
        raise ConfigError(
            "taskdesk: OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry packages are "
            "missing: install the `otel` extra (uv sync --extra otel) or unset it"
        ) from None
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        url = endpoint.rstrip("/") + "/v1/traces"
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url)))
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    _tracer = provider.get_tracer("taskdesk")
    return True


def enabled() -> bool:
    return _tracer is not None


def _attributes(extra: Mapping[str, Any]) -> dict[str, Any]:
    found = {**logs.current(), **extra}
    return {f"taskdesk.{k}": v for k, v in found.items() if k in _ATTRS and v is not None}


@contextmanager
def span(name: str, **attrs: Any) -> Iterator[Any]:
    """A span named `name` (None when tracing is off), with the ids bound in the log context."""
    if _tracer is None:
        yield None
        return
    with _tracer.start_as_current_span(name, attributes=_attributes(attrs)) as s:
        yield s


def traced(name: str) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """Decorate an async function with a span; arguments named like ids become attributes."""

    def wrap(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        async def inner(*args: P.args, **kwargs: P.kwargs) -> R:
            if _tracer is None:
                return await fn(*args, **kwargs)
            bound = sig.bind_partial(*args, **kwargs).arguments
            with span(name, **{k: v for k, v in bound.items() if k in _ATTRS}):
                return await fn(*args, **kwargs)

        return inner

    return wrap


def message_context() -> dict[str, str]:
    """`{"tp": traceparent}` of the current span, to put in a task message; {} when off."""
    if _tracer is None:
        return {}
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return {"tp": carrier["traceparent"]} if "traceparent" in carrier else {}


def attach(message: Any) -> None:
    """Make a task message's trace context current (for the rest of this asyncio task)."""
    tp = message.get("tp") if isinstance(message, dict) else None
    if _tracer is None or not isinstance(tp, str) or len(tp) > 200:
        return
    _attach_headers({"traceparent": tp})


def _attach_headers(headers: Mapping[str, str]) -> None:
    from opentelemetry import context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    # No detach: each arq job and each request runs in an asyncio task of its own.
    context.attach(TraceContextTextMapPropagator().extract(dict(headers)))


@contextmanager
def server_span(method: str, traceparent: str | None) -> Iterator[Any]:
    """An HTTP request's span, joining the caller's trace when it sent a `traceparent`.

    The caller renames it to the route template once routing has matched one."""
    if _tracer is None:
        yield None
        return
    from opentelemetry.trace import SpanKind
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    parent = None
    if traceparent and len(traceparent) <= 200:
        parent = TraceContextTextMapPropagator().extract({"traceparent": traceparent})
    with _tracer.start_as_current_span(f"HTTP {method}", context=parent, kind=SpanKind.SERVER) as s:
        yield s
