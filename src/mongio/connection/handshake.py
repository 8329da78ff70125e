"""The connection handshake, sans I/O: the client metadata document, the initial ``hello`` command, and the
typed view of its reply.

The metadata document (driver, OS, platform, FaaS and container environment, application name) is built
once per client, kept under the server's 512-byte limit by the spec's truncation order, and sent only in the
first command of each connection, never in monitoring hellos after it.
"""

from __future__ import annotations

import os
import platform
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mongio.bson import encode
from mongio.errors import ConfigurationError
from mongio.version import __version__
from mongio.wire.header import announced_limits

__all__ = [
    "DRIVER_NAME",
    "MAX_APPNAME_BYTES",
    "MAX_METADATA_BYTES",
    "ClientMetadata",
    "DriverInfo",
    "HelloResponse",
    "ServerApiLike",
    "build_hello",
    "detect_environment",
    "truncate_metadata",
    "validate_appname",
]

DRIVER_NAME = "mongio"
MAX_METADATA_BYTES = 512
MAX_APPNAME_BYTES = 128
BACKPRESSURE_VERSION = "2"
"""The client-backpressure spec version this driver implements, announced in every handshake."""

LOAD_BALANCER_NOT_SUPPORTED = (
    "Driver attempted to initialize in load balancing mode, but the server does not support this mode."
)

_INT32 = re.compile(r"[+-]?[0-9]+\Z")


def _size(document: Mapping[str, Any]) -> int:
    return len(encode(document))


# -- environment --------------------------------------------------------------------------------------------


def _int32(value: str | None) -> int | None:
    if value is None or not _INT32.match(value.strip()):
        return None
    number = int(value)
    return number if -(2**31) <= number < 2**31 else None


def _faas(environ: Mapping[str, str]) -> dict[str, Any]:
    def populated(name: str) -> bool:
        return bool(environ.get(name))

    names = []
    if environ.get("AWS_EXECUTION_ENV", "").startswith("AWS_Lambda_") or populated("AWS_LAMBDA_RUNTIME_API"):
        names.append("aws.lambda")
    if populated("FUNCTIONS_WORKER_RUNTIME"):
        names.append("azure.func")
    if populated("K_SERVICE") or populated("FUNCTION_NAME"):
        names.append("gcp.func")
    if populated("VERCEL"):
        names.append("vercel")
    if sorted(names) == ["aws.lambda", "vercel"]:
        names = ["vercel"]  # Vercel runs on Lambda; the spec lets it win
    if len(names) != 1:
        return {}
    name = names[0]
    env: dict[str, Any] = {"name": name}
    strings: dict[str, str] = {}
    ints: dict[str, str] = {}
    if name == "aws.lambda":
        strings = {"region": "AWS_REGION"}
        ints = {"memory_mb": "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"}
    elif name == "gcp.func":
        strings = {"region": "FUNCTION_REGION"}
        ints = {"memory_mb": "FUNCTION_MEMORY_MB", "timeout_sec": "FUNCTION_TIMEOUT_SEC"}
    elif name == "vercel":
        strings = {"region": "VERCEL_REGION"}
    for field_name, variable in ints.items():
        number = _int32(environ.get(variable))
        if number is not None:
            env[field_name] = number
    for field_name, variable in strings.items():
        if environ.get(variable):
            env[field_name] = environ[variable]
    return env


def detect_environment(environ: Mapping[str, str] | None = None, *, dockerenv: str = "/.dockerenv") -> dict[str, Any]:
    """``client.env``: the FaaS provider and its details, and the container runtime and orchestrator.

    Empty when nothing is detected (the caller then omits ``env``). Variables with values of the wrong type
    are left out silently, as the spec requires.
    """
    environ = os.environ if environ is None else environ
    env = _faas(environ)
    container: dict[str, str] = {}
    if os.path.exists(dockerenv):
        container["runtime"] = "docker"
    if environ.get("KUBERNETES_SERVICE_HOST"):
        container["orchestrator"] = "kubernetes"
    if container:
        env["container"] = container
    return env


