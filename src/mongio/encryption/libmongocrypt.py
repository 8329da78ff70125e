"""The one module that touches ``pymongocrypt`` (libmongocrypt's Python binding, the ``mongio[encryption]``
extra): typed wrappers around its untyped classes, and the loop that drives a libmongocrypt context.

libmongocrypt is a state machine that never does I/O: it asks for key documents, collection information,
markings, KMS exchanges and on-demand credentials, and the driver answers. :class:`Crypt` runs that loop
with an :class:`EncryptionIO` answering every request asynchronously. pymongocrypt ships a loop of its own
(``run_state_machine``), but its on-demand credential step calls boto3 synchronously on the event loop, so
this module has its own loop and asks :meth:`EncryptionIO.kms_credentials` instead.

``pymongocrypt`` is imported on first use only: ``import mongio`` never loads it, and without it
:func:`load` raises ``ConfigurationError`` naming the extra. Every error libmongocrypt reports becomes
:class:`~mongio.errors.EncryptionError`.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NamedTuple, Protocol

from mongio.bson import encode
from mongio.errors import ConfigurationError, EncryptionError

__all__ = [
    "EXTRA_MISSING",
    "Crypt",
    "CryptOptions",
    "EncryptionIO",
    "ExplicitOptions",
    "KmsRequest",
    "load",
    "version",
]

EXTRA_MISSING = (
    "client-side field level encryption needs the pymongocrypt package (libmongocrypt): "
    "pip install 'mongio[encryption]'"
)


@dataclass(frozen=True)
class _Binding:
    """The parts of pymongocrypt this module uses."""

    lib: Any
    ffi: Any
    mongo_crypt: Any
    crypt_options: Any
    data_key_options: Any
    explicit_options: Any
    error: type[Exception]
    callback_base: type
    version: Callable[[], str]


@functools.cache
def load() -> _Binding:
    """pymongocrypt's classes, imported on first call; ``ConfigurationError`` naming the extra without it."""
    try:
        from pymongocrypt.asynchronous.state_machine import AsyncMongoCryptCallback
        from pymongocrypt.binding import ffi, lib, libmongocrypt_version
        from pymongocrypt.errors import MongoCryptError
        from pymongocrypt.mongocrypt import MongoCrypt
        from pymongocrypt.options import DataKeyOpts, ExplicitEncryptOpts, MongoCryptOptions
    except ImportError as exc:
        raise ConfigurationError(f"{EXTRA_MISSING} ({exc})") from None
    return _Binding(
        lib=lib,
        ffi=ffi,
        mongo_crypt=MongoCrypt,
        crypt_options=MongoCryptOptions,
        data_key_options=DataKeyOpts,
        explicit_options=ExplicitEncryptOpts,
        error=MongoCryptError,
        callback_base=AsyncMongoCryptCallback,
        version=libmongocrypt_version,
    )


def version() -> str | None:
    """libmongocrypt's version, or None without the ``mongio[encryption]`` extra."""
    try:
        binding = load()
    except ConfigurationError:
        return None
    return str(binding.version())


class _Translating:
    """Turns libmongocrypt's errors into :class:`EncryptionError` (their text names the problem, never a
    secret). A class rather than a generator context manager: it wraps every value encrypted."""

    __slots__ = ("__error_class",)

    def __init__(self, error_class: type[Exception]) -> None:
        self.__error_class = error_class

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is not None and isinstance(exc, self.__error_class):
            raise EncryptionError(exc) from exc


def _translated() -> _Translating:
    return _Translating(load().error)


class KmsRequest:
    """One HTTP (or KMIP) exchange libmongocrypt wants with a KMS: send :attr:`message` to :attr:`endpoint`
    over TLS, then :meth:`feed` the answer while :attr:`bytes_needed` is positive."""

    __slots__ = ("__context",)

    def __init__(self, context: Any) -> None:
        self.__context = context

    @property
    def endpoint(self) -> str:
        """``host`` or ``host:port`` of the KMS."""
        with _translated():
            return str(self.__context.endpoint)

    @property
    def message(self) -> bytes:
        """The request to send, whole."""
        with _translated():
            return bytes(self.__context.message)

    @property
    def provider(self) -> str:
        """The KMS provider's name (``aws``, ``kmip:name``, ...); its TLS options are looked up by it."""
        return str(self.__context.kms_provider)

    @property
    def bytes_needed(self) -> int:
        """How many more bytes of the answer libmongocrypt wants (0 once it has the whole answer)."""
        return int(self.__context.bytes_needed)

    @property
    def backoff_seconds(self) -> float:
        """How long to wait before this attempt (libmongocrypt's retry backoff; 0 on the first attempt)."""
        return float(self.__context.usleep) / 1e6

    def feed(self, data: bytes) -> None:
        """Give libmongocrypt the next bytes of the answer (at most :attr:`bytes_needed`)."""
        with _translated():
            self.__context.feed(data)

    def fail(self, reason: str) -> None:
        """Report a network failure of this attempt: returns when libmongocrypt will retry the request,
        raises :class:`EncryptionError` naming ``reason`` when it will not."""
        error_class = load().error
        try:
            self.__context.fail()
        except error_class as exc:
            raise EncryptionError(error_class(f"{exc}; the last attempt failed with: {reason}")) from exc


