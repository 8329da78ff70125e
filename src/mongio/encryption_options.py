"""Options of client-side field level encryption and Queryable Encryption, under PyMongo's names
(``pymongo.encryption_options``): :class:`AutoEncryptionOpts`, :class:`RangeOpts`, :class:`StringOpts` and the
:class:`Algorithm` and :class:`QueryType` constants.

Nothing here needs ``pymongocrypt``: the options can be built (and ported code imported) without the
``mongio[encryption]`` extra; what encrypts raises ``ConfigurationError`` naming the extra when it is missing.
"""

from __future__ import annotations

import enum
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from mongio.bson.int64 import Int64
from mongio.errors import ConfigurationError

__all__ = [
    "Algorithm",
    "AsyncKMSConnectCallback",
    "AutoEncryptionOpts",
    "KMSConnectCallback",
    "KMSConnectContext",
    "PrefixOpts",
    "QueryType",
    "RangeOpts",
    "StringOpts",
    "SubstringOpts",
    "SuffixOpts",
    "TextOpts",
]


class Algorithm(enum.StrEnum):
    """The encryption algorithms of explicit encryption (libmongocrypt's names)."""

    AEAD_AES_256_CBC_HMAC_SHA_512_Deterministic = "AEAD_AES_256_CBC_HMAC_SHA_512-Deterministic"
    """Client-side field level encryption, deterministic: equal values give equal ciphertexts."""
    AEAD_AES_256_CBC_HMAC_SHA_512_Random = "AEAD_AES_256_CBC_HMAC_SHA_512-Random"
    """Client-side field level encryption, randomized."""
    INDEXED = "Indexed"
    """Queryable Encryption, queryable by equality."""
    UNINDEXED = "Unindexed"
    """Queryable Encryption, not queryable."""
    RANGE = "Range"
    """Queryable Encryption, queryable by range (with :class:`RangeOpts`)."""
    STRING = "String"
    """Queryable Encryption of strings for prefix, suffix and substring queries (with :class:`StringOpts`)."""
    TEXTPREVIEW = "TextPreview"
    """The preview name of :attr:`STRING` (deprecated)."""


class QueryType(enum.StrEnum):
    """What an encrypted query value is for (``query_type`` of ``encrypt`` and ``encrypt_expression``)."""

    EQUALITY = "equality"
    """An equality match on an ``Indexed`` field."""
    RANGE = "range"
    """A range match on a ``Range`` field."""
    PREFIX = "prefix"
    """``$encStrStartsWith`` on a ``String`` field."""
    SUFFIX = "suffix"
    """``$encStrEndsWith`` on a ``String`` field."""
    SUBSTRING = "substring"
    """``$encStrContains`` on a ``String`` field."""


@dataclass(frozen=True)
class RangeOpts:
    """Options of the ``Range`` algorithm; ``min``/``max`` are values of the field's type, ``precision`` is
    for doubles and decimals only."""

    sparsity: int | None = None
    trim_factor: int | None = None
    min: Any = None
    max: Any = None
    precision: int | None = None

    @property
    def document(self) -> dict[str, Any]:
        """The options as libmongocrypt reads them (only those given)."""
        fields = {
            "sparsity": Int64(self.sparsity) if self.sparsity is not None else None,
            "trimFactor": self.trim_factor,
            "precision": self.precision,
            "min": self.min,
            "max": self.max,
        }
        return {name: value for name, value in fields.items() if value is not None}


class SubstringOpts(TypedDict):
    """Options of substring queries: the longest string inserted, the shortest and longest query."""

    strMaxLength: int
    strMinQueryLength: int
    strMaxQueryLength: int


class PrefixOpts(TypedDict):
    """Options of prefix queries: the shortest and longest query."""

    strMinQueryLength: int
    strMaxQueryLength: int


class SuffixOpts(TypedDict):
    """Options of suffix queries: the shortest and longest query."""

    strMinQueryLength: int
    strMaxQueryLength: int


@dataclass(frozen=True)
class StringOpts:
    """Options of the ``String`` algorithm."""

    substring: SubstringOpts | None = None
    prefix: PrefixOpts | None = None
    suffix: SuffixOpts | None = None
    case_sensitive: bool | None = None
    diacritic_sensitive: bool | None = None

    @property
    def document(self) -> dict[str, Any]:
        """The options as libmongocrypt reads them (only those given)."""
        fields = {
            "substring": self.substring,
            "prefix": self.prefix,
            "suffix": self.suffix,
            "caseSensitive": self.case_sensitive,
            "diacriticSensitive": self.diacritic_sensitive,
        }
        return {name: value for name, value in fields.items() if value is not None}


TextOpts = StringOpts
"""The preview name of :class:`StringOpts`."""


@dataclass(frozen=True)
class KMSConnectContext:
    """What ``kms_connect_callback`` is given (PyMongo's name and fields): the KMS to reach, ``host`` and
    ``port``, and ``timeout``, the seconds the callback has (the KMS attempt's limit, 10 s, or what is left of
    ``timeoutMS`` or a :func:`mongio.timeout` block when that is less). ``host`` is the name the driver's TLS
    handshake checks the KMS's certificate against, whatever the returned socket is connected to."""

    host: str
    port: int
    timeout: float


KMSConnectCallback = Callable[[KMSConnectContext], socket.socket | Awaitable[socket.socket]]
"""``kms_connect_callback``: opens the TCP connection to a KMS (through an HTTP ``CONNECT`` proxy, say) and
returns it as a connected, plain :class:`socket.socket` (not an ``ssl.SSLSocket``), over which mongio does
the KMS's TLS handshake. A coroutine function is awaited on the event loop; a plain function runs in a worker
thread (so it may block), abandoned at the deadline, the socket it returns late then closed. An ``OSError``
it raises is a network failure, retried as a KMS connection failure is (the callback is called again);
another exception fails the operation with an ``EncryptionError`` naming the callback."""