def _read_os_document() -> dict[str, str]:
    system = platform.system() or "unknown"
    document = {"type": system}
    name = system
    if system == "Linux":
        try:
            name = platform.freedesktop_os_release().get("PRETTY_NAME", system)
        except OSError:
            pass
    elif system == "Darwin":
        name = "macOS"
    if name:
        document["name"] = name
    if platform.machine():
        document["architecture"] = platform.machine()
    if platform.release():
        document["version"] = platform.release()
    return document


# Read once, at import: os-release is a file (no reading it on a running event loop), and it does not change.
_OS_DOCUMENT = _read_os_document()


def _platform_string() -> str:
    info = sys.version_info
    return (
        f"{platform.python_implementation()} {info.major}.{info.minor}.{info.micro}."
        f"{info.releaselevel}.{info.serial}|asyncio"
    )


# -- metadata -----------------------------------------------------------------------------------------------


def _is_foreign_driver_info(value: Any) -> bool:
    # PyMongo's DriverInfo: a named tuple of the same three fields.
    return isinstance(value, tuple) and getattr(value, "_fields", None) == ("name", "version", "platform")


@dataclass(frozen=True)
class DriverInfo:
    """What a library wrapping mongio adds to the metadata: appended to the driver's own, ``|``-separated.

    Empty strings count as unset, so two infos that would produce the same metadata compare equal.
    """

    name: str
    version: str | None = None
    platform: str | None = None

    def __post_init__(self) -> None:
        for label in ("name", "version", "platform"):
            value = getattr(self, label)
            if value is not None and not isinstance(value, str):
                raise ConfigurationError(f"DriverInfo {label} must be a string, not {type(value).__name__}")
            if value and "|" in value:
                raise ConfigurationError(f"DriverInfo {label} must not contain '|': {value!r}")
            if value == "":
                object.__setattr__(self, label, None)
        if not self.name:
            raise ConfigurationError("DriverInfo needs a name")


def validate_appname(appname: str) -> str:
    """``appname`` if it fits the server's 128-byte limit (UTF-8), else ``ConfigurationError``."""
    if not isinstance(appname, str):
        raise ConfigurationError(f"appname must be a string, not {type(appname).__name__}")
    size = len(appname.encode("utf-8"))
    if size > MAX_APPNAME_BYTES:
        raise ConfigurationError(f"appname is {size} bytes in UTF-8; the limit is {MAX_APPNAME_BYTES}")
    return appname


def _truncate_utf8(text: str, max_bytes: int) -> str:
    return text.encode("utf-8")[: max(max_bytes, 0)].decode("utf-8", errors="ignore")


def truncate_metadata(document: dict[str, Any], limit: int = MAX_METADATA_BYTES) -> dict[str, Any]:
    """Shrink ``document`` (a copy) under ``limit`` bytes, in the spec's order: drop ``env`` fields but its
    name, drop ``os`` fields but its type, drop ``env``, then shorten ``platform``.

    Raises ``ConfigurationError`` if even that is not enough (only wrapping libraries' driver info can make it
    so large).
    """
    result = {key: dict(value) if isinstance(value, Mapping) else value for key, value in document.items()}
    if _size(result) <= limit:
        return result
    if "env" in result:
        result["env"] = {k: v for k, v in result["env"].items() if k == "name"}
        if _size(result) <= limit:
            return result
    if "os" in result:
        result["os"] = {k: v for k, v in result["os"].items() if k == "type"}
        if _size(result) <= limit:
            return result
    result.pop("env", None)
    size = _size(result)
    if size <= limit:
        return result
    platform_string = result.get("platform")
    if isinstance(platform_string, str):
        current = len(platform_string.encode("utf-8"))
        result["platform"] = _truncate_utf8(platform_string, current - (size - limit))
        if _size(result) <= limit:
            return result
    raise ConfigurationError(
        f"the client metadata cannot be made to fit in {limit} bytes (driver information too long)"
    )


