"""The driver's side of libmongocrypt's requests: KMS exchanges over mongio's own TLS connections, key vault
reads through a mongio client, ``listCollections`` for collection information, markings from a
:class:`QueryAnalyzer` (mongocryptd, for automatic encryption) and on-demand KMS credentials.

KMS exchanges: each attempt connects with TLS (the provider's ``kms_tls_options``, built by mongio's TLS
option code; the system's trust store otherwise), over a socket of ``kms_connect_callback`` when one is
given (:mod:`mongio.encryption.kms_connect`), sends libmongocrypt's request and feeds the answer back
while libmongocrypt asks for bytes, so memory follows what libmongocrypt wants, never what the KMS claims.
An attempt has :data:`KMS_TIMEOUT` seconds, or what is left of the operation's timeout (``timeoutMS``) when
that is less; once that timeout has expired the operation fails with its timeout error, without a retry or a
backoff wait that would outlast it. A network failure (refused, reset, closed early, timed out) is
reported to libmongocrypt, which decides whether to retry (with its own backoff, waited here without
blocking) or to fail; an HTTP answer libmongocrypt finds retryable is retried the same way.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Protocol

from mongio import backend
from mongio.bson import RawBSONDocument, decode
from mongio.bson.codec_options import CodecOptions
from mongio.collection import Collection
from mongio.connection.tls import create_ssl_context
from mongio.encryption import cloud_credentials
from mongio.encryption.kms_connect import KmsConnector
from mongio.encryption.libmongocrypt import KmsRequest
from mongio.encryption_options import KMSConnectCallback
from mongio.errors import ConfigurationError, EncryptionError
from mongio.execution import deadline
from mongio.options.tls_options import TLSOptions, tls_options_from
from mongio.read_concern import ReadConcern

__all__ = ["KMS_TIMEOUT", "ClientCryptIO", "QueryAnalyzer", "kms_ssl_contexts"]

KMS_TIMEOUT = 10.0
"""Seconds one KMS attempt (connect, TLS handshake, request and answer) may take."""
_HTTPS_PORT = 443
_RAW = CodecOptions(document_class=RawBSONDocument)
_CLOSED_MIDWAY = "the KMS closed the connection before the end of its answer"
# Under TLS 1.3 a server refuses a missing client certificate after the client's side of the handshake: the
# client only sees the connection closed (or reset, when the request arrived before the server gave up).
_CLOSED_UNANSWERED = (
    "the KMS closed the connection without answering (as a KMS that requires a client certificate does "
    "without one: see the provider's tlsCertificateKeyFile in kms_tls_options)"
)
_REFUSED_KMS_TLS_OPTIONS = (
    "tlsInsecure",
    "tlsAllowInvalidCertificates",
    "tlsAllowInvalidHostnames",
    "tlsDisableCertificateRevocationCheck",
)


class QueryAnalyzer(Protocol):
    """Marks the fields of a command that automatic encryption must encrypt (mongocryptd's ``markings``)."""

    async def mark_command(self, database: str, command_bson: bytes) -> bytes:
        """The marked command, as mongocryptd answers it (BSON)."""


def kms_ssl_contexts(kms_tls_options: Mapping[str, Mapping[str, Any]] | None) -> dict[str, ssl.SSLContext]:
    """One ``SSLContext`` per provider named in ``kms_tls_options`` (``{"kmip": {"tlsCAFile": ...}}``).

    The options that would turn verification off are refused, as the specification requires: a KMS holds
    the keys of every encrypted value. Reads the files named, so call this when setting up, not per request.
    """
    contexts: dict[str, ssl.SSLContext] = {}
    for provider, options in (kms_tls_options or {}).items():
        refused = [name for name in _REFUSED_KMS_TLS_OPTIONS if name in options]
        if refused:
            raise ConfigurationError(
                f"kms_tls_options[{provider!r}] cannot set {', '.join(refused)}: KMS connections are always verified"
            )
        tls = tls_options_from({**options, "tls": True}, is_srv=False)
        contexts[provider] = create_ssl_context(tls if tls is not None else TLSOptions())
    return contexts


def _kms_address(endpoint: str) -> tuple[str, int]:
    host, colon, port_text = endpoint.rpartition(":")
    if not colon or "]" in port_text:
        return endpoint.strip("[]"), _HTTPS_PORT
    if not port_text.isdigit():
        raise EncryptionError(ConfigurationError(f"the KMS endpoint {endpoint!r} has an invalid port"))
    return host.strip("[]"), int(port_text)


async def _exchange_once(
    request: KmsRequest, host: str, port: int, context: ssl.SSLContext, streams: _StreamOpener
) -> None:
    reader, writer = await streams(host, port, context)
    try:
        writer.write(request.message)
        await writer.drain()
        answered = False
        while (needed := request.bytes_needed) > 0:
            try:
                data = await reader.read(needed)
            except ConnectionResetError:
                if answered:
                    raise
                # A KMS that refuses the client late in a TLS 1.3 handshake closes or resets, by timing.
                data = b""
            if not data:
                raise ConnectionError(_CLOSED_MIDWAY if answered else _CLOSED_UNANSWERED)
            answered = True
            request.feed(data)
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (OSError, ssl.SSLError):
            pass  # the answer is complete, or the failure is already being reported


_StreamOpener = Callable[[str, int, ssl.SSLContext], Awaitable[tuple[backend.ByteReader, backend.ByteWriter]]]


async def _direct_stream(
    host: str, port: int, context: ssl.SSLContext
) -> tuple[backend.ByteReader, backend.ByteWriter]:
    return await backend.open_byte_stream(host, port, context, host)


def _attempt_limit(what: str) -> float:
    """Seconds one KMS attempt may take: :data:`KMS_TIMEOUT`, or less when the operation's timeout
    (``timeoutMS``, a ``mongio.timeout()`` block) ends sooner."""
    left = deadline.remaining()
    if left is None or left >= KMS_TIMEOUT:
        return KMS_TIMEOUT
    _raise_if_no_time_for(0.0, what)
    return left


def _raise_if_no_time_for(seconds: float, what: str) -> None:
    """The operation's timeout error when less than ``seconds`` are left before its deadline."""
    left = deadline.remaining()
    if left is not None and left <= seconds:
        raise deadline.timeout_error(detail=f"the operation's timeout expired ({what})")


class ClientCryptIO:
    """Answers libmongocrypt for a client: ``key_vault`` is the key vault collection (read with read concern
    majority), ``metadata_client_database`` gives the database to list collections on (automatic
    encryption), ``analyzer`` marks commands (automatic encryption; None for explicit encryption),
    ``kms_connect_callback`` opens KMS connections (None: mongio connects to the KMS itself)."""

    def __init__(
        self,
        key_vault: Collection[Any],
        *,
        kms_tls_contexts: Mapping[str, ssl.SSLContext],
        metadata_database: Callable[[str], Any] | None = None,
        analyzer: QueryAnalyzer | None = None,
        credentials: cloud_credentials.OnDemandCredentials | None = None,
        kms_connect_callback: KMSConnectCallback | None = None,
    ) -> None:
        self.__key_vault = key_vault.with_options(codec_options=_RAW, read_concern=ReadConcern("majority"))
        self.__kms_tls_contexts = dict(kms_tls_contexts)
        self.__default_kms_context: ssl.SSLContext | None = None
        self.__metadata_database = metadata_database
        self.__analyzer = analyzer
        self.__credentials = credentials or cloud_credentials.OnDemandCredentials()
        self.__kms_connector = None if kms_connect_callback is None else KmsConnector(kms_connect_callback)

    async def kms_exchange(self, request: KmsRequest) -> None:
        host, port = _kms_address(request.endpoint)
        context = self.__kms_tls_contexts.get(request.provider) or await self.__default_context()
        if request.backoff_seconds:
            _raise_if_no_time_for(request.backoff_seconds, f"waiting to retry KMS {host}:{port}")
            await backend.sleep(request.backoff_seconds)
        limit = _attempt_limit(f"KMS {host}:{port}")
        try:
            async with backend.timeout(limit):
                await _exchange_once(request, host, port, context, self.__stream_opener(limit))
        except TimeoutError:
            _raise_if_no_time_for(0.0, f"KMS {host}:{port} had not answered")
            request.fail(f"no complete answer from {host}:{port} within {limit:g} s")
        except ssl.SSLCertVerificationError as exc:
            # Not a passing fault: a retry would meet the same certificate.
            raise EncryptionError(ConnectionError(f"KMS {host}:{port}: {exc.verify_message}")) from None
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError) as exc:
            request.fail(f"KMS {host}:{port}: {exc.__class__.__name__}: {exc}")

    def __stream_opener(self, limit: float) -> _StreamOpener:
        """How this attempt reaches the KMS: directly, or through ``kms_connect_callback`` (told ``limit``)."""
        connector = self.__kms_connector
        if connector is None:
            return _direct_stream
        return functools.partial(connector.open, time_allowed=limit)

    async def __default_context(self) -> ssl.SSLContext:
        """The system's trust store, for providers without TLS options: loaded once, in a worker thread
        (it reads files)."""
        if self.__default_kms_context is None:
            self.__default_kms_context = await backend.to_thread(create_ssl_context, TLSOptions())
        return self.__default_kms_context

    async def collection_info(self, database: str, filter_bson: bytes) -> list[bytes]:
        if self.__metadata_database is None:
            raise EncryptionError(
                RuntimeError("collection information is only needed by automatic encryption")
            )
        db = self.__metadata_database(database).with_options(codec_options=_RAW)
        cursor = db.list_collections(filter=decode(filter_bson))
        return [document.raw async for document in cursor]

    async def mark_command(self, database: str, command_bson: bytes) -> bytes:
        if self.__analyzer is None:
            raise EncryptionError(
                RuntimeError("marking a command needs automatic encryption's query analysis")
            )
        return await self.__analyzer.mark_command(database, command_bson)

    async def fetch_keys(self, filter_bson: bytes) -> AsyncIterator[bytes]:
        async for document in self.__key_vault.find(decode(filter_bson)):
            yield document.raw

    async def kms_credentials(self, providers: Mapping[str, Any]) -> dict[str, Any]:
        return await self.__credentials.fetch(providers)
