"""The client-side encryption prose tests on explicit encryption alone (README of
client-side-encryption/tests, by number), for the cases that need no server-side Queryable Encryption (the
test server refuses ``encryptedFields``): 12 cases 4 and 5 (round trips of Indexed and Unindexed payloads),
21 case 2 (``create_encrypted_collection`` without ``encryptedFields``), 22 cases 1, 6, 7 and 8 (Range
payloads, per type), 23 (Range's defaults, and a trim factor of 0) and 27 case 7 (the String algorithm
needs a contention factor).

The README's ``key1`` document (etc/data/keys, not in this checkout) is a data key under the README's local
master key; a data key made under a local master key stands in for it.
"""

from __future__ import annotations

import datetime
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mongio import MongoClient
from mongio.bson import Decimal128, Int64
from mongio.bson.binary import Binary
from mongio.encryption import Algorithm, ClientEncryption, QueryType, RangeOpts, StringOpts, libmongocrypt
from mongio.errors import ConfigurationError, EncryptionError

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(libmongocrypt.version() is None, reason="needs mongio[encryption]"),
]

LOCAL_KEY = os.urandom(96)
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@pytest.fixture
async def key_client(server_uri: str) -> AsyncIterator[MongoClient]:
    async with MongoClient(server_uri, tz_aware=True) as client:
        yield client


@pytest.fixture
async def encryption(key_client: MongoClient) -> AsyncIterator[tuple[ClientEncryption, Binary]]:
    name = f"keyvault_{uuid.uuid4().hex[:10]}"
    async with ClientEncryption({"local": {"key": LOCAL_KEY}}, f"{name}.datakeys", key_client, None) as ce:
        yield ce, await ce.create_data_key("local")
    await key_client.drop_database(name)


# --- 12 -----------------------------------------------------------------------------------------------------


async def test_prose_12_case_4_can_roundtrip_encrypted_indexed(
    encryption: tuple[ClientEncryption, Binary],
) -> None:
    ce, key1 = encryption
    payload = await ce.encrypt("encrypted indexed value", Algorithm.INDEXED, key_id=key1, contention_factor=0)
    assert payload.subtype == 6
    assert await ce.decrypt(payload) == "encrypted indexed value"


async def test_prose_12_case_5_can_roundtrip_encrypted_unindexed(
    encryption: tuple[ClientEncryption, Binary],
) -> None:
    ce, key1 = encryption
    payload = await ce.encrypt("encrypted unindexed value", Algorithm.UNINDEXED, key_id=key1)
    assert await ce.decrypt(payload) == "encrypted unindexed value"


# --- 21 -----------------------------------------------------------------------------------------------------


async def test_prose_21_case_2_missing_encrypted_fields(
    encryption: tuple[ClientEncryption, Binary], key_client: MongoClient
) -> None:
    ce, _ = encryption
    database = key_client[f"prose21_{uuid.uuid4().hex[:8]}"]
    try:
        with pytest.raises(ConfigurationError, match="needs the encryptedFields of 'testing1'"):
            no_fields: Any = None
            await ce.create_encrypted_collection(database, "testing1", no_fields, "local")
        assert "testing1" not in await database.list_collection_names()
    finally:
        await key_client.drop_database(database.name)


# --- 22 -----------------------------------------------------------------------------------------------------


def _value(kind: str, number: int) -> Any:
    """``number`` as the BSON type of the README's encrypted field ``kind``."""
    if kind == "Int":
        return number
    if kind == "Long":
        return Int64(number)
    if kind == "Date":
        return EPOCH + datetime.timedelta(milliseconds=number)
    if kind.startswith("Double"):
        return float(number)
    return Decimal128(str(number))


def _range_opts(kind: str, *, precision: int | None = None) -> RangeOpts:
    """The README's RangeOpts of each type (Test Setup: RangeOpts)."""
    if kind.endswith("NoPrecision"):
        return RangeOpts(trim_factor=1, sparsity=1)
    if kind.endswith("Precision"):
        return RangeOpts(min=_value(kind, 0), max=_value(kind, 200), trim_factor=1, sparsity=1, precision=2)
    return RangeOpts(
        min=_value(kind, 0), max=_value(kind, 200), trim_factor=1, sparsity=1, precision=precision
    )


