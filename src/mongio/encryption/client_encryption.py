"""Explicit encryption and key management: :class:`ClientEncryption` (PyMongo's ``ClientEncryption`` /
``AsyncClientEncryption``: same method names and arguments)."""

from __future__ import annotations

import contextlib
import struct
import uuid
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from mongio.bson import RawBSONDocument, decode, encode
from mongio.bson.binary import Binary
from mongio.bson.codec_options import CodecOptions
from mongio.client import MongoClient
from mongio.collection import Collection
from mongio.cursor import Cursor
from mongio.database import Database
from mongio.encryption import cloud_credentials
from mongio.encryption.crypt_io import ClientCryptIO, kms_ssl_contexts
from mongio.encryption.error_wrapping import as_encryption_errors as _as_encryption_errors
from mongio.encryption.libmongocrypt import Crypt, CryptOptions, ExplicitOptions
from mongio.encryption_options import (
    KMSConnectCallback,
    RangeOpts,
    StringOpts,
    checked_kms_connect_callback,
)
from mongio.errors import (
    ConfigurationError,
    EncryptedCollectionError,
    EncryptionError,
    InvalidOperation,
)
from mongio.execution.deadline import timeout, timeout_seconds
from mongio.operations.models import UpdateOne
from mongio.operations.results import BulkWriteResult, DeleteResult
from mongio.read_concern import ReadConcern
from mongio.write_concern import WriteConcern

__all__ = ["ClientEncryption", "RewrapManyDataKeyResult"]

_UUID_SUBTYPE = 4


@dataclass(frozen=True)
class RewrapManyDataKeyResult:
    """What :meth:`ClientEncryption.rewrap_many_data_key` did: ``bulk_write_result`` is None when no key
    matched the filter."""

    bulk_write_result: BulkWriteResult | None = None




def _key_id_bytes(key_id: Any) -> bytes | None:
    if key_id is None:
        return None
    if isinstance(key_id, uuid.UUID):
        return key_id.bytes
    if isinstance(key_id, bytes) and getattr(key_id, "subtype", None) == _UUID_SUBTYPE and len(key_id) == 16:
        return bytes(key_id)
    raise TypeError("key_id must be a uuid.UUID or a Binary of subtype 4 (UUID)")


_UNBOUNDED = contextlib.nullcontext()
_INT32 = struct.Struct("<i")


def _ciphertext_document(ciphertext: bytes) -> bytes:
    """``{"v": ciphertext}`` as BSON (binary, subtype 6), built directly: it is all ``decrypt`` sends
    libmongocrypt, once per value."""
    size = len(ciphertext)
    return b"".join(
        (_INT32.pack(13 + size), b"\x05v\x00", _INT32.pack(size), b"\x06", bytes(ciphertext), b"\x00")
    )