class ClientMetadata:
    """The ``client`` document of a client's handshakes: built once, extended by ``append()``.

    ``appname`` becomes ``application.name``; ``driver_info`` lists wrapping libraries in order. The
    environment is read from ``environ`` (``os.environ`` by default) when the object is made.
    """

    def __init__(
        self,
        appname: str | None = None,
        driver_info: Sequence[DriverInfo] | DriverInfo | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        dockerenv: str = "/.dockerenv",
    ) -> None:
        self.appname = validate_appname(appname) if appname is not None else None
        self._env = detect_environment(environ, dockerenv=dockerenv)
        self._driver_info: list[DriverInfo] = []
        self._document: dict[str, Any] | None = None
        infos: Any = driver_info
        if isinstance(driver_info, DriverInfo) or _is_foreign_driver_info(driver_info):
            infos = [driver_info]
        for info in infos or ():
            self.append(info)

    @property
    def driver_info(self) -> tuple[DriverInfo, ...]:
        return tuple(self._driver_info)

    def append(self, info: DriverInfo) -> bool:
        """Add a wrapping library's information for connections made from now on.

        An info equal to one already added is ignored (several wrappers may share one client); returns whether
        anything changed. Established connections keep the metadata they were made with.
        """
        if _is_foreign_driver_info(info):
            info = DriverInfo(info.name, info.version, info.platform)
        elif not isinstance(info, DriverInfo):
            raise ConfigurationError(f"expected a DriverInfo, not {type(info).__name__}")
        if info in self._driver_info:
            return False
        self._driver_info.append(info)
        self._document = None
        return True

    def untruncated(self) -> dict[str, Any]:
        """The whole document before any truncation."""
        names = [DRIVER_NAME]
        versions = [__version__]
        platforms = [_platform_string()]
        for info in self._driver_info:
            names.append(info.name)
            if info.version:
                versions.append(info.version)
            if info.platform:
                platforms.append(info.platform)
        document: dict[str, Any] = {}
        if self.appname is not None:
            document["application"] = {"name": self.appname}
        document["driver"] = {"name": "|".join(names), "version": "|".join(versions)}
        document["os"] = dict(_OS_DOCUMENT)
        document["platform"] = "|".join(platforms)
        if self._env:
            document["env"] = {k: dict(v) if isinstance(v, Mapping) else v for k, v in self._env.items()}
        return document

    @property
    def document(self) -> dict[str, Any]:
        """The ``client`` document, within ``MAX_METADATA_BYTES`` (a fresh copy each time)."""
        if self._document is None:
            self._document = truncate_metadata(self.untruncated())
        return {k: dict(v) if isinstance(v, Mapping) else v for k, v in self._document.items()}


# -- the hello command --------------------------------------------------------------------------------------


class ServerApiLike(Protocol):
    """A declared stable API version (``ServerApi``)."""

    @property
    def version(self) -> str: ...

    @property
    def strict(self) -> bool | None: ...

    @property
    def deprecation_errors(self) -> bool | None: ...


def server_api_fields(server_api: ServerApiLike | None) -> dict[str, Any]:
    """``apiVersion`` and, when the application set them, ``apiStrict`` / ``apiDeprecationErrors``."""
    if server_api is None:
        return {}
    fields: dict[str, Any] = {"apiVersion": server_api.version}
    if server_api.strict is not None:
        fields["apiStrict"] = server_api.strict
    if server_api.deprecation_errors is not None:
        fields["apiDeprecationErrors"] = server_api.deprecation_errors
    return fields