RANGE_TYPES = [
    "DecimalNoPrecision",
    "DecimalPrecision",
    "DoubleNoPrecision",
    "DoublePrecision",
    "Date",
    "Int",
    "Long",
]
BOUNDED_TYPES = [kind for kind in RANGE_TYPES if not kind.endswith("NoPrecision")]


async def _range_encrypt(ce: ClientEncryption, key1: Binary, value: Any, range_opts: RangeOpts) -> Binary:
    return await ce.encrypt(value, Algorithm.RANGE, key_id=key1, contention_factor=0, range_opts=range_opts)


@pytest.mark.parametrize("kind", RANGE_TYPES)
async def test_prose_22_case_1_can_decrypt_a_payload(
    encryption: tuple[ClientEncryption, Binary], kind: str
) -> None:
    ce, key1 = encryption
    decrypted = await ce.decrypt(await _range_encrypt(ce, key1, _value(kind, 6), _range_opts(kind)))
    assert decrypted == _value(kind, 6) and type(decrypted) is type(_value(kind, 6))


@pytest.mark.parametrize("kind", BOUNDED_TYPES)
async def test_prose_22_case_6_encrypting_a_value_greater_than_the_maximum_errors(
    encryption: tuple[ClientEncryption, Binary], kind: str
) -> None:
    ce, key1 = encryption
    with pytest.raises(EncryptionError, match="greater than"):
        await _range_encrypt(ce, key1, _value(kind, 201), _range_opts(kind))


@pytest.mark.parametrize("kind", BOUNDED_TYPES)
async def test_prose_22_case_7_encrypting_a_value_of_a_different_type_errors(
    encryption: tuple[ClientEncryption, Binary], kind: str
) -> None:
    ce, key1 = encryption
    other = 6.0 if kind == "Int" else 6
    with pytest.raises(EncryptionError):
        await _range_encrypt(ce, key1, other, _range_opts(kind))


@pytest.mark.parametrize("kind", ["Date", "Int", "Long"])
async def test_prose_22_case_8_setting_precision_errors_if_the_type_is_not_double_or_decimal(
    encryption: tuple[ClientEncryption, Binary], kind: str
) -> None:
    ce, key1 = encryption
    with pytest.raises(EncryptionError, match="precision"):
        await _range_encrypt(ce, key1, _value(kind, 6), _range_opts(kind, precision=2))


# --- 27 -----------------------------------------------------------------------------------------------------


async def test_prose_27_case_7_the_string_algorithm_needs_a_contention_factor(
    encryption: tuple[ClientEncryption, Binary],
) -> None:
    ce, key1 = encryption
    string_opts = StringOpts(
        case_sensitive=True,
        diacritic_sensitive=True,
        prefix={"strMaxQueryLength": 10, "strMinQueryLength": 2},
    )
    with pytest.raises(EncryptionError, match="contention factor is required for string algorithm"):
        await ce.encrypt(
            "foo", Algorithm.STRING, key_id=key1, query_type=QueryType.PREFIX, string_opts=string_opts
        )


# --- 23 -----------------------------------------------------------------------------------------------------


async def _payload_size(ce: ClientEncryption, key_id: Binary, range_opts: RangeOpts) -> int:
    return len(await _range_encrypt(ce, key_id, 123, range_opts))


async def test_prose_23_case_1_range_uses_libmongocrypts_defaults(
    encryption: tuple[ClientEncryption, Binary],
) -> None:
    ce, key_id = encryption
    defaults = await _payload_size(ce, key_id, RangeOpts(min=0, max=1000))
    explicit_defaults = await _payload_size(ce, key_id, RangeOpts(min=0, max=1000, sparsity=2, trim_factor=6))
    assert explicit_defaults == defaults


async def test_prose_23_case_2_range_accepts_trim_factor_0(
    encryption: tuple[ClientEncryption, Binary],
) -> None:
    ce, key_id = encryption
    defaults = await _payload_size(ce, key_id, RangeOpts(min=0, max=1000))
    assert await _payload_size(ce, key_id, RangeOpts(min=0, max=1000, trim_factor=0)) > defaults
