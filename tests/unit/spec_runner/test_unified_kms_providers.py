"""The kmsProviders placeholders of the encryption entities: KMIP providers whose endpoint the test leaves to
the runner are the local KMIP server's, with its CA and client certificate as their TLS options; the local
KMIP server starts once per process and listens by the time it is handed out."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from typing import Any

import pytest
from spec_runner.unified.encryption_entities import (
    LOCAL_MASTER_KEY,
    auto_encryption_options,
    client_encryption_options,
    kmip_server_for,
    kms_providers,
    kms_tls_options,
)
from spec_runner.unified.errors import UnifiedTestError

PLACEHOLDER = {"$$placeholder": 1}


@dataclass(frozen=True)
class KmipStandIn:
    """What the entities read of the local KMIP server."""

    endpoint: str = "127.0.0.1:5698"
    ca_file: str = "/certs/ca.pem"
    client_file: str = "/certs/client.pem"


KMIP: Any = KmipStandIn()
PROVIDERS = {
    "kmip": {"endpoint": PLACEHOLDER},
    "kmip:name1": {"endpoint": PLACEHOLDER},
    "kmip:fixed": {"endpoint": "127.0.0.1:1"},
    "local": {"key": PLACEHOLDER},
    "aws": {"accessKeyId": PLACEHOLDER, "secretAccessKey": PLACEHOLDER},
}
TLS = {"tlsCAFile": "/certs/ca.pem", "tlsCertificateKeyFile": "/certs/client.pem"}


def test_kmip_endpoints_left_to_the_runner_are_the_local_servers_with_its_tls_options() -> None:
    providers = kms_providers(PROVIDERS, KMIP)
    assert providers["kmip"] == {"endpoint": "127.0.0.1:5698"}
    assert providers["kmip:name1"] == {"endpoint": "127.0.0.1:5698"}
    assert providers["kmip:fixed"] == {"endpoint": "127.0.0.1:1"}, "an endpoint the test gives is kept"
    assert providers["local"] == {"key": LOCAL_MASTER_KEY}
    assert kms_tls_options(PROVIDERS, KMIP) == {"kmip": TLS, "kmip:name1": TLS}


def test_both_entities_pass_the_kmip_tls_options() -> None:
    options = {"keyVaultNamespace": "keyvault.datakeys", "kmsProviders": PROVIDERS}
    explicit = client_encryption_options({**options, "keyVaultClient": "client0"}, object(), KMIP)
    automatic = auto_encryption_options(options, "mongodb://127.0.0.1:1", KMIP)
    for kwargs in (explicit, automatic):
        assert kwargs["kms_providers"]["kmip"] == {"endpoint": "127.0.0.1:5698"}
        assert kwargs["kms_tls_options"] == {"kmip": TLS, "kmip:name1": TLS}
    without_kmip = {**options, "kmsProviders": {"local": {"key": PLACEHOLDER}}}
    assert "kms_tls_options" not in auto_encryption_options(without_kmip, "mongodb://127.0.0.1:1")


def test_a_kmip_placeholder_without_a_server_is_an_error() -> None:
    with pytest.raises(UnifiedTestError, match=r"kmsProviders\.kmip\.endpoint: no value for this placeholder"):
        kms_providers({"kmip": {"endpoint": PLACEHOLDER}})


def test_no_server_starts_for_providers_that_need_none() -> None:
    configured = {"local": {"key": PLACEHOLDER}, "kmip": {"endpoint": "127.0.0.1:1"}}
    assert asyncio.run(kmip_server_for(configured)) is None


def test_the_kmip_server_starts_once_and_accepts_a_client_at_once() -> None:
    pytest.importorskip("kmip", reason="needs PyKMIP for the KMIP server")

    async def handshake() -> Any:
        server = await kmip_server_for({"kmip:name1": {"endpoint": PLACEHOLDER}})
        assert server is not None
        context = ssl.create_default_context(cafile=server.ca_file)
        context.load_cert_chain(server.client_file)
        host, _, port = server.endpoint.rpartition(":")
        # Straight away: the server is listening once it is handed out, so the handshake is not refused.
        _, writer = await asyncio.open_connection(host, int(port), ssl=context)
        writer.close()
        await writer.wait_closed()
        return server

    first = asyncio.run(handshake())  # one loop per test, as the spec suites run under pytest
    second = asyncio.run(handshake())
    assert first is second
