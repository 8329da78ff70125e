"""The ``clientEncryption`` entity: its ``clientEncryptionOpts`` as ``ClientEncryption``'s arguments; and a
client entity's ``autoEncryptOpts`` as ``AutoEncryptionOpts``' arguments, with the stand-in query analyser of
``tests/support/query_analyser.py`` as mongocryptd (started once per process, on a thread of its own so that
clients of every event loop reach it; there is no mongocryptd or crypt_shared here).

The ``kmsProviders`` placeholders are filled with what this machine can stand behind: the test README's
local master key for ``local``; for ``kmip`` (and ``kmip:name``), the endpoint of the local KMIP server of
``tests/support/kmip_server.py`` (PyKMIP's, started once per process when an entity first names a KMIP
provider), with the TLS options the README gives its KMIP server (the server's CA and a client certificate)
in ``kms_tls_options``; for the cloud providers, which need real accounts, made-up credentials with every
endpoint a provider's options can name pointed at a closed port on 127.0.0.1, so that the entity can be made
(tests of option errors need it). The tests that would reach a real cloud KMS, or unwrap the data keys a real
KMS or the drivers' KMIP server wrapped in the files' key vault data, are skipped by the skip list's rules,
naming what they need.
"""

from __future__ import annotations

import atexit
import base64
import shutil
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from spec_runner.unified.errors import UnifiedTestError

if TYPE_CHECKING:
    from tests.support.kmip_server import KmipServerProcess
    from tests.support.query_analyser import AnalyserThread

__all__ = [
    "LOCAL_MASTER_KEY",
    "auto_encryption_options",
    "client_encryption_options",
    "kmip_server_for",
    "kms_providers",
    "kms_tls_options",
    "query_analyser_uri",
]

LOCAL_MASTER_KEY = base64.b64decode(
    "Mng0NCt4ZHVUYUJCa1kxNkVyNUR1QURhZ2h2UzR2d2RrZzh0cFBwM3R6NmdWMDFBMUN3YkQ5aXRRMkhGRGdQV09wOGVNYUMxT2k3NjZKelhaQmRCZGJkTXVyZG9uSjFk"
)
"""The 96-byte local master key of the client-side encryption tests (their README): the data keys in the
test files' ``initialData`` are encrypted with it."""

_PLACEHOLDER = {"$$placeholder": 1}


def _is_placeholder(value: Any) -> bool:
    return isinstance(value, Mapping) and dict(value) == _PLACEHOLDER


_UNREACHABLE = "127.0.0.1:9"
"""The discard port on loopback: nothing listens there, so a request that got through would fail at once."""
_STAND_IN = {
    "aws": {
        "accessKeyId": "not-a-real-access-key",
        "secretAccessKey": "not-a-real-secret-key",
        "sessionToken": "not-a-real-session-token",
    },
    "azure": {
        "tenantId": "not-a-tenant",
        "clientId": "not-a-client",
        "clientSecret": "not-a-secret",
        "accessToken": "not-a-token",
    },
    "gcp": {"email": "nobody@example.invalid", "privateKey": "AAAA", "accessToken": "not-a-token"},
}
_LOOPBACK_ENDPOINTS = {"azure": "identityPlatformEndpoint", "gcp": "endpoint"}


def _kind(name: str) -> str:
    """``kmip`` for ``kmip`` and ``kmip:name1``."""
    return name.partition(":")[0]


def _served_by_kmip_server(name: str, options: Any) -> bool:
    """Whether provider ``name`` is a KMIP provider whose endpoint the test leaves to the runner."""
    return _kind(name) == "kmip" and isinstance(options, Mapping) and _is_placeholder(options.get("endpoint"))


