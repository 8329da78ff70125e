"""Automatic encryption and decryption for a client made with ``auto_encryption_opts``: :class:`AutoEncrypter`,
the executor's :class:`~mongio.execution.command_crypt.CommandCrypt` hook.

It owns what the client-side encryption specification gives an encrypted ``MongoClient``
("keyVaultClient, metadataClient, and the internal MongoClient", "Managing mongocryptd"):

- the libmongocrypt handle, set up with the schema map, the encrypted fields map, the crypt_shared options
  and, unless ``bypass_auto_encryption``, crypt_shared's ``$SYSTEM`` search path;
- the key vault client: ``key_vault_client`` when given, else the client itself when its pool is unlimited
  (``maxPoolSize=0``), else an internal client;
- the metadata client that lists collections for remote schemas: none with ``bypass_auto_encryption``, else
  the client itself when its pool is unlimited, else the internal client;
- the internal client (made at most once): the parent's options, ``minPoolSize=0``, no automatic encryption;
- :class:`~mongio.encryption.mongocryptd.Mongocryptd` for markings, only when something may ask for them: not
  with ``bypass_auto_encryption`` or ``bypass_query_analysis``, not once crypt_shared is loaded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any

from mongio import backend
from mongio.bson import encode
from mongio.bson.codec_options import CodecOptions
from mongio.encryption import cloud_credentials
from mongio.encryption.crypt_io import ClientCryptIO, kms_ssl_contexts
from mongio.encryption.error_wrapping import as_encryption_errors
from mongio.encryption.libmongocrypt import Crypt, CryptOptions, KmsRequest
from mongio.encryption.mongocryptd import Mongocryptd
from mongio.errors import ConfigurationError, EncryptionError

if TYPE_CHECKING:
    from mongio.client import MongoClient
    from mongio.encryption_options import AutoEncryptionOpts

__all__ = ["AutoEncrypter"]

# The maps' key ids are UUIDs: encoded as BSON binary subtype 4 whatever the client's own UUID setting.
_MAP_CODEC_OPTIONS = CodecOptions(uuid_representation=4)


def _encoded_map(name: str, value: Mapping[str, Any] | None) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a mapping of namespaces to documents, not {type(value).__name__}")
    return bytes(encode(value, codec_options=_MAP_CODEC_OPTIONS))


def _key_vault_names(namespace: str) -> tuple[str, str]:
    database, dot, collection = namespace.partition(".") if isinstance(namespace, str) else ("", "", "")
    if not dot or not database or not collection:
        raise ConfigurationError(f"key_vault_namespace must be 'database.collection', not {namespace!r}")
    return database, collection


class AutoEncrypter:
    """Encrypts the commands and decrypts the replies of the client ``client``, configured by ``opts``.

    ``internal_client`` makes the internal client (the parent's options with ``minPoolSize=0`` and without
    automatic encryption); ``unlimited_pool``: the parent's ``maxPoolSize`` is 0, so it serves as its own
    key vault and metadata client. Raises ``ConfigurationError`` for invalid options and ``EncryptionError``
    when libmongocrypt cannot be set up (crypt_shared required but not found, say).
    """

    def __init__(
        self,
        opts: AutoEncryptionOpts,
        client: MongoClient[Any],
        internal_client: Callable[[], MongoClient[Any]],
        *,
        unlimited_pool: bool,
    ) -> None:
        from mongio.client import MongoClient

        if opts.key_vault_client is not None and not isinstance(opts.key_vault_client, MongoClient):
            raise TypeError(
                f"key_vault_client must be a mongio MongoClient, not {type(opts.key_vault_client).__name__}"
            )
        if not isinstance(opts.kms_providers, Mapping):
            raise TypeError("kms_providers must be a mapping of provider names to their options")
        self._aws_provider = cloud_credentials.aws_credential_provider(
            opts.credential_providers, opts.kms_providers
        )
        database_name, collection_name = _key_vault_names(opts.key_vault_namespace)
        self._opts = opts
        self._make_internal = internal_client
        self._internal: MongoClient[Any] | None = None
        key_vault_client = opts.key_vault_client
        if key_vault_client is None:
            key_vault_client = client if unlimited_pool else self._internal_client()
        metadata_client: MongoClient[Any] | None = None
        if not opts.bypass_auto_encryption:
            metadata_client = client if unlimited_pool else self._internal_client()
        self._key_vault_client: MongoClient[Any] = key_vault_client
        self._key_vault_names = (database_name, collection_name)
        self._metadata_client = metadata_client
        self._kms_tls_contexts = kms_ssl_contexts(opts.kms_tls_options)
        # Made on first use: the client itself may be the key vault or metadata client, and it is not
        # complete until this object is made.
        self._io: ClientCryptIO | None = None
        options = CryptOptions(
            kms_providers=opts.kms_providers,
            key_expiration_ms=opts.key_expiration_ms,
            schema_map=_encoded_map("schema_map", opts.schema_map),
            encrypted_fields_map=_encoded_map("encrypted_fields_map", opts.encrypted_fields_map),
            bypass_query_analysis=opts.bypass_query_analysis,
            bypass_encryption=opts.bypass_auto_encryption,
            crypt_shared_lib_path=opts.crypt_shared_lib_path,
            crypt_shared_lib_required=opts.crypt_shared_lib_required,
            enable_multiple_collinfo=True,
        )
        try:
            self._crypt: Crypt | None = Crypt(options, self)
        except ValueError as exc:  # the KMS providers' options, as pymongocrypt checks them
            raise ConfigurationError(f"auto_encryption_opts: {exc}") from None
        self._mongocryptd = self._query_analysis(self._crypt)

    def __repr__(self) -> str:
        return (
            f"AutoEncrypter(key_vault={self._opts.key_vault_namespace!r}, "
            f"encrypts_commands={self.encrypts_commands}, mongocryptd={self._mongocryptd!r})"
        )

    def _internal_client(self) -> MongoClient[Any]:
        if self._internal is None:
            self._internal = self._make_internal()
        return self._internal

    def _query_analysis(self, crypt: Crypt) -> Mongocryptd | None:
        """The mongocryptd to ask for markings, or None when nothing will ask (crypt_shared marks commands
        itself; bypassed encryption or query analysis asks for none)."""
        opts = self._opts
        if opts.bypass_auto_encryption or opts.bypass_query_analysis or crypt.crypt_shared_version is not None:
            return None
        spawn = None
        if not opts.mongocryptd_bypass_spawn:
            spawn = [opts.mongocryptd_spawn_path, *opts.mongocryptd_spawn_args]
        return Mongocryptd(opts.mongocryptd_uri, spawn)

    # -- what the executor asks (CommandCrypt) ----------------------------------------------------------------

    @property
    def encrypts_commands(self) -> bool:
        """False with ``bypass_auto_encryption``: replies are decrypted, commands go as they are."""
        return not self._opts.bypass_auto_encryption

    async def encrypt_command(self, database: str, command: bytes) -> bytes:
        """The command with the fields its schema names encrypted (libmongocrypt refuses what it cannot
        encrypt: an unsupported command, a view, an aggregation over another collection...)."""
        with as_encryption_errors:
            return await self._open().encrypt_command(database, command)

    async def decrypt_reply(self, reply: bytes) -> bytes:
        """The reply with every encrypted value decrypted."""
        with as_encryption_errors:
            return await self._open().decrypt_reply(reply)

    # -- what libmongocrypt asks (EncryptionIO) ---------------------------------------------------------------

    def _answers(self) -> ClientCryptIO:
        if self._io is None:
            database_name, collection_name = self._key_vault_names
            metadata = self._metadata_client
            self._io = ClientCryptIO(
                self._key_vault_client[database_name][collection_name],
                kms_tls_contexts=self._kms_tls_contexts,
                metadata_database=None if metadata is None else metadata.get_database,
                credentials=cloud_credentials.OnDemandCredentials(aws_provider=self._aws_provider),
                kms_connect_callback=self._opts.kms_connect_callback,
            )
        return self._io

    async def kms_exchange(self, request: KmsRequest) -> None:
        """One KMS exchange, over mongio's TLS (:class:`~mongio.encryption.crypt_io.ClientCryptIO`)."""
        await self._answers().kms_exchange(request)

    async def collection_info(self, database: str, filter_bson: bytes) -> list[bytes]:
        """``listCollections`` through the metadata client (for a schema not in the schema map)."""
        return await self._answers().collection_info(database, filter_bson)

    def fetch_keys(self, filter_bson: bytes) -> AsyncIterator[bytes]:
        """The key documents, from the key vault client (read concern majority)."""
        return self._answers().fetch_keys(filter_bson)

    async def kms_credentials(self, providers: Mapping[str, Any]) -> dict[str, Any]:
        """On-demand credentials of the cloud providers configured empty."""
        return await self._answers().kms_credentials(providers)

    async def mark_command(self, database: str, command_bson: bytes) -> bytes:
        """The command with its fields to encrypt marked, from mongocryptd."""
        if self._mongocryptd is None:
            raise EncryptionError(
                RuntimeError("libmongocrypt asked for markings although no query analysis is configured")
            )
        return await self._mongocryptd.mark_command(database, command_bson)

    # -- the parts, for the client and tests ------------------------------------------------------------------

    @property
    def mongocryptd(self) -> Mongocryptd | None:
        """The mongocryptd markings come from, None when none is used."""
        return self._mongocryptd

    @property
    def internal_client(self) -> MongoClient[Any] | None:
        """The internal client, None when none was needed."""
        return self._internal

    @property
    def crypt_shared_version(self) -> str | None:
        """The crypt_shared library's version, None when it is not loaded."""
        return None if self._crypt is None else self._crypt.crypt_shared_version

    def _open(self) -> Crypt:
        if self._crypt is None:
            raise EncryptionError(RuntimeError("the client's automatic encryption was closed with the client"))
        return self._crypt

    async def aclose(self) -> None:
        """Close the internal and mongocryptd clients, then free libmongocrypt's handle (and its key cache)."""
        closings = self._close_clients()
        try:
            if closings:
                await backend.gather(*closings)
        finally:
            self._free()

    def close_now(self) -> None:
        """:meth:`aclose` where no event loop runs: the clients close as ``close()`` does without a loop."""
        self._close_clients()
        self._free()

    def _close_clients(self) -> list[Any]:
        closings = []
        if self._internal is not None:
            closings.append(self._internal.close())
        if self._mongocryptd is not None:
            closings.append(self._mongocryptd.close())
        return closings

    def _free(self) -> None:
        crypt, self._crypt = self._crypt, None
        if crypt is not None:
            crypt.close()
