"""Key material and plaintext never leave through a side channel: failures are provoked (a wrong master key,
a data key id nobody has, a tampered ciphertext, a ciphertext naming another data key, a value the algorithm
refuses, KMS servers that drop every connection, present an untrusted certificate, refuse the credentials
(AWS, Azure, GCP; AWS's also when a ``credential_providers`` provider gave them) or refuse to unwrap) and
every error (its whole cause chain, str and repr), every command
event (command, reply, failure), every log record (the whole documents logged), every tracing span (its
attributes and events, with the command text on) and the reprs are searched for the master keys (raw and
base64), the data key's material, the cloud secrets and the plaintext."""

from __future__ import annotations

import base64
import logging
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mongio import MongoClient
from mongio.bson import encode
from mongio.bson.binary import Binary
from mongio.connection.auth.aws_credentials import AwsCredentials
from mongio.encryption import Algorithm, AutoEncryptionOpts, ClientEncryption, libmongocrypt
from mongio.errors import EncryptionError
from tests.support.fake_kms import FakeCloudKms, KmsCertificates, gcp_private_key
from tests.support.recorders import CommandRecorder

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(libmongocrypt.version() is None, reason="needs mongio[encryption]"),
]

MASTER_KEY = os.urandom(96)
OTHER_MASTER_KEY = os.urandom(96)
DATA_KEY_MATERIAL = os.urandom(96)
AWS_SECRET = "aws-secret-" + uuid.uuid4().hex
AZURE_SECRET = "azure-secret-" + uuid.uuid4().hex
GCP_PRIVATE_KEY = gcp_private_key()
PLAINTEXT = "plaintext-" + uuid.uuid4().hex
RANDOM = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Random
DETERMINISTIC = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Deterministic