def _filled_provider(name: str, options: Mapping[str, Any], kmip: KmipServerProcess | None) -> dict[str, Any]:
    """The provider's options with its placeholders filled (see the module's docstring)."""
    kind = _kind(name)
    filled: dict[str, Any] = {}
    for field, value in options.items():
        if not _is_placeholder(value):
            filled[field] = value
        elif kind == "local" and field == "key":
            filled[field] = LOCAL_MASTER_KEY
        elif kind == "kmip" and field == "endpoint" and kmip is not None:
            filled[field] = kmip.endpoint
        elif field in _STAND_IN.get(kind, {}):
            filled[field] = _STAND_IN[kind][field]
        else:
            raise UnifiedTestError(f"kmsProviders.{name}.{field}: no value for this placeholder")
    endpoint_field = _LOOPBACK_ENDPOINTS.get(kind)
    if endpoint_field is not None and filled and endpoint_field not in filled:
        filled[endpoint_field] = _UNREACHABLE
    return filled


def kms_providers(configured: Mapping[str, Any], kmip: KmipServerProcess | None = None) -> dict[str, Any]:
    """``kmsProviders`` as the test gives them, placeholders filled; a KMIP endpoint left to the runner is
    ``kmip``'s (:func:`kmip_server_for` gives it)."""
    providers: dict[str, Any] = {}
    for name, options in configured.items():
        if not isinstance(options, Mapping):
            raise UnifiedTestError(f"kmsProviders.{name} must be a document, not {options!r}")
        providers[name] = _filled_provider(name, options, kmip)
    return providers


def kms_tls_options(configured: Mapping[str, Any], kmip: KmipServerProcess | None) -> dict[str, Any]:
    """``kms_tls_options`` for the KMIP providers whose endpoint is the local KMIP server: its CA and the
    client certificate it accepts (the test README's KMIP TLS options, for our server)."""
    if kmip is None:
        return {}
    return {
        name: {"tlsCAFile": kmip.ca_file, "tlsCertificateKeyFile": kmip.client_file}
        for name, options in configured.items()
        if _served_by_kmip_server(name, options)
    }


def _kms_arguments(configured: Mapping[str, Any], kmip: KmipServerProcess | None) -> dict[str, Any]:
    """``kms_providers`` and, when a provider needs them, ``kms_tls_options``."""
    arguments: dict[str, Any] = {"kms_providers": kms_providers(configured, kmip)}
    tls_options = kms_tls_options(configured, kmip)
    if tls_options:
        arguments["kms_tls_options"] = tls_options
    return arguments


def client_encryption_options(
    options: Mapping[str, Any], key_vault_client: Any, kmip: KmipServerProcess | None = None
) -> dict[str, Any]:
    """The keyword arguments of ``ClientEncryption`` for a ``clientEncryptionOpts`` document (``kmip``: the
    local KMIP server, when its KMIP providers need one)."""
    known = {"keyVaultClient", "keyVaultNamespace", "kmsProviders", "keyExpirationMS"}
    unknown = set(options) - known
    if unknown:
        raise UnifiedTestError(f"clientEncryptionOpts: unsupported option(s) {sorted(unknown)}")
    kwargs: dict[str, Any] = {
        **_kms_arguments(options["kmsProviders"], kmip),
        "key_vault_namespace": options["keyVaultNamespace"],
        "key_vault_client": key_vault_client,
        "codec_options": None,
    }
    if "keyExpirationMS" in options:
        kwargs["key_expiration_ms"] = options["keyExpirationMS"]
    return kwargs


# extraOptions of autoEncryptOpts (client-side encryption tests README) -> AutoEncryptionOpts' arguments.
_EXTRA_OPTIONS = {
    "mongocryptdURI": "mongocryptd_uri",
    "mongocryptdBypassSpawn": "mongocryptd_bypass_spawn",
    "mongocryptdSpawnPath": "mongocryptd_spawn_path",
    "mongocryptdSpawnArgs": "mongocryptd_spawn_args",
    "cryptSharedLibPath": "crypt_shared_lib_path",
    "cryptSharedLibRequired": "crypt_shared_lib_required",
}
_AUTO_ENCRYPT_OPTIONS = {
    "keyVaultNamespace": "key_vault_namespace",
    "bypassAutoEncryption": "bypass_auto_encryption",
    "schemaMap": "schema_map",
    "encryptedFieldsMap": "encrypted_fields_map",
    "bypassQueryAnalysis": "bypass_query_analysis",
    "keyExpirationMS": "key_expiration_ms",
}