AsyncKMSConnectCallback = Callable[[KMSConnectContext], Awaitable[socket.socket]]
"""A ``kms_connect_callback`` that is a coroutine function (PyMongo's name for the asynchronous API's)."""


def checked_kms_connect_callback(value: object) -> KMSConnectCallback | None:
    """``value`` when it is None or callable; ``ConfigurationError`` naming the option otherwise."""
    if value is not None and not callable(value):
        raise ConfigurationError(
            f"kms_connect_callback must be callable (a function or coroutine function taking a "
            f"KMSConnectContext), not {type(value).__name__}"
        )
    return value


def _with_idle_shutdown(arguments: Sequence[Any] | None) -> list[str]:
    """mongocryptd's arguments as strings, with ``--idleShutdownTimeoutSecs=60`` unless one of them sets it
    (``--idleShutdownTimeoutSecs=N``, or the name followed by the value: ``["--idleShutdownTimeoutSecs", 60]``)."""
    given = [str(argument) for argument in arguments] if arguments is not None else []
    if not any(argument.startswith("--idleShutdownTimeoutSecs") for argument in given):
        given.append("--idleShutdownTimeoutSecs=60")
    return given


@dataclass(frozen=True, init=False)
class AutoEncryptionOpts:
    """Options of automatic encryption and decryption (PyMongo's ``AutoEncryptionOpts``, same arguments).

    Building them needs nothing; a client given them (``MongoClient(..., auto_encryption_opts=opts)``)
    needs the ``mongio[encryption]`` extra. It encrypts the fields its schema map (or the server's JSON
    schema, or ``encrypted_fields_map``) names in every command and decrypts every reply;
    ``bypass_auto_encryption=True`` only decrypts. Markings come from crypt_shared when it loads, else
    from mongocryptd (spawned from ``mongocryptd_spawn_path`` with ``mongocryptd_spawn_args`` unless
    ``mongocryptd_bypass_spawn``, reached at ``mongocryptd_uri``). Automatic encryption is an enterprise
    only feature that only applies to operations on a collection; enabling it reduces the maximum write
    batch size (2 MiB before encryption) and may have a negative performance impact.
    ``credential_providers={"aws": provider}`` (with ``kms_providers={"aws": {}}``) fetches the on-demand AWS
    credentials from ``provider`` instead of the AWS credential chain, as for ``ClientEncryption``.
    ``kms_connect_callback`` opens KMS connections (through an HTTP proxy, say): see :data:`KMSConnectCallback`.
    """

    kms_providers: Mapping[str, Any] = field(repr=False)
    key_vault_namespace: str
    key_vault_client: Any
    schema_map: Mapping[str, Any] | None
    bypass_auto_encryption: bool
    mongocryptd_uri: str
    mongocryptd_bypass_spawn: bool
    mongocryptd_spawn_path: str
    mongocryptd_spawn_args: list[str]
    kms_tls_options: Mapping[str, Any] | None
    crypt_shared_lib_path: str | None
    crypt_shared_lib_required: bool
    bypass_query_analysis: bool
    encrypted_fields_map: Mapping[str, Any] | None
    key_expiration_ms: int | None
    credential_providers: Mapping[str, Any] | None = field(repr=False)
    kms_connect_callback: KMSConnectCallback | None

    def __init__(
        self,
        kms_providers: Mapping[str, Any],
        key_vault_namespace: str,
        key_vault_client: Any = None,
        schema_map: Mapping[str, Any] | None = None,
        bypass_auto_encryption: bool = False,
        mongocryptd_uri: str = "mongodb://localhost:27020",
        mongocryptd_bypass_spawn: bool = False,
        mongocryptd_spawn_path: str = "mongocryptd",
        mongocryptd_spawn_args: Sequence[Any] | None = None,
        kms_tls_options: Mapping[str, Any] | None = None,
        crypt_shared_lib_path: str | None = None,
        crypt_shared_lib_required: bool = False,
        bypass_query_analysis: bool = False,
        encrypted_fields_map: Mapping[str, Any] | None = None,
        key_expiration_ms: int | None = None,
        credential_providers: Mapping[str, Any] | None = None,
        kms_connect_callback: KMSConnectCallback | None = None,
    ) -> None:
        if isinstance(mongocryptd_spawn_args, str):
            raise TypeError("mongocryptd_spawn_args must be a list of strings, not a string")
        values = {
            "kms_providers": kms_providers,
            "key_vault_namespace": key_vault_namespace,
            "key_vault_client": key_vault_client,
            "schema_map": schema_map,
            "bypass_auto_encryption": bypass_auto_encryption,
            "mongocryptd_uri": mongocryptd_uri,
            "mongocryptd_bypass_spawn": mongocryptd_bypass_spawn,
            "mongocryptd_spawn_path": mongocryptd_spawn_path,
            "mongocryptd_spawn_args": _with_idle_shutdown(mongocryptd_spawn_args),
            "kms_tls_options": kms_tls_options,
            "crypt_shared_lib_path": crypt_shared_lib_path,
            "crypt_shared_lib_required": crypt_shared_lib_required,
            "bypass_query_analysis": bypass_query_analysis,
            "encrypted_fields_map": encrypted_fields_map,
            "key_expiration_ms": key_expiration_ms,
            "credential_providers": credential_providers,
            "kms_connect_callback": checked_kms_connect_callback(kms_connect_callback),
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)
