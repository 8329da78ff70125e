"""``auto_encryption_opts`` without a server: what the options become (mongocryptd's arguments), what a client
made with them sets up (the internal client, whether mongocryptd is used and spawned, libmongocrypt's
options) and what it refuses."""

from __future__ import annotations

import os
from typing import Any

import pytest

from mongio import MongoClient
from mongio.encryption import AutoEncryptionOpts, libmongocrypt
from mongio.errors import ConfigurationError

needs_extra = pytest.mark.skipif(libmongocrypt.version() is None, reason="needs mongio[encryption]")
KMS = {"local": {"key": os.urandom(96)}}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, ["--idleShutdownTimeoutSecs=60"]),
        (["--port=27021"], ["--port=27021", "--idleShutdownTimeoutSecs=60"]),
        (["--idleShutdownTimeoutSecs=5"], ["--idleShutdownTimeoutSecs=5"]),
        (["--idleShutdownTimeoutSecs", 5], ["--idleShutdownTimeoutSecs", "5"]),
    ],
)
def test_mongocryptd_arguments_always_set_an_idle_shutdown(given: Any, expected: list[str]) -> None:
    opts = AutoEncryptionOpts(KMS, "keyvault.datakeys", mongocryptd_spawn_args=given)
    assert opts.mongocryptd_spawn_args == expected


def test_a_client_refuses_what_is_not_an_auto_encryption_opts() -> None:
    with pytest.raises(ConfigurationError, match="AutoEncryptionOpts, not dict"):
        MongoClient("mongodb://h", auto_encryption_opts={"kms_providers": KMS})


@needs_extra
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"key_vault_namespace": "datakeys"}, "key_vault_namespace must be 'database.collection'"),
        ({"kms_providers": {"local": {}}}, "kms_providers"),
        ({"schema_map": ["db.c"]}, "schema_map must be a mapping"),
        ({"key_vault_client": "mongodb://h"}, "key_vault_client must be a mongio MongoClient"),
    ],
)
def test_invalid_options_are_refused_when_the_client_is_made(extra: dict[str, Any], message: str) -> None:
    options: dict[str, Any] = {"kms_providers": KMS, "key_vault_namespace": "keyvault.datakeys"}
    options.update(extra)
    with pytest.raises((ConfigurationError, TypeError), match=message):
        MongoClient("mongodb://h", auto_encryption_opts=AutoEncryptionOpts(**options))


@needs_extra
@pytest.mark.parametrize(
    ("extra", "uses_mongocryptd", "spawns"),
    [
        ({}, True, True),
        ({"mongocryptd_bypass_spawn": True}, True, False),
        ({"bypass_auto_encryption": True}, False, False),
        ({"bypass_query_analysis": True}, False, False),
    ],
)
async def test_mongocryptd_only_when_something_asks_for_markings(
    extra: dict[str, Any], uses_mongocryptd: bool, spawns: bool
) -> None:
    opts = AutoEncryptionOpts(KMS, "keyvault.datakeys", mongocryptd_spawn_path="/opt/mongocryptd", **extra)
    client: MongoClient = MongoClient("mongodb://h", auto_encryption_opts=opts)
    encrypter = client._encrypter
    assert encrypter is not None and encrypter.crypt_shared_version is None
    assert (encrypter.mongocryptd is not None) is uses_mongocryptd
    if encrypter.mongocryptd is not None:
        expected = ("/opt/mongocryptd", "--idleShutdownTimeoutSecs=60") if spawns else None
        assert encrypter.mongocryptd.spawn_command == expected
    assert encrypter.encrypts_commands is not opts.bypass_auto_encryption
    await client.close()


@needs_extra
async def test_the_internal_client_takes_the_parent_s_options_but_min_pool_size() -> None:
    opts = AutoEncryptionOpts(KMS, "keyvault.datakeys")
    client: MongoClient = MongoClient(
        "mongodb://h/?minPoolSize=4&appname=app", auto_encryption_opts=opts, maxPoolSize=7
    )
    encrypter = client._encrypter
    assert encrypter is not None
    internal = encrypter.internal_client
    assert internal is not None and internal is not client
    assert (internal.options.min_pool_size, internal.options.max_pool_size, internal.options.appname) == (
        0,
        7,
        "app",
    )
    assert internal.options.extras.get("auto_encryption_opts") is None
    await client.close()
    with pytest.raises(Exception, match="closed"):
        await internal.admin.command("ping")


@needs_extra
@pytest.mark.parametrize("min_pool_size", ["minPoolSize", "minpoolsize", "MINPOOLSIZE", "MinPoolSize"])
@pytest.mark.parametrize("auto_encryption", ["auto_encryption_opts", "AUTO_ENCRYPTION_OPTS"])
async def test_the_internal_client_drops_every_spelling_of_what_it_does_not_inherit(
    min_pool_size: str, auto_encryption: str
) -> None:
    """Keywords are matched case-insensitively: whichever spelling the parent was given, the internal client
    neither keeps the parent's pool minimum nor encrypts."""
    opts = AutoEncryptionOpts(KMS, "keyvault.datakeys")
    keywords: dict[str, Any] = {min_pool_size: 3, auto_encryption: opts, "maxPoolSize": 5}
    client: MongoClient = MongoClient("mongodb://h", **keywords)
    encrypter = client._encrypter
    assert client.options.min_pool_size == 3 and encrypter is not None
    internal = encrypter.internal_client
    assert internal is not None
    assert (internal.options.min_pool_size, internal.options.max_pool_size) == (0, 5)
    assert internal.options.extras.get("auto_encryption_opts") is None and internal._encrypter is None
    await client.close()


def test_a_snake_case_pool_minimum_is_no_option_so_nothing_reaches_the_internal_client() -> None:
    opts = AutoEncryptionOpts(KMS, "keyvault.datakeys")
    with pytest.raises(ConfigurationError, match="Unknown option: min_pool_size\\."):
        MongoClient("mongodb://h", min_pool_size=3, auto_encryption_opts=opts)
