"""Establishing a connection: open the stream, run the handshake, negotiate compression, authenticate.

``establish()`` returns a ``Connection`` that is ready for commands, or raises with the connection already
closed: a half-established connection never escapes. Monitoring connections pass ``authenticate=False``
(authentication must not happen on them) and use ``handshake()`` on a connection they opened themselves.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mongio.backend import running_loop
from mongio.connection.auth import Authenticator, CredentialLike
from mongio.connection.connection import Connection, connect
from mongio.connection.handshake import (
    LOAD_BALANCER_NOT_SUPPORTED,
    ClientMetadata,
    HelloResponse,
    ServerApiLike,
    build_hello,
    server_api_fields,
)
from mongio.connection.transport import Address
from mongio.error_classification import OVERLOAD_LABELS, may_be_overload
from mongio.errors import AutoReconnect, ConfigurationError, MongioError
from mongio.wire.compression import get_compressor, negotiate_compressor

if TYPE_CHECKING:
    from mongio.connection.auth.oidc_cache import OidcTokenCache
    from mongio.connection.auth.scram import ScramKeyCache
    from mongio.connection.ocsp import RevocationChecker
    from mongio.connection.socks import SocksProxy

__all__ = ["ConnectionSettings", "establish", "handshake"]


@dataclass(frozen=True)
class ConnectionSettings:
    """Everything a pool needs to make its connections, fixed for the pool's life.

    ``metadata`` is shared with the client, so driver info appended later reaches new connections only.
    ``connect_timeout`` bounds opening the stream (reaching a ``proxy`` and its handshake included) and, when
    no ``deadline`` is given, the handshake and authentication too; ``socket_timeout`` is the connection's later
    per-reply limit. ``proxy``: the SOCKS5 proxy every connection goes through (``proxyHost``). ``revocation``,
    for a TLS client that checks revocation, checks each server certificate with OCSP after the TLS handshake.
    ``oidc_cache``: the client's MONGODB-OIDC token cache, shared by all its connections.
    """

    metadata: ClientMetadata | None = None
    credential: CredentialLike | None = None
    compressors: Sequence[str] = ()
    zlib_compression_level: int = -1
    server_api: ServerApiLike | None = None
    load_balanced: bool = False
    connect_timeout: float | None = 20.0
    socket_timeout: float | None = None
    ssl_context: ssl.SSLContext | None = None
    proxy: SocksProxy | None = None
    revocation: RevocationChecker | None = field(default=None, repr=False)
    scram_cache: ScramKeyCache | None = field(default=None, repr=False)
    oidc_cache: OidcTokenCache | None = field(default=None, repr=False)


async def handshake(
    conn: Connection,
    settings: ConnectionSettings,
    *,
    authenticate: bool = True,
    deadline: float | None = None,
    socket_timeout: float | None = None,
    auth_timeout: float | None = None,
) -> HelloResponse:
    """Run the initial handshake (and authentication unless ``authenticate`` is false) on a fresh connection.

    Configures ``conn`` from the reply (size limits, wire versions, the negotiated compressor,
    ``serviceId``) and marks it ready. Errors leave ``conn`` as it is: ``establish()`` closes it.
    ``deadline`` bounds all of it; ``socket_timeout``, when given, also bounds each command's reply, and
    ``auth_timeout`` replaces it for each authentication command.
    """

    def command_deadline(per_command: float | None = socket_timeout) -> float | None:
        if not per_command:
            return deadline
        own = running_loop().time() + per_command
        return own if deadline is None else min(deadline, own)

    auth_deadline_seconds = socket_timeout if auth_timeout is None else auth_timeout

    credential = settings.credential if authenticate else None
    authenticator = (
        Authenticator(
            credential, cache=settings.scram_cache, oidc_cache=settings.oidc_cache, address=conn.address
        )
        if credential is not None
        else None
    )
    auth_fields = authenticator.handshake_fields() if authenticator is not None else None
    command = build_hello(
        settings.metadata,
        server_api=settings.server_api,
        load_balanced=settings.load_balanced,
        compressors=settings.compressors,
        auth_fields=auth_fields,
    )
    conn.offer_compressors(settings.compressors)
    loop = running_loop()
    started = loop.time()
    try:
        reply = await conn.command("admin", command, compress=False, deadline=command_deadline())
    except AutoReconnect as exc:
        # A network error or timeout on the hello may be the server shedding load (CMAP backpressure), unless
        # it is a TLS verdict arriving late (TLS 1.3 sends certificate alerts after the handshake); errors
        # during authentication below are not labelled.
        if may_be_overload(exc):
            for label in OVERLOAD_LABELS:
                exc.add_error_label(label)
        raise
    round_trip = loop.time() - started
    hello = HelloResponse.from_document(reply)
    if settings.load_balanced and hello.service_id is None:
        raise ConfigurationError(LOAD_BALANCER_NOT_SUPPORTED)
    chosen = negotiate_compressor(settings.compressors, hello.compression)
    compressor = get_compressor(chosen, settings.zlib_compression_level) if chosen is not None else None
    conn.configure_from_hello(reply, compressor, round_trip)

    if authenticator is not None and not hello.is_arbiter:
        # A declared stable API version goes on the authentication commands too, as on every command.
        api_fields = server_api_fields(settings.server_api)

        async def run_command(db: str, auth_command: dict[str, Any]) -> Mapping[str, Any]:
            return await conn.command(
                db, {**auth_command, **api_fields}, compress=False, deadline=command_deadline(auth_deadline_seconds)
            )

        await authenticator.authenticate(run_command, hello, deadline=deadline)
        if authenticator.reauthenticates:
            conn.keep_authenticator(authenticator, api_fields)
    conn.ready = True
    return hello


async def establish(
    address: Address,
    settings: ConnectionSettings,
    *,
    id: int = 0,
    generation: int = 0,
    authenticate: bool = True,
    deadline: float | None = None,
    auth_timeout: float | None = None,
) -> Connection:
    """Open a connection to ``address``, handshake, authenticate and return it ready.

    ``deadline`` (``loop.time()`` terms, e.g. from a CSOT timeout) bounds the whole establishment (opening
    the stream within ``settings.connect_timeout`` too); without one, ``settings.connect_timeout`` does, and
    ``settings.socket_timeout`` bounds each command of the handshake (``auth_timeout``, for a connection no
    operation waits for, each authentication command). On any error, cancellation included, the connection is closed
    before the error propagates: ``AutoReconnect``/``NetworkTimeout`` for network trouble,
    ``AuthenticationFailed`` for a refused credential, ``OperationFailure`` for a failed hello.
    """
    loop = running_loop()
    # An operation's deadline replaces socketTimeoutMS for the handshake; otherwise socketTimeoutMS (and
    # auth_timeout for authentication) bounds each command of it, counted afresh for each.
    socket_timeout = settings.socket_timeout if deadline is None else None
    if deadline is not None:
        auth_timeout = None
    if deadline is None and settings.connect_timeout:
        deadline = loop.time() + settings.connect_timeout
    connect_timeout = settings.connect_timeout
    if deadline is not None:
        remaining = max(deadline - loop.time(), 0.0)
        connect_timeout = remaining if connect_timeout is None else min(connect_timeout, remaining)
    conn = await connect(
        address,
        id=id,
        generation=generation,
        connect_timeout=connect_timeout,
        socket_timeout=settings.socket_timeout,
        ssl_context=settings.ssl_context,
        proxy=settings.proxy,
        revocation=settings.revocation,
    )
    try:
        await handshake(
            conn,
            settings,
            authenticate=authenticate,
            deadline=deadline,
            socket_timeout=socket_timeout,
            auth_timeout=auth_timeout,
        )
    except BaseException as exc:
        conn.close(f"the handshake failed: {type(exc).__name__}")
        if isinstance(exc, MongioError) and conn.service_id is not None:
            exc.attribute_to_service(conn.service_id)  # the hello answered: the error is that service's
        raise
    return conn
