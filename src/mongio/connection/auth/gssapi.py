"""GSSAPI: Kerberos v5 through the SASL GSSAPI mechanism (RFC 4752), on ``$external``.

The conversation::

    saslStart    {mechanism: "GSSAPI", payload: <first context token>}
    saslContinue {payload: <next context token>}        ... until the context is established
    saslContinue {payload: wrap(<no security layer, max size 0, authorization id = username>)}
                                                         after unwrapping the server's security-layer offer

Nothing here blocks the event loop. Every call of the Kerberos library (acquiring credentials, which may
talk to the KDC; each context step, which may fetch a service ticket; wrap and unwrap) runs in a worker
thread through ``asyncio.to_thread``. Host name canonicalization (``CANONICALIZE_HOST_NAME``) uses the loop's
``getaddrinfo``/``getnameinfo``, which run in the loop's default executor.
"""

from __future__ import annotations

import functools
import logging
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from mongio.backend import running_loop, timeout_at, to_thread
from mongio.connection.auth.base import (
    AuthenticationFailed,
    CredentialLike,
    RunCommand,
    payload_bytes,
    run_auth_command,
)
from mongio.connection.auth.gssapi_library import (
    KerberosError,
    KerberosLibrary,
    SecurityContext,
    ServiceName,
    python_gssapi,
)
from mongio.errors import ConfigurationError

__all__ = [
    "GssapiProperties",
    "HostResolver",
    "LoopResolver",
    "authenticate_gssapi",
    "canonicalize_host",
    "security_layer_reply",
    "server_host",
    "service_name_for",
]

_T = TypeVar("_T")
_log = logging.getLogger("mongio.connection.auth")

EXTERNAL = "$external"
MECHANISM = "GSSAPI"
# RFC 4752 3.1: bit 1 of the first octet of the server's offer is "no security layer".
NO_SECURITY_LAYER = 0x01
# Context establishment takes one or two round trips with Kerberos; more means a confused or hostile peer.
MAX_STEPS = 10


@dataclass(frozen=True)
class GssapiProperties:
    """The GSSAPI mechanism properties, with the specification's defaults.

    ``canonicalize`` is ``"none"``, ``"forward"`` or ``"forwardAndReverse"`` (the credential has already
    mapped the legacy ``true``/``false`` to the last and the first).
    """

    service_name: str = "mongodb"
    canonicalize: str = "none"
    service_realm: str | None = None
    service_host: str | None = None

    @classmethod
    def from_mapping(cls, properties: Mapping[str, Any]) -> GssapiProperties:
        canonicalize = properties.get("CANONICALIZE_HOST_NAME", "none")
        if canonicalize not in ("none", "forward", "forwardAndReverse"):
            raise ConfigurationError(
                f"GSSAPI: CANONICALIZE_HOST_NAME {canonicalize!r} is invalid; use none, forward or forwardAndReverse"
            )
        return cls(
            service_name=str(properties.get("SERVICE_NAME") or "mongodb"),
            canonicalize=canonicalize,
            service_realm=_optional_text(properties.get("SERVICE_REALM")),
            service_host=_optional_text(properties.get("SERVICE_HOST")),
        )


def _optional_text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


class HostResolver(Protocol):
    """The two lookups host name canonicalization needs."""

    async def forward(self, host: str) -> tuple[str, str]:
        """``(canonical name, first address)`` of ``host``; raises ``OSError`` when it has none."""
        ...

    async def reverse(self, address: str) -> str:
        """The name an address's PTR record gives; raises ``OSError`` when there is none."""
        ...


