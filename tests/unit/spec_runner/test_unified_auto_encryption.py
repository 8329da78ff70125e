"""A client entity's autoEncryptOpts as AutoEncryptionOpts' arguments: mongocryptd is the stand-in query
analyser, started once per process."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from spec_runner.unified.encryption_entities import (
    LOCAL_MASTER_KEY,
    auto_encryption_options,
    query_analyser_uri,
)
from spec_runner.unified.errors import UnifiedTestError

from mongio import MongoClient

PLACEHOLDER = {"$$placeholder": 1}
ANALYSER = "mongodb://127.0.0.1:1"


def test_options_map_to_arguments_with_the_analyser_as_mongocryptd() -> None:
    options = {
        "keyVaultNamespace": "keyvault.datakeys",
        "kmsProviders": {"local": {"key": PLACEHOLDER}, "aws": {"accessKeyId": PLACEHOLDER, "secretAccessKey": PLACEHOLDER}},
        "schemaMap": {"db.c": {"bsonType": "object"}},
        "bypassAutoEncryption": True,
        "keyExpirationMS": 1,
    }
    kwargs = auto_encryption_options(options, ANALYSER)
    assert kwargs["mongocryptd_uri"] == ANALYSER and kwargs["mongocryptd_bypass_spawn"] is True
    assert kwargs["kms_providers"]["local"] == {"key": LOCAL_MASTER_KEY}
    assert kwargs["kms_providers"]["aws"]["accessKeyId"] != PLACEHOLDER, "placeholders are filled"
    assert kwargs["key_vault_namespace"] == "keyvault.datakeys"
    assert kwargs["schema_map"] == {"db.c": {"bsonType": "object"}}
    assert kwargs["bypass_auto_encryption"] is True and kwargs["key_expiration_ms"] == 1
    assert "encrypted_fields_map" not in kwargs and "bypass_query_analysis" not in kwargs


def test_extra_options_are_honoured_and_unknown_options_refused() -> None:
    base = {"keyVaultNamespace": "k.v", "kmsProviders": {"local": {"key": PLACEHOLDER}}}
    extra = {"mongocryptdURI": "mongodb://127.0.0.1:2", "mongocryptdBypassSpawn": False, "mongocryptdSpawnArgs": ["--x"]}
    kwargs = auto_encryption_options({**base, "extraOptions": extra}, ANALYSER)
    assert kwargs["mongocryptd_uri"] == "mongodb://127.0.0.1:2" and kwargs["mongocryptd_bypass_spawn"] is False
    assert kwargs["mongocryptd_spawn_args"] == ["--x"]
    with pytest.raises(UnifiedTestError, match=r"unsupported option\(s\) \['tlsOptions'\]"):
        auto_encryption_options({**base, "tlsOptions": {}}, ANALYSER)
    with pytest.raises(UnifiedTestError, match=r"extraOptions: unsupported option\(s\) \['cryptSharedLibSearchPaths'\]"):
        auto_encryption_options({**base, "extraOptions": {"cryptSharedLibSearchPaths": []}}, ANALYSER)


def test_the_analyser_is_started_once_and_serves_every_event_loop() -> None:
    async def hello() -> tuple[str, Any]:
        uri = await query_analyser_uri()
        async with MongoClient(uri, directConnection=True, serverSelectionTimeoutMS=5000) as client:
            return uri, await client.admin.command("hello")

    first_uri, first = asyncio.run(hello())  # one loop per test, as the spec suites run under pytest
    second_uri, second = asyncio.run(hello())
    assert first_uri == second_uri
    assert first["iscryptd"] is True and second["iscryptd"] is True
