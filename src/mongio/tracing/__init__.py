"""OpenTelemetry tracing of operations and commands (the OpenTelemetry specification), off by default.

Turn it on for one client with ``MongoClient(uri, tracing={"enabled": True})`` or for every client with the
environment variable ``OTEL_PYTHON_INSTRUMENTATION_MONGODB_ENABLED=true``; add the command text to command
spans with ``tracing={"query_text_max_length": 1000}`` or
``OTEL_PYTHON_INSTRUMENTATION_MONGODB_QUERY_TEXT_MAX_LENGTH``. Spans go to the tracer provider the
application configured (or ``tracing={"tracer_provider": provider}``); mongio needs only
``opentelemetry-api`` (``pip install 'mongio[opentelemetry]'``) and never configures the SDK.

A client that does not trace holds no tracer and never imports ``opentelemetry``: what tracing costs its
operations is a few ``is None`` checks.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mongio.errors import ConfigurationError
from mongio.tracing.settings import (
    ENABLED_VARIABLE,
    QUERY_TEXT_MAX_LENGTH_VARIABLE,
    TracingSettings,
    tracing_settings,
)

if TYPE_CHECKING:
    from mongio.tracing.spans import Tracing

__all__ = [
    "ENABLED_VARIABLE",
    "QUERY_TEXT_MAX_LENGTH_VARIABLE",
    "TracingSettings",
    "client_tracing",
    "tracing_settings",
]

_log = logging.getLogger("mongio.tracing")
_MISSING_API = "tracing needs the OpenTelemetry API: pip install 'mongio[opentelemetry]'"


def client_tracing(
    option: Mapping[str, Any] | None, environ: Mapping[str, str] | None = None
) -> Tracing | None:
    """The tracing of a client made with ``tracing=option``, or ``None`` when it does not trace.

    Tracing asked for by the option without ``opentelemetry-api`` installed is a
    :class:`~mongio.errors.ConfigurationError`; asked for by the environment variable alone, it is a warning
    and the client does not trace (the variable may be meant for other programs of the host).
    """
    settings = tracing_settings(option, environ)
    if not settings.enabled:
        return None
    try:
        from mongio.tracing.spans import Tracing
    except ImportError as exc:
        if option is not None and option.get("enabled") is True:
            raise ConfigurationError(_MISSING_API) from exc
        _log.warning("%s set, but %s; this client does not trace", ENABLED_VARIABLE, _MISSING_API)
        return None
    return Tracing(settings)