def secrets() -> list[bytes]:
    binary = [MASTER_KEY, OTHER_MASTER_KEY, DATA_KEY_MATERIAL, base64.b64decode(GCP_PRIVATE_KEY)]
    texts = [AWS_SECRET, AZURE_SECRET, GCP_PRIVATE_KEY, PLAINTEXT]
    return [
        *binary,
        *(base64.b64encode(value) for value in binary),
        *(value.hex().encode() for value in binary),
        *(text.encode() for text in texts),
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
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.shutdown()


@pytest.fixture
async def watched_client(
    server_uri: str, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[MongoClient, CommandRecorder]]:
    monkeypatch.setenv("MONGODB_LOG_MAX_DOCUMENT_LENGTH", "1000000")  # whole documents in the log records
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    recorder = CommandRecorder()
    tracing = {"enabled": True, "query_text_max_length": 1_000_000, "tracer_provider": provider}
    async with MongoClient(server_uri, event_listeners=[recorder], tracing=tracing) as client:
        yield client, recorder
        await client.drop_database("keyvault_secrets")
    provider.shutdown()


def cloud_providers(endpoint: str) -> dict[str, Any]:
    return {
        "local": {"key": MASTER_KEY},
        "aws": {"accessKeyId": "AKIAFAKE", "secretAccessKey": AWS_SECRET},
        "azure": {
            "tenantId": "tenant",
            "clientId": "client",
            "clientSecret": AZURE_SECRET,
            "identityPlatformEndpoint": endpoint,
        },
        "gcp": {"email": "fake@example.com", "privateKey": GCP_PRIVATE_KEY, "endpoint": endpoint},
    }


def provided_aws_credentials() -> AwsCredentials:
    """A ``credential_providers`` provider: the AWS secret, and a session token holding it."""
    return AwsCredentials("AKIAFAKE", AWS_SECRET, AWS_SECRET + "-session-token")


def cloud_master_keys(endpoint: str) -> dict[str, dict[str, Any]]:
    return {
        "aws": {"region": "us-east-1", "key": "arn:aws:kms:us-east-1:1:key/k", "endpoint": endpoint},
        "azure": {"keyVaultEndpoint": endpoint, "keyName": "k"},
        "gcp": {"projectId": "p", "location": "global", "keyRing": "r", "keyName": "k", "endpoint": endpoint},
    }


def tampered(ciphertext: Binary) -> Binary:
    """The ciphertext with one byte of its encrypted part flipped (its HMAC no longer matches)."""
    data = bytearray(ciphertext)
    data[-20] ^= 0x01
    return Binary(bytes(data), 6)


def naming_another_key(ciphertext: Binary, key_id: Binary) -> Binary:
    """The ciphertext with the data key id it carries (bytes 1 to 16) replaced."""
    return Binary(ciphertext[:1] + bytes(key_id) + ciphertext[17:], 6)


async def test_failures_reveal_no_key_material_or_plaintext(
    watched_client: tuple[MongoClient, CommandRecorder],
    log_records: RecordEverything,
    spans: InMemorySpanExporter,
    tmp_path: Path,
) -> None:
    client, recorder = watched_client
    (tmp_path / "trusted").mkdir()
    (tmp_path / "other").mkdir()
    trusted = KmsCertificates.make(str(tmp_path / "trusted"))
    untrusted = KmsCertificates.make(str(tmp_path / "other"))
    namespace = "keyvault_secrets.datakeys"
    errors: list[BaseException] = []
    async with (
        FakeCloudKms(trusted) as kms,
        FakeCloudKms(trusted, drop_connections=1000) as failing_kms,
        FakeCloudKms(trusted, refuse_credentials=True) as refusing_kms,
        FakeCloudKms(untrusted) as untrusted_kms,
    ):
        tls = {name: {"tlsCAFile": trusted.ca_file} for name in ("aws", "azure", "gcp")}
        async with (
            ClientEncryption(
                cloud_providers(kms.endpoint), namespace, client, None, kms_tls_options=tls
            ) as ce,
            ClientEncryption(
                cloud_providers(refusing_kms.endpoint), namespace, client, None, kms_tls_options=tls
            ) as refused,
            ClientEncryption(
                {"local": {"key": OTHER_MASTER_KEY}}, namespace, client, None
            ) as wrong_master_key,
            ClientEncryption(
                {"aws": {}},
                namespace,
                client,
                None,
                kms_tls_options=tls,
                credential_providers={"aws": provided_aws_credentials},
            ) as provided,
        ):
            key_id = await ce.create_data_key("local", key_material=DATA_KEY_MATERIAL)
            other_key_id = await ce.create_data_key("local")
            azure_key_id = await ce.create_data_key("azure", cloud_master_keys(kms.endpoint)["azure"])
            encrypted = await ce.encrypt(PLAINTEXT, RANDOM, key_id=key_id)
            await client.keyvault_secrets.values.insert_one({"v": encrypted})
            await client.keyvault_secrets.datakeys.update_one(
                {"_id": azure_key_id}, {"$set": {"masterKey.keyName": "not-the-wrapping-key"}}
            )
            attempts = [
                wrong_master_key.decrypt(encrypted),  # the data key does not decrypt with another master key
                wrong_master_key.encrypt(PLAINTEXT, RANDOM, key_id=key_id),
                ce.encrypt(PLAINTEXT, RANDOM, key_alt_name="no such key"),
                ce.encrypt(PLAINTEXT, RANDOM, key_id=Binary(uuid.uuid4().bytes, 4)),  # a key id nobody has
                ce.decrypt(tampered(encrypted)),
                ce.decrypt(naming_another_key(encrypted, other_key_id)),
                ce.encrypt({"secret": PLAINTEXT}, DETERMINISTIC, key_id=key_id),  # refused: a document
                ce.encrypt(PLAINTEXT, RANDOM, key_id=azure_key_id),  # the KMS refuses to unwrap it
                ce.create_data_key("aws", cloud_master_keys(failing_kms.endpoint)["aws"]),
                ce.create_data_key("aws", cloud_master_keys(untrusted_kms.endpoint)["aws"]),
            ]
            attempts += [
                refused.create_data_key(provider, master_key)
                for provider, master_key in cloud_master_keys(refusing_kms.endpoint).items()
            ]
            attempts += [
                provided.create_data_key("aws", cloud_master_keys(endpoint)["aws"])
                for endpoint in (refusing_kms.endpoint, failing_kms.endpoint)
            ]
            for attempt in attempts:
                with pytest.raises(EncryptionError) as raised:
                    await attempt
                errors.append(raised.value)
            repr_text = (
                repr(ce)
                + repr(provided)
                + repr(AutoEncryptionOpts(cloud_providers(kms.endpoint), namespace))
                + repr(
                    AutoEncryptionOpts(
                        {"aws": {}}, namespace, credential_providers={"aws": provided_aws_credentials}
                    )
                )
            )
    assert len(errors) == 15
    for error in errors:
        for link in error_chain(error):
            assert_no_secret(f"{link!s} {link!r}", f"the error {type(link).__name__}")
    assert recorder.events, "the key vault commands were observed"
    for event in recorder.events:
        for name in ("command", "reply"):
            document = getattr(event, name, None)
            if document is not None:
                assert_no_secret(bytes(encode(dict(document))), f"the {event.command_name} event's {name}")
        failure = getattr(event, "failure", None)
        if failure is not None:
            assert_no_secret(bytes(encode(dict(failure))), f"the {event.command_name} event's failure")
    assert any(record.name.startswith("mongio.command") for record in log_records.records)
    for record in log_records.records:
        assert_no_secret(record.getMessage(), f"the log record {record.name}")
    finished = spans.get_finished_spans()
    assert any("find" in span.name for span in finished), "the key vault reads were traced"
    for span in finished:
        assert_no_secret(repr(dict(span.attributes or {})), f"the span {span.name}")
        for span_event in span.events:
            assert_no_secret(repr(dict(span_event.attributes or {})), f"an event of the span {span.name}")
    assert_no_secret(repr_text, "the reprs")


def test_the_aws_secret_is_not_in_the_crypt_options_repr() -> None:
    options = libmongocrypt.CryptOptions(
        kms_providers={"aws": {"secretAccessKey": AWS_SECRET}, "local": {"key": MASTER_KEY}}
    )
    assert_no_secret(repr(options), "CryptOptions' repr")
    assert "aws" in repr(options)