class LoopResolver:
    """The system resolver through the running loop: ``getaddrinfo`` (with ``AI_CANONNAME``, which follows
    CNAMEs) and ``getnameinfo`` (with ``NI_NAMEREQD``). asyncio runs both in the loop's default executor, so
    a slow DNS server delays this connection only, never the loop."""

    async def forward(self, host: str) -> tuple[str, str]:
        loop = running_loop()
        infos = await loop.getaddrinfo(host, None, proto=socket.IPPROTO_TCP, flags=socket.AI_CANONNAME)
        if not infos:
            raise OSError(f"no address for {host!r}")
        _family, _type, _proto, canonname, sockaddr = infos[0]
        return (canonname or host), str(sockaddr[0])

    async def reverse(self, address: str) -> str:
        loop = running_loop()
        name, _port = await loop.getnameinfo((address, 0), socket.NI_NAMEREQD)
        return name


async def canonicalize_host(host: str, mode: str, resolver: HostResolver) -> str:
    """The host name for the service principal, per the specification's canonicalization algorithm.

    ``none`` keeps ``host`` as given. ``forward`` takes the canonical name the forward lookup reaches (CNAMEs
    followed); ``forwardAndReverse`` then takes the name the reverse lookup of the first address gives, or the
    forward name when that lookup fails. A failed forward lookup keeps ``host``, as the specification requires.
    """
    if mode == "none":
        return host
    try:
        canonical, address = await resolver.forward(host)
    except OSError as exc:
        _log.debug("GSSAPI: forward lookup of %r failed (%s); using it as given", host, exc)
        return host
    if mode == "forwardAndReverse":
        try:
            return (await resolver.reverse(address)).lower()
        except OSError as exc:
            _log.debug("GSSAPI: reverse lookup of %r failed (%s); using %r", address, exc, canonical)
    return canonical.lower()


async def service_name_for(
    host: str, properties: GssapiProperties, resolver: HostResolver | None = None
) -> ServiceName:
    """The service principal for a server reached at ``host``: ``SERVICE_HOST`` when given (never
    canonicalized: the application chose it), else ``host`` canonicalized as ``CANONICALIZE_HOST_NAME``
    asks."""
    if properties.service_host is not None:
        service_host = properties.service_host
    else:
        service_host = await canonicalize_host(host, properties.canonicalize, resolver or LoopResolver())
    return ServiceName(properties.service_name, service_host, properties.service_realm)


def security_layer_reply(offer: bytes, authorization_id: str) -> bytes:
    """RFC 4752's last client message, before wrapping: "no security layer" selected, a maximum message
    size of 0 (which the RFC requires without a layer), then the authorization identity.

    ``offer`` is the server's unwrapped 4-octet message; it must offer "no security layer" (MongoDB's does):
    integrity or privacy layers would wrap every later message, which the wire protocol has no place for.
    """
    if len(offer) != 4:
        raise ValueError(f"the server's security layer offer has {len(offer)} bytes, not 4")
    if not offer[0] & NO_SECURITY_LAYER:
        raise ValueError(f"the server does not offer running without a security layer (layers {offer[0]:#04x})")
    return bytes((NO_SECURITY_LAYER, 0, 0, 0)) + authorization_id.encode("utf-8")