def auto_encryption_options(
    options: Mapping[str, Any], analyser_uri: str, kmip: KmipServerProcess | None = None
) -> dict[str, Any]:
    """The keyword arguments of ``AutoEncryptionOpts`` for an ``autoEncryptOpts`` document: mongocryptd is the
    query analyser at ``analyser_uri``, never spawned, unless the test's extraOptions say otherwise (``kmip``:
    the local KMIP server, when its KMIP providers need one)."""
    known = {"kmsProviders", "extraOptions", *_AUTO_ENCRYPT_OPTIONS}
    unknown = set(options) - known
    if unknown:
        raise UnifiedTestError(f"autoEncryptOpts: unsupported option(s) {sorted(unknown)}")
    kwargs: dict[str, Any] = {
        **_kms_arguments(options["kmsProviders"], kmip),
        "mongocryptd_uri": analyser_uri,
        "mongocryptd_bypass_spawn": True,
    }
    for name, argument in _AUTO_ENCRYPT_OPTIONS.items():
        if name in options:
            kwargs[argument] = options[name]
    extra = options.get("extraOptions") or {}
    unknown = set(extra) - set(_EXTRA_OPTIONS)
    if unknown:
        raise UnifiedTestError(f"autoEncryptOpts.extraOptions: unsupported option(s) {sorted(unknown)}")
    for name, value in extra.items():
        kwargs[_EXTRA_OPTIONS[name]] = value
    return kwargs


_ANALYSER: list[AnalyserThread] = []


async def query_analyser_uri() -> str:
    """The URI of the stand-in query analyser, started on first use and kept for the rest of the process."""
    if not _ANALYSER:
        # The tests' own support code, imported when a test first needs it (as the OCSP suite's PKI is).
        from tests.support.query_analyser import AnalyserThread

        analyser = AnalyserThread()
        # Starting waits for it to listen: done in a worker thread so the loop keeps running.
        await anyio.to_thread.run_sync(analyser.start)
        atexit.register(analyser.stop)
        _ANALYSER.append(analyser)
    return _ANALYSER[0].uri


_KMIP: list[KmipServerProcess] = []
_KMIP_START = threading.Lock()  # held while the server starts, so that it starts once whatever loop asks


def _started_kmip_server() -> KmipServerProcess:
    with _KMIP_START:
        if not _KMIP:
            # The tests' own support code, imported when a test first needs it (as the query analyser is).
            from tests.support.kmip_server import KmipServerProcess

            directory = Path(tempfile.mkdtemp(prefix="mongio-kmip-"))
            server = KmipServerProcess(directory).start()
            atexit.register(_stop_kmip_server, server, directory)
            _KMIP.append(server)
        return _KMIP[0]


def _stop_kmip_server(server: KmipServerProcess, directory: Path) -> None:
    server.stop()
    shutil.rmtree(directory, ignore_errors=True)


async def kmip_server_for(configured: Mapping[str, Any]) -> KmipServerProcess | None:
    """The local KMIP server when one of the ``kmsProviders`` is a KMIP provider whose endpoint the test
    leaves to the runner (started on first use and kept for the rest of the process), else None."""
    if not any(_served_by_kmip_server(name, options) for name, options in configured.items()):
        return None
    if _KMIP:
        return _KMIP[0]
    # Starting waits for it to listen (PyKMIP's server, in a process of its own): done in a worker thread
    # so the loop keeps running.
    return await anyio.to_thread.run_sync(_started_kmip_server)
