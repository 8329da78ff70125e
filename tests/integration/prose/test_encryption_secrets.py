"""Key material and plaintext never leave through a side channel: failures are provoked (a wrong master key,
a KMS that drops every connection, a KMS whose certificate is not trusted, an unknown key) and every error
message (its whole cause chain), every command event, every log record and the reprs are searched for the
master key (raw and base64), the AWS secret and the plaintext."""

from __future__ import annotations

import base64
import logging
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from mongio import MongoClient
from mongio.bson import encode
from mongio.encryption import Algorithm, AutoEncryptionOpts, ClientEncryption, libmongocrypt
from mongio.errors import EncryptionError
from tests.support.fake_kms import FakeCloudKms, KmsCertificates
from tests.support.recorders import CommandRecorder

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(libmongocrypt.version() is None, reason="needs mongio[encryption]"),
]

MASTER_KEY = os.urandom(96)
OTHER_MASTER_KEY = os.urandom(96)
AWS_SECRET = "aws-secret-" + uuid.uuid4().hex
PLAINTEXT = "plaintext-" + uuid.uuid4().hex
RANDOM = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Random


def secrets() -> list[bytes]:
    return [
        MASTER_KEY,
        base64.b64encode(MASTER_KEY),
        OTHER_MASTER_KEY,
        base64.b64encode(OTHER_MASTER_KEY),
        AWS_SECRET.encode(),
        PLAINTEXT.encode(),
    ]


def assert_no_secret(text: bytes | str, where: str) -> None:
    data = text.encode("utf-8", "backslashreplace") if isinstance(text, str) else text
    for secret in secrets():
        assert secret not in data, f"a secret appears in {where}"
        assert repr(secret)[2:-1].encode() not in data, f"a secret's repr appears in {where}"


def error_chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        cause = current.cause if isinstance(current, EncryptionError) else None
        current = cause or current.__cause__ or current.__context__


class RecordEverything(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def log_records() -> Iterator[RecordEverything]:
    handler = RecordEverything()
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield handler
    root.removeHandler(handler)
    root.setLevel(previous)


@pytest.fixture
async def watched_client(server_uri: str) -> AsyncIterator[tuple[MongoClient, CommandRecorder]]:
    recorder = CommandRecorder()
    async with MongoClient(server_uri, event_listeners=[recorder]) as client:
        yield client, recorder
        await client.drop_database("keyvault_secrets")


async def test_failures_reveal_no_key_material_or_plaintext(
    watched_client: tuple[MongoClient, CommandRecorder], log_records: RecordEverything, tmp_path: Path
) -> None:
    client, recorder = watched_client
    trusted = KmsCertificates.make(str(tmp_path))
    (tmp_path / "other").mkdir()
    untrusted = KmsCertificates.make(str(tmp_path / "other"))
    providers = {
        "local": {"key": MASTER_KEY},
        "aws": {"accessKeyId": "AKIAFAKE", "secretAccessKey": AWS_SECRET},
    }
    errors: list[BaseException] = []
    async with (
        FakeCloudKms(trusted, drop_connections=1000) as failing_kms,
        FakeCloudKms(untrusted) as untrusted_kms,
        ClientEncryption(
            providers,
            "keyvault_secrets.datakeys",
            client,
            None,
            kms_tls_options={"aws": {"tlsCAFile": trusted.ca_file}},
        ) as encryption,
        ClientEncryption(
            {"local": {"key": OTHER_MASTER_KEY}}, "keyvault_secrets.datakeys", client, None
        ) as wrong_key,
    ):
        key_id = await encryption.create_data_key("local")
        encrypted = await encryption.encrypt(PLAINTEXT, RANDOM, key_id=key_id)
        await client.keyvault_secrets.values.insert_one({"v": encrypted})
        for attempt in (
            wrong_key.decrypt(encrypted),  # the data key does not decrypt with another master key
            wrong_key.encrypt(PLAINTEXT, RANDOM, key_id=key_id),
            encryption.encrypt(PLAINTEXT, RANDOM, key_alt_name="no such key"),
            encryption.create_data_key(
                "aws", {"region": "us-east-1", "key": "arn:k", "endpoint": failing_kms.endpoint}
            ),
            encryption.create_data_key(
                "aws", {"region": "us-east-1", "key": "arn:k", "endpoint": untrusted_kms.endpoint}
            ),
        ):
            with pytest.raises(EncryptionError) as raised:
                await attempt
            errors.append(raised.value)
        repr_text = repr(encryption) + repr(AutoEncryptionOpts(providers, "keyvault_secrets.datakeys"))
    assert len(errors) == 5
    for error in errors:
        for link in error_chain(error):
            assert_no_secret(f"{link!s} {link!r}", f"the error {type(link).__name__}")
    assert recorder.events, "the key vault commands were observed"
    for event in recorder.events:
        for name in ("command", "reply"):
            document = getattr(event, name, None)
            if document is not None:
                assert_no_secret(bytes(encode(dict(document))), f"the {event.command_name} event's {name}")
    for record in log_records.records:
        assert_no_secret(record.getMessage(), f"the log record {record.name}")
    assert_no_secret(repr_text, "the reprs")


def test_the_aws_secret_is_not_in_the_crypt_options_repr() -> None:
    options = libmongocrypt.CryptOptions(
        kms_providers={"aws": {"secretAccessKey": AWS_SECRET}, "local": {"key": MASTER_KEY}}
    )
    assert_no_secret(repr(options), "CryptOptions' repr")
    assert "aws" in repr(options)
