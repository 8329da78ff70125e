"""Whether a client traces, and how much of each command a span shows: the ``tracing`` client option and the
environment variables of the OpenTelemetry specification, resolved once when the client is made.

Pure: reads a mapping of environment variables, never the SDK. The client level wins over the driver level
(the environment): ``tracing={"enabled": False}`` turns tracing off whatever the environment says, and a
client that does not say falls back to ``OTEL_PYTHON_INSTRUMENTATION_MONGODB_ENABLED``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mongio.errors import ConfigurationError

__all__ = [
    "ENABLED_VARIABLE",
    "QUERY_TEXT_MAX_LENGTH_VARIABLE",
    "TracingSettings",
    "tracing_settings",
]

ENABLED_VARIABLE = "OTEL_PYTHON_INSTRUMENTATION_MONGODB_ENABLED"
QUERY_TEXT_MAX_LENGTH_VARIABLE = "OTEL_PYTHON_INSTRUMENTATION_MONGODB_QUERY_TEXT_MAX_LENGTH"
# The values that turn tracing on (compared without case and surrounding blanks); anything else leaves it off.
_TRUE_WORDS = frozenset({"1", "true", "yes"})
_OPTION_KEYS = frozenset({"enabled", "query_text_max_length", "tracer_provider"})


@dataclass(frozen=True, slots=True)
class TracingSettings:
    """What one client's tracing does.

    ``query_text_max_length`` 0 means command spans carry no ``db.query.text``; ``tracer_provider`` is the
    OpenTelemetry ``TracerProvider`` to take the tracer from (``None``: the global one).
    """

    enabled: bool = False
    query_text_max_length: int = 0
    tracer_provider: Any = None


def tracing_settings(
    option: Mapping[str, Any] | None, environ: Mapping[str, str] | None = None
) -> TracingSettings:
    """The settings for a client given ``tracing=option``, the environment filling what the option leaves out.

    ``option`` keys: ``enabled`` (bool; absent or ``None``: the environment decides),
    ``query_text_max_length`` (int >= 0; absent or ``None``: the environment's, else 0), ``tracer_provider``. Raises
    :class:`~mongio.errors.ConfigurationError` naming the key or variable that holds an unusable value.
    """
    if environ is None:
        environ = os.environ
    if option is None:
        option = {}
    elif not isinstance(option, Mapping):
        raise ConfigurationError(f"tracing must be a dict such as {{'enabled': True}}, not {option!r}")
    unknown = set(option) - _OPTION_KEYS
    if unknown:
        raise ConfigurationError(
            f"unknown tracing option(s) {sorted(unknown)}; the options are {sorted(_OPTION_KEYS)}"
        )
    enabled = option.get("enabled")
    if enabled is None:
        enabled = enabled_from_environment(environ)
    elif not isinstance(enabled, bool):
        raise ConfigurationError(f"tracing['enabled'] must be True or False, not {enabled!r}")
    length = option.get("query_text_max_length")
    if length is None:
        length = query_text_max_length_from_environment(environ)
    elif isinstance(length, bool) or not isinstance(length, int) or length < 0:
        raise ConfigurationError(f"tracing['query_text_max_length'] must be an integer >= 0, not {length!r}")
    return TracingSettings(enabled, length, option.get("tracer_provider"))


def enabled_from_environment(environ: Mapping[str, str]) -> bool:
    """The driver-level switch: on when the variable holds ``1``, ``true`` or ``yes`` (any case)."""
    return environ.get(ENABLED_VARIABLE, "").strip().lower() in _TRUE_WORDS


def query_text_max_length_from_environment(environ: Mapping[str, str]) -> int:
    """The driver-level ``db.query.text`` length: the variable's integer, 0 when it is unset or empty."""
    text = environ.get(QUERY_TEXT_MAX_LENGTH_VARIABLE, "").strip()
    if not text:
        return 0
    try:
        length = int(text)
    except ValueError:
        length = -1
    if length < 0:
        raise ConfigurationError(f"{QUERY_TEXT_MAX_LENGTH_VARIABLE} must be an integer >= 0, not {text!r}")
    return length