class _Conversation:
    """One connection's GSSAPI exchange: the context, and the failure text naming the user and service."""

    def __init__(
        self, run_command: RunCommand, username: str, service: ServiceName, deadline: float | None = None
    ) -> None:
        self._run_command = run_command
        self._deadline = deadline
        self._username = username
        self._service = service
        self._conversation_id: Any = None
        self.what = f"GSSAPI authentication failed for user {username!r} to service {str(service)!r}"

    async def run(self, library: KerberosLibrary, password: str | None) -> None:
        username, service = self._username, self._service
        context = await self._kerberos(
            "acquiring credentials", lambda: library.open_context(username, password, service)
        )
        token = await self._kerberos("starting the security context", lambda: context.step(None))
        reply = await self._send(
            {"saslStart": 1, "mechanism": MECHANISM, "payload": token, "autoAuthorize": 1}
        )
        reply = await self._establish(context, reply)
        offer_token = self._payload(reply)
        offer = await self._kerberos(
            "unwrapping the server's security layer offer", lambda: context.unwrap(offer_token)
        )
        try:
            answer = security_layer_reply(offer, self._username)
        except ValueError as exc:
            raise AuthenticationFailed(f"{self.what}: {exc}") from None
        wrapped = await self._kerberos("wrapping the security layer reply", lambda: context.wrap(answer))
        reply = await self._send({"saslContinue": 1, "payload": wrapped})
        if not reply.get("done"):
            raise AuthenticationFailed(f"{self.what}: the server did not end the conversation", details=reply)

    async def _establish(self, context: SecurityContext, reply: Mapping[str, Any]) -> Mapping[str, Any]:
        """Step the context with the server's tokens until it is established; the reply that then carries
        the server's security layer offer."""
        for _ in range(MAX_STEPS):
            if reply.get("done"):
                raise AuthenticationFailed(
                    f"{self.what}: the server ended the conversation before the security layer step", details=reply
                )
            step = functools.partial(context.step, self._payload(reply))
            token = await self._kerberos("establishing the security context", step)
            established = context.complete
            reply = await self._send({"saslContinue": 1, "payload": token})
            if established:
                return reply
        raise AuthenticationFailed(f"{self.what}: the security context was not established in {MAX_STEPS} steps")

    def _payload(self, reply: Mapping[str, Any]) -> bytes:
        return payload_bytes(reply, self.what)

    async def _send(self, command: dict[str, Any]) -> Mapping[str, Any]:
        if self._conversation_id is not None:
            command["conversationId"] = self._conversation_id
        reply = await run_auth_command(self._run_command, EXTERNAL, command, self.what)
        self._conversation_id = reply.get("conversationId", self._conversation_id)
        return reply

    async def _kerberos(self, step: str, call: Callable[[], _T]) -> _T:
        """``call()`` in a worker thread, within the deadline; a library refusal, or no answer in time, becomes
        ``AuthenticationFailed`` naming ``step``. (A call past the deadline is left to finish in its thread: the
        library cannot be interrupted, and the Kerberos configuration bounds its own network waits.)"""
        try:
            async with timeout_at(self._deadline):
                return await to_thread(call)
        except KerberosError as exc:
            raise AuthenticationFailed(f"{self.what}: {step}: {exc}") from None
        except TimeoutError:
            raise AuthenticationFailed(
                f"{self.what}: {step}: no answer before the connection's time limit (connectTimeoutMS or timeoutMS)"
            ) from None


def server_host(address: tuple[str, int | None]) -> str:
    """The host name of the service principal for a connection to ``address``: its host, or ``localhost``
    for a Unix domain socket (``(path, None)``), which only reaches this machine."""
    host, port = address
    return "localhost" if port is None else host


async def authenticate_gssapi(
    credential: CredentialLike,
    run_command: RunCommand,
    host: str,
    *,
    resolver: HostResolver | None = None,
    library: KerberosLibrary | None = None,
    deadline: float | None = None,
) -> None:
    """Authenticate ``credential`` to the server reached at ``host`` (the name the client connected to).

    ``deadline`` (``loop.time()`` terms) bounds each Kerberos call; the commands are bounded by ``run_command``.

    ``resolver`` replaces the system resolver for canonicalization, ``library`` python-gssapi (tests).
    Raises ``ConfigurationError`` when python-gssapi is missing, ``AuthenticationFailed`` naming the user,
    the service principal and the step when Kerberos or the server refuses.
    """
    if not credential.username:
        raise ConfigurationError("GSSAPI needs a username (the Kerberos principal)")
    # Importing python-gssapi loads the Kerberos libraries: tens of milliseconds the first time, off the loop too.
    kerberos = library if library is not None else await to_thread(python_gssapi)
    properties = GssapiProperties.from_mapping(credential.mechanism_properties)
    service = await service_name_for(host, properties, resolver)
    conversation = _Conversation(run_command, credential.username, service, deadline)
    await conversation.run(kerberos, credential.password)
    _log.debug("authenticated user %r with GSSAPI to service %r", credential.username, str(service))