class ClientEncryption:
    """Explicit client-side field level encryption and Queryable Encryption payloads, and the key vault.

    ``kms_providers`` maps provider names (``local``, ``aws``, ``azure``, ``gcp``, ``kmip``, or named ones
    such as ``local:tenant``) to their credentials; a cloud provider given as ``{}`` gets its credentials on
    demand. ``key_vault_namespace`` is ``"database.collection"`` on ``key_vault_client``; values come back
    decoded with ``codec_options``. ``kms_tls_options`` gives each provider its TLS options (``tlsCAFile``,
    ``tlsCertificateKeyFile``...). Decrypted data keys stay cached ``key_expiration_ms`` (60 000 by default;
    0: forever). ``credential_providers={"aws": provider}`` fetches the on-demand AWS credentials (with
    ``kms_providers={"aws": {}}``) from ``provider`` instead of the AWS credential chain: a function (run in
    a worker thread) or a coroutine function returning credentials with ``access_key``, ``secret_key`` and
    ``token`` attributes, such as ``boto3.Session().get_credentials``. ``kms_connect_callback`` opens the KMS
    connections (through an HTTP proxy, say), see :data:`~mongio.encryption_options.KMSConnectCallback`. The
    key vault client's ``timeoutMS`` (or an enclosing :func:`mongio.timeout` block) bounds each operation, its
    KMS exchanges included. Needs the ``mongio[encryption]`` extra. Use ``async with`` or :meth:`close`.
    """

    def __init__(
        self,
        kms_providers: Mapping[str, Any],
        key_vault_namespace: str,
        key_vault_client: MongoClient,
        codec_options: Any,
        kms_tls_options: Mapping[str, Mapping[str, Any]] | None = None,
        key_expiration_ms: int | None = None,
        credential_providers: Mapping[str, Any] | None = None,
        kms_connect_callback: KMSConnectCallback | None = None,
    ) -> None:
        if not isinstance(kms_providers, Mapping):
            raise TypeError("kms_providers must be a mapping of provider names to their options")
        aws_provider = cloud_credentials.aws_credential_provider(credential_providers, kms_providers)
        database_name, dot, collection_name = key_vault_namespace.partition(".")
        if not dot or not database_name or not collection_name:
            raise ConfigurationError(
                f"key_vault_namespace must be 'database.collection', not {key_vault_namespace!r}"
            )
        self.__codec_options = key_vault_client.codec_options.resolve(codec_options)
        self.__raw_codec_options = key_vault_client.codec_options.resolve(
            CodecOptions(document_class=RawBSONDocument)
        )
        self.__key_vault: Collection[Any] = key_vault_client[database_name].get_collection(
            collection_name,
            codec_options=self.__raw_codec_options,
            write_concern=WriteConcern(w="majority"),
            read_concern=ReadConcern("majority"),
        )
        io = ClientCryptIO(
            self.__key_vault,
            kms_tls_contexts=kms_ssl_contexts(kms_tls_options),
            credentials=cloud_credentials.OnDemandCredentials(aws_provider=aws_provider),
            kms_connect_callback=checked_kms_connect_callback(kms_connect_callback),
        )
        # The key vault client's timeoutMS bounds each operation whole: key vault reads and KMS exchanges.
        self.__timeout = timeout_seconds(key_vault_client.options.timeout_ms)
        self.__crypt: Crypt | None = Crypt(
            CryptOptions(kms_providers=kms_providers, key_expiration_ms=key_expiration_ms), io
        )

    def __repr__(self) -> str:
        return f"ClientEncryption(key_vault={self.__key_vault.full_name!r}, closed={self.__crypt is None})"

    # Data keys

    async def create_data_key(
        self,
        kms_provider: str,
        master_key: Mapping[str, Any] | None = None,
        key_alt_names: Sequence[str] | None = None,
        key_material: bytes | None = None,
    ) -> Binary:
        """Create a data key, its material encrypted by ``kms_provider``'s ``master_key``, insert it in the
        key vault and return its ``_id`` (a UUID Binary). ``key_material``: 96 bytes to use instead of
        random ones."""
        crypt = self.__open()
        with self.__bounded(), _as_encryption_errors:
            key_document = await crypt.create_data_key(
                kms_provider, master_key, list(key_alt_names) if key_alt_names else None, key_material
            )
            await self.__key_vault.insert_one(RawBSONDocument(key_document))
        # A Binary whatever the codec options' UUID representation, as PyMongo returns it.
        return RawBSONDocument(key_document, self.__raw_codec_options)["_id"]  # type: ignore[no-any-return]

    async def get_key(self, id: Any) -> RawBSONDocument | None:
        """The key document whose ``_id`` is ``id``, or None."""
        self.__open()
        return await self.__key_vault.find_one({"_id": id})

    def get_keys(self) -> Cursor[RawBSONDocument]:
        """A cursor over every key document of the key vault."""
        self.__open()
        return self.__key_vault.find({})

    async def get_key_by_alt_name(self, key_alt_name: str) -> RawBSONDocument | None:
        """The key document that has ``key_alt_name`` among its ``keyAltNames``, or None."""
        self.__open()
        return await self.__key_vault.find_one({"keyAltNames": key_alt_name})

    async def delete_key(self, id: Any) -> DeleteResult:
        """Delete the key document whose ``_id`` is ``id``."""
        self.__open()
        return await self.__key_vault.delete_one({"_id": id})

    async def add_key_alt_name(self, id: Any, key_alt_name: str) -> Any:
        """Add ``key_alt_name`` to the key's ``keyAltNames``; returns the key document as it was, or None."""
        self.__open()
        return await self.__key_vault.find_one_and_update(
            {"_id": id}, {"$addToSet": {"keyAltNames": key_alt_name}}
        )

    async def remove_key_alt_name(self, id: Any, key_alt_name: str) -> RawBSONDocument | None:
        """Remove ``key_alt_name`` from the key's ``keyAltNames`` (dropping the field when it becomes
        empty); returns the key document as it was, or None."""
        self.__open()
        remaining = {"$filter": {"input": "$keyAltNames", "cond": {"$ne": ["$$this", key_alt_name]}}}
        update = [
            {
                "$set": {
                    "keyAltNames": {
                        "$cond": [{"$eq": ["$keyAltNames", [key_alt_name]]}, "$$REMOVE", remaining]
                    }
                }
            }
        ]
        return await self.__key_vault.find_one_and_update({"_id": id}, update)

    async def rewrap_many_data_key(
        self,
        filter: Mapping[str, Any],
        provider: str | None = None,
        master_key: Mapping[str, Any] | None = None,
    ) -> RewrapManyDataKeyResult:
        """Decrypt the matching data keys and encrypt them again, with ``provider``'s ``master_key`` when
        given (each with its own provider otherwise), then write them back: the data they encrypt is
        untouched."""
        if master_key is not None and provider is None:
            raise ConfigurationError("rewrap_many_data_key: a master_key needs its provider")
        crypt = self.__open()
        with self.__bounded(), _as_encryption_errors:
            rewrapped = await crypt.rewrap_many_data_key(filter, provider, master_key)
        if rewrapped is None:
            return RewrapManyDataKeyResult()
        updates = [
            UpdateOne(
                {"_id": key["_id"]},
                {
                    "$set": {"keyMaterial": key["keyMaterial"], "masterKey": key["masterKey"]},
                    "$currentDate": {"updateDate": True},
                },
            )
            for key in decode(rewrapped)["v"]
        ]
        if not updates:
            return RewrapManyDataKeyResult()
        return RewrapManyDataKeyResult(await self.__key_vault.bulk_write(updates))

    # Values

    async def encrypt(
        self,
        value: Any,
        algorithm: str,
        key_id: Any = None,
        key_alt_name: str | None = None,
        query_type: str | None = None,
        contention_factor: int | None = None,
        range_opts: RangeOpts | None = None,
        string_opts: StringOpts | None = None,
    ) -> Binary:
        """``value`` encrypted (a Binary of subtype 6) with the data key ``key_id`` (or ``key_alt_name``)
        and ``algorithm`` (see :class:`~mongio.encryption_options.Algorithm`); ``query_type``,
        ``contention_factor``, ``range_opts`` and ``string_opts`` are for the Queryable Encryption ones."""
        encrypted = await self.__encrypt(
            {"v": value},
            ExplicitOptions(
                algorithm=str(algorithm),
                key_id=_key_id_bytes(key_id),
                key_alt_name=key_alt_name,
                query_type=None if query_type is None else str(query_type),
                contention_factor=contention_factor,
                range_options=range_opts.document if range_opts is not None else None,
                string_options=string_opts.document if string_opts is not None else None,
            ),
        )
        return decode(encrypted, self.__codec_options)["v"]  # type: ignore[no-any-return]

    async def encrypt_expression(
        self,
        expression: Mapping[str, Any],
        algorithm: str,
        key_id: Any = None,
        key_alt_name: str | None = None,
        query_type: str | None = None,
        contention_factor: int | None = None,
        range_opts: RangeOpts | None = None,
    ) -> RawBSONDocument:
        """A range query ``expression`` (``{"$and": [{"$gte": ...}, {"$lt": ...}]}``) with its bounds
        encrypted, for a ``Range`` field."""
        encrypted = await self.__encrypt(
            {"v": expression},
            ExplicitOptions(
                algorithm=str(algorithm),
                key_id=_key_id_bytes(key_id),
                key_alt_name=key_alt_name,
                query_type=None if query_type is None else str(query_type),
                contention_factor=contention_factor,
                range_options=range_opts.document if range_opts is not None else None,
                is_expression=True,
            ),
        )
        return RawBSONDocument(encrypted, self.__raw_codec_options)["v"]  # type: ignore[no-any-return]

    async def decrypt(self, value: Binary) -> Any:
        """The value ``value`` (a Binary of subtype 6) encrypts."""
        crypt = self.__open()
        if not isinstance(value, bytes) or getattr(value, "subtype", None) != 6:
            raise TypeError("decrypt takes an encrypted value: a Binary of subtype 6")
        with self.__bounded(), _as_encryption_errors:
            decrypted = await crypt.decrypt(_ciphertext_document(value))
        return decode(decrypted, self.__codec_options)["v"]

    async def create_encrypted_collection(
        self,
        database: Database[Any],
        name: str,
        encrypted_fields: Mapping[str, Any],
        kms_provider: str | None = None,
        master_key: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> tuple[Collection[Any], Mapping[str, Any]]:
        """Create ``name`` with ``encryptedFields``, making a data key (with ``kms_provider`` and
        ``master_key``) for every field whose ``keyId`` is None; returns the collection and the
        ``encryptedFields`` with the new key ids. Raises ``EncryptedCollectionError`` carrying those fields
        (keys made so far included) when a step fails."""
        if not isinstance(encrypted_fields, Mapping):
            # Never a plain collection in place of an encrypted one.
            raise ConfigurationError(
                f"create_encrypted_collection needs the encryptedFields of {name!r}, "
                f"not {type(encrypted_fields).__name__}"
            )
        fields_out = dict(encrypted_fields)
        fields_out["fields"] = [dict(field) for field in encrypted_fields.get("fields", ())]
        try:
            for field in fields_out["fields"]:
                if "keyId" in field and field["keyId"] is None:
                    if kms_provider is None:
                        raise ConfigurationError(
                            "create_encrypted_collection needs a kms_provider to make data keys"
                        )
                    field["keyId"] = await self.create_data_key(kms_provider, master_key)
            collection = await database.create_collection(name, encryptedFields=fields_out, **kwargs)
        except Exception as exc:
            raise EncryptedCollectionError(exc, fields_out) from exc
        return collection, fields_out

    # Lifetime

    async def close(self) -> None:
        """Release libmongocrypt's handle (and its key cache); the key vault client stays open."""
        crypt, self.__crypt = self.__crypt, None
        if crypt is not None:
            crypt.close()

    async def __aenter__(self) -> ClientEncryption:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __bounded(self) -> AbstractContextManager[object]:
        """The key vault client's timeoutMS around one operation (nothing to enter without one: the
        common case, and a per-value cost)."""
        return _UNBOUNDED if self.__timeout is None else timeout(self.__timeout)

    def __open(self) -> Crypt:
        if self.__crypt is None:
            raise InvalidOperation("Cannot use closed ClientEncryption")
        return self.__crypt

    async def __encrypt(self, document: Mapping[str, Any], options: ExplicitOptions) -> bytes:
        crypt = self.__open()
        if (options.key_id is None) == (options.key_alt_name is None):
            raise EncryptionError(ValueError("encrypt needs exactly one of key_id and key_alt_name"))
        value = bytes(encode(document, codec_options=self.__codec_options))
        with self.__bounded(), _as_encryption_errors:
            return await crypt.encrypt(value, options)