def build_hello(
    metadata: ClientMetadata | Mapping[str, Any] | None,
    *,
    server_api: ServerApiLike | None = None,
    load_balanced: bool = False,
    compressors: Sequence[str] = (),
    auth_fields: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The first command of a new connection (sent with OP_MSG to ``admin``).

    ``hello`` when a stable API version is declared or in load-balanced mode, otherwise the legacy
    ``isMaster`` with ``helloOk: true`` (its reply says whether later monitoring may use ``hello``).
    ``metadata`` (the ``client`` field) goes only here, never into later hellos. ``auth_fields`` are the
    ``saslSupportedMechs`` / ``speculativeAuthenticate`` fields of ``Authenticator.handshake_fields()``.
    """
    command: dict[str, Any] = {"hello": 1} if server_api is not None or load_balanced else {"isMaster": 1}
    command["helloOk"] = True
    command["backpressure"] = BACKPRESSURE_VERSION
    if metadata is not None:
        command["client"] = metadata.document if isinstance(metadata, ClientMetadata) else dict(metadata)
    if compressors:
        command["compression"] = list(compressors)
    if load_balanced:
        command["loadBalanced"] = True
    if auth_fields:
        command.update(auth_fields)
    command.update(server_api_fields(server_api))
    return command


# -- the reply ----------------------------------------------------------------------------------------------


def _int(value: Any, default: int) -> int:
    if isinstance(value, bool) or value is None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _strings(value: Any) -> tuple[str, ...] | None:
    if value is None or isinstance(value, str | bytes) or not isinstance(value, Sequence):
        return None
    return tuple(str(item) for item in value)


@dataclass(frozen=True)
class HelloResponse:
    """The handshake reply, typed. ``document`` keeps the whole reply for topology code that reads more."""

    document: Mapping[str, Any] = field(repr=False)
    is_writable_primary: bool
    hello_ok: bool
    max_bson_object_size: int
    max_message_size_bytes: int
    max_write_batch_size: int
    min_wire_version: int
    max_wire_version: int
    compression: tuple[str, ...] | None
    service_id: Any
    connection_id: int | None
    sasl_supported_mechs: tuple[str, ...] | None
    speculative_authenticate: Mapping[str, Any] | None = field(repr=False)
    logical_session_timeout_minutes: int | None
    set_name: str | None
    msg: str | None
    secondary: bool
    arbiter_only: bool
    hidden: bool
    topology_version: Mapping[str, Any] | None

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> HelloResponse:
        """Read a hello or legacy hello reply; size limits absent or not positive integers take the server
        defaults, and those above their ceilings the ceilings (``announced_limits``)."""
        writable = document.get("isWritablePrimary", document.get("ismaster", False))
        connection_id = document.get("connectionId")
        session_timeout = document.get("logicalSessionTimeoutMinutes")
        speculative = document.get("speculativeAuthenticate")
        topology_version = document.get("topologyVersion")
        set_name = document.get("setName")
        msg = document.get("msg")
        limits = announced_limits(document)
        return cls(
            document=document,
            is_writable_primary=bool(writable),
            hello_ok=bool(document.get("helloOk", False)),
            max_bson_object_size=limits.max_bson_size,
            max_message_size_bytes=limits.max_message_size,
            max_write_batch_size=limits.max_write_batch_size,
            min_wire_version=_int(document.get("minWireVersion"), 0),
            max_wire_version=_int(document.get("maxWireVersion"), 0),
            compression=_strings(document.get("compression")),
            service_id=document.get("serviceId"),
            connection_id=_int(connection_id, 0) if connection_id is not None else None,
            sasl_supported_mechs=_strings(document.get("saslSupportedMechs")),
            speculative_authenticate=speculative if isinstance(speculative, Mapping) else None,
            logical_session_timeout_minutes=(
                _int(session_timeout, 0) if session_timeout is not None else None
            ),
            set_name=set_name if isinstance(set_name, str) else None,
            msg=msg if isinstance(msg, str) else None,
            secondary=bool(document.get("secondary", False)),
            arbiter_only=bool(document.get("arbiterOnly", False)),
            hidden=bool(document.get("hidden", False)),
            topology_version=topology_version if isinstance(topology_version, Mapping) else None,
        )

    @property
    def is_arbiter(self) -> bool:
        """An arbiter: no authentication is possible or needed on it."""
        return self.arbiter_only and self.set_name is not None