class EncryptionIO(Protocol):
    """What libmongocrypt asks the driver to do; every request is answered asynchronously."""

    async def kms_exchange(self, request: KmsRequest) -> None:
        """Complete one KMS exchange (with retries as ``request`` allows)."""

    async def collection_info(self, database: str, filter_bson: bytes) -> list[bytes]:
        """``listCollections`` on ``database`` with this filter: the matching collection documents."""

    async def mark_command(self, database: str, command_bson: bytes) -> bytes:
        """The command with its fields to encrypt marked (mongocryptd or crypt_shared's answer)."""

    def fetch_keys(self, filter_bson: bytes) -> AsyncIterator[bytes]:
        """The key vault documents matching the filter."""

    async def kms_credentials(self, providers: Mapping[str, Any]) -> dict[str, Any]:
        """Credentials for the providers configured empty (``{"aws": {}}``): fetched on demand."""


@dataclass(frozen=True)
class CryptOptions:
    """How to set libmongocrypt up; the schema and encrypted-fields maps are BSON (automatic encryption)."""

    kms_providers: Mapping[str, Any]
    key_expiration_ms: int | None = None
    schema_map: bytes | None = None
    encrypted_fields_map: bytes | None = None
    bypass_query_analysis: bool = False
    bypass_encryption: bool = True
    crypt_shared_lib_path: str | None = None
    crypt_shared_lib_required: bool = False
    # Automatic encryption answers collection information for several collections at once ($lookup).
    enable_multiple_collinfo: bool = False

    def __repr__(self) -> str:
        return f"CryptOptions(providers={sorted(self.kms_providers)}, key_expiration_ms={self.key_expiration_ms})"


class ExplicitOptions(NamedTuple):
    """One explicit encryption: exactly one of ``key_id`` (the UUID's 16 bytes) and ``key_alt_name``."""

    algorithm: str
    key_id: bytes | None = None
    key_alt_name: str | None = None
    query_type: str | None = None
    contention_factor: int | None = None
    range_options: Mapping[str, Any] | None = None
    string_options: Mapping[str, Any] | None = None
    is_expression: bool = False


def _encode_document(document: Mapping[str, Any]) -> bytes:
    return bytes(encode(document))


def _callback(binding: _Binding) -> Any:
    """The object pymongocrypt insists on (a subclass of its callback class); it only encodes BSON here,
    because the loop below answers every request itself."""

    class _BsonOnly(binding.callback_base):  # type: ignore[misc,name-defined]
        def bson_encode(self, doc: Mapping[str, Any]) -> bytes:
            return _encode_document(doc)

        async def kms_request(self, kms_context: Any) -> None:
            raise NotImplementedError

        async def collection_info(self, database: Any, filter: Any) -> None:
            raise NotImplementedError

        async def mark_command(self, database: Any, cmd: Any) -> None:
            raise NotImplementedError

        async def fetch_keys(self, filter: Any) -> None:
            raise NotImplementedError

        async def insert_data_key(self, data_key: Any) -> None:
            raise NotImplementedError

        async def close(self) -> None:
            return None

    return _BsonOnly()


class Crypt:
    """A libmongocrypt handle (it caches decrypted data keys, per ``key_expiration_ms``) and the loop that
    answers its requests through ``io``."""

    def __init__(self, options: CryptOptions, io: EncryptionIO) -> None:
        binding = load()
        self.__binding = binding
        self.__io = io
        crypt_options = binding.crypt_options(
            dict(options.kms_providers),
            schema_map=options.schema_map,
            encrypted_fields_map=options.encrypted_fields_map,
            bypass_query_analysis=options.bypass_query_analysis,
            crypt_shared_lib_path=options.crypt_shared_lib_path,
            crypt_shared_lib_required=options.crypt_shared_lib_required,
            bypass_encryption=options.bypass_encryption,
            key_expiration_ms=options.key_expiration_ms,
            enable_multiple_collinfo=options.enable_multiple_collinfo,
        )
        self.__translating = _Translating(binding.error)
        with self.__translating:
            self.__crypt = binding.mongo_crypt(crypt_options, _callback(binding))
        lib = binding.lib
        self.__steps: dict[int, Callable[[Any], Any]] = {
            lib.MONGOCRYPT_CTX_NEED_MONGO_COLLINFO: self.__answer_collection_info,
            lib.MONGOCRYPT_CTX_NEED_MONGO_MARKINGS: self.__answer_markings,
            lib.MONGOCRYPT_CTX_NEED_MONGO_KEYS: self.__answer_keys,
            lib.MONGOCRYPT_CTX_NEED_KMS: self.__answer_kms,
            lib.MONGOCRYPT_CTX_NEED_KMS_CREDENTIALS: self.__answer_credentials,
        }

    async def create_data_key(
        self,
        provider: str,
        master_key: Mapping[str, Any] | None,
        key_alt_names: list[str] | None,
        key_material: bytes | None,
    ) -> bytes:
        """A new data key document (BSON), its material encrypted by the provider's master key."""
        names = [_encode_document({"keyAltName": name}) for name in key_alt_names or ()]
        material = _encode_document({"keyMaterial": key_material}) if key_material is not None else None
        with self.__translating:
            options = self.__binding.data_key_options(master_key, names, material)
            context = self.__crypt.data_key_context(provider, options)
        return await self.__finish(context, "creating a data key")

    async def rewrap_many_data_key(
        self, filter_document: Mapping[str, Any], provider: str | None, master_key: Mapping[str, Any] | None
    ) -> bytes | None:
        """``{"v": [rewrapped key documents]}`` (BSON), or None when no key matched."""
        with self.__translating:
            context = self.__crypt.rewrap_many_data_key_context(filter_document, provider, master_key)
        result = await self.__finish_optional(context)
        return result

    async def encrypt(self, value_document: bytes, options: ExplicitOptions) -> bytes:
        """``{"v": ciphertext}`` (BSON) for ``{"v": value}`` (BSON)."""
        key_alt_name = (
            _encode_document({"keyAltName": options.key_alt_name})
            if options.key_alt_name is not None
            else None
        )
        range_options = _encode_document(options.range_options) if options.range_options else None
        string_options = _encode_document(options.string_options) if options.string_options else None
        with self.__translating:
            explicit = self.__binding.explicit_options(
                options.algorithm,
                options.key_id,
                key_alt_name,
                options.query_type,
                options.contention_factor,
                range_options,
                options.is_expression,
                string_options,
            )
            context = self.__crypt.explicit_encryption_context(value_document, explicit)
        return await self.__finish(context, "encrypting a value")

    async def decrypt(self, value_document: bytes) -> bytes:
        """``{"v": value}`` (BSON) for ``{"v": ciphertext}`` (BSON)."""
        with self.__translating:
            context = self.__crypt.explicit_decryption_context(value_document)
        return await self.__finish(context, "decrypting a value")

    async def encrypt_command(self, database: str, command: bytes) -> bytes:
        """The command (BSON) with the fields its schema names encrypted (automatic encryption)."""
        with self.__translating:
            context = self.__crypt.encryption_context(database, command)
        return await self.__finish(context, "encrypting a command")

    async def decrypt_reply(self, reply: bytes) -> bytes:
        """The reply (BSON) with every encrypted value decrypted (automatic decryption)."""
        with self.__translating:
            context = self.__crypt.decryption_context(reply)
        return await self.__finish(context, "decrypting a reply")

    @property
    def crypt_shared_version(self) -> str | None:
        """The version of the crypt_shared library libmongocrypt loaded, None when it loaded none (automatic
        encryption then needs mongocryptd for its markings)."""
        version = self.__crypt.crypt_shared_lib_version
        if version is None:
            return None
        return bytes(self.__binding.ffi.string(version)).decode()

    def close(self) -> None:
        """Free libmongocrypt's handle (and its key cache)."""
        self.__crypt.close()

    async def __finish(self, context: Any, what: str) -> bytes:
        result = await self.__finish_optional(context)
        if result is None:
            raise EncryptionError(RuntimeError(f"libmongocrypt produced nothing while {what}"))
        return result

    async def __finish_optional(self, context: Any) -> bytes | None:
        with context, self.__translating:
            return await self.__run(context)

    async def __run(self, context: Any) -> bytes | None:
        lib = self.__binding.lib
        steps = self.__steps
        while True:
            state = context.state
            if state == lib.MONGOCRYPT_CTX_ERROR:
                # The binding's own reader of the context's status (it raises its error, translated here).
                context._raise_from_status()
            if state == lib.MONGOCRYPT_CTX_READY:
                return bytes(context.finish())
            if state == lib.MONGOCRYPT_CTX_DONE:
                return None
            step = steps.get(state)
            if step is None:
                raise EncryptionError(RuntimeError(f"libmongocrypt is in an unknown state {state}"))
            await step(context)

    async def __answer_collection_info(self, context: Any) -> None:
        for document in await self.__io.collection_info(context.database, bytes(context.mongo_operation())):
            context.add_mongo_operation_result(document)
        context.complete_mongo_operation()

    async def __answer_markings(self, context: Any) -> None:
        marked = await self.__io.mark_command(context.database, bytes(context.mongo_operation()))
        context.add_mongo_operation_result(marked)
        context.complete_mongo_operation()

    async def __answer_keys(self, context: Any) -> None:
        async for key in self.__io.fetch_keys(bytes(context.mongo_operation())):
            context.add_mongo_operation_result(key)
        context.complete_mongo_operation()

    async def __answer_kms(self, context: Any) -> None:
        for kms_context in context.kms_contexts():
            with kms_context:
                await self.__io.kms_exchange(KmsRequest(kms_context))
        context.complete_kms()

    async def __answer_credentials(self, context: Any) -> None:
        credentials = await self.__io.kms_credentials(context.kms_providers)
        context.provide_kms_providers(_encode_document(credentials))
