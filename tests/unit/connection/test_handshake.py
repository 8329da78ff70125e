"""The handshake without a server: client metadata, FaaS and container detection (the handshake prose test 1
environments), the 512-byte truncation order, wrapping libraries' driver info, the hello command for each
option combination, and the typed reply."""

from __future__ import annotations

import platform
import sys
from pathlib import Path
from typing import Any

import pytest

import mongio
from mongio.bson import encode
from mongio.connection.handshake import (
    MAX_METADATA_BYTES,
    ClientMetadata,
    DriverInfo,
    HelloResponse,
    build_hello,
    detect_environment,
    truncate_metadata,
    validate_appname,
)
from mongio.errors import ConfigurationError
from mongio.wire.header import MAX_MESSAGE_SIZE_CEILING

NO_DOCKER = "/nonexistent/.dockerenv"


def size(document: dict[str, Any]) -> int:
    return len(encode(document))


def metadata(environ: dict[str, str], **kwargs: Any) -> dict[str, Any]:
    return ClientMetadata(environ=environ, dockerenv=NO_DOCKER, **kwargs).document


# -- the document ---------------------------------------------------------------------------------------------


def test_required_fields() -> None:
    document = metadata({})
    assert document["driver"] == {"name": "mongio", "version": mongio.__version__}
    assert document["os"]["type"] == (platform.system() or "unknown")
    if platform.machine():
        assert document["os"]["architecture"] == platform.machine()
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in document["platform"]
    assert "application" not in document
    assert "env" not in document
    assert size(document) <= MAX_METADATA_BYTES


def test_application_name() -> None:
    assert metadata({}, appname="inventory")["application"] == {"name": "inventory"}
    assert validate_appname("é" * 64) == "é" * 64  # 128 bytes exactly
    with pytest.raises(ConfigurationError, match="129 bytes"):
        validate_appname("a" * 129)
    with pytest.raises(ConfigurationError, match="130 bytes"):
        ClientMetadata(appname="é" * 65)


# -- FaaS and container detection (handshake prose test 1) ----------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "expected_env"),
    [
        (
            {"AWS_EXECUTION_ENV": "AWS_Lambda_java8", "AWS_REGION": "us-east-2", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024"},
            {"name": "aws.lambda", "region": "us-east-2", "memory_mb": 1024},
        ),
        ({"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"}, {"name": "aws.lambda"}),
        ({"FUNCTIONS_WORKER_RUNTIME": "node"}, {"name": "azure.func"}),
        (
            {"K_SERVICE": "servicename", "FUNCTION_MEMORY_MB": "1024", "FUNCTION_TIMEOUT_SEC": "60", "FUNCTION_REGION": "us-central1"},
            {"name": "gcp.func", "memory_mb": 1024, "timeout_sec": 60, "region": "us-central1"},
        ),
        ({"FUNCTION_NAME": "f"}, {"name": "gcp.func"}),
        ({"VERCEL": "1", "VERCEL_REGION": "cdg1"}, {"name": "vercel", "region": "cdg1"}),
        # Vercel wins over AWS; any other mix means no FaaS fields at all.
        ({"VERCEL": "1", "AWS_EXECUTION_ENV": "AWS_Lambda_java8", "AWS_REGION": "x"}, {"name": "vercel"}),
        ({"AWS_EXECUTION_ENV": "AWS_Lambda_java8", "FUNCTIONS_WORKER_RUNTIME": "node"}, None),
        # Wrong types are omitted silently.
        ({"AWS_EXECUTION_ENV": "AWS_Lambda_java8", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "big"}, {"name": "aws.lambda"}),
        ({"K_SERVICE": "s", "FUNCTION_TIMEOUT_SEC": "99999999999"}, {"name": "gcp.func"}),
        # AWS_EXECUTION_ENV must start with AWS_Lambda_.
        ({"AWS_EXECUTION_ENV": "EC2"}, None),
        ({"VERCEL": ""}, None),
        ({"KUBERNETES_SERVICE_HOST": "1"}, {"container": {"orchestrator": "kubernetes"}}),
        (
            {"AWS_EXECUTION_ENV": "AWS_Lambda_java8", "AWS_REGION": "us-east-2", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024", "KUBERNETES_SERVICE_HOST": "1"},
            {"name": "aws.lambda", "region": "us-east-2", "memory_mb": 1024, "container": {"orchestrator": "kubernetes"}},
        ),
    ],
)  # fmt: skip
def test_environment_detection(environ: dict[str, str], expected_env: dict[str, Any] | None) -> None:
    document = metadata(environ)
    assert document.get("env") == expected_env
    assert size(document) <= MAX_METADATA_BYTES


def test_detection_reads_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_EXECUTION_ENV", "AWS_LAMBDA_RUNTIME_API", "FUNCTIONS_WORKER_RUNTIME", "K_SERVICE", "FUNCTION_NAME", "VERCEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FUNCTIONS_WORKER_RUNTIME", "python")
    assert detect_environment(dockerenv=NO_DOCKER)["name"] == "azure.func"


def test_docker_runtime_from_dockerenv_file(tmp_path: Path) -> None:
    marker = tmp_path / ".dockerenv"
    assert "env" not in ClientMetadata(environ={}, dockerenv=str(marker)).document
    marker.touch()
    document = ClientMetadata(environ={"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, dockerenv=str(marker)).document
    assert document["env"] == {"container": {"runtime": "docker", "orchestrator": "kubernetes"}}


def test_long_region_is_dropped_and_the_name_kept() -> None:
    # Prose test 1, case 6: AWS_REGION of 512 "a"s.
    document = metadata({"AWS_EXECUTION_ENV": "AWS_Lambda_java8", "AWS_REGION": "a" * 512})
    assert document["env"] == {"name": "aws.lambda"}
    assert size(document) <= MAX_METADATA_BYTES
    assert document["os"]["type"]  # the os document was not the one to shrink


# -- truncation order -----------------------------------------------------------------------------------------


def full_document(platform_string: str = "CPython 3.12", env_extra: int = 0) -> dict[str, Any]:
    return {
        "application": {"name": "app"},
        "driver": {"name": "mongio", "version": "1.0"},
        "os": {"type": "Linux", "name": "Some Linux " + "n" * 60, "architecture": "x86_64", "version": "6.1"},
        "platform": platform_string,
        "env": {"name": "aws.lambda", "region": "r" * env_extra, "memory_mb": 1024},
    }


def test_truncation_steps_in_order() -> None:
    base = full_document()
    assert truncate_metadata(base) == base  # fits: untouched

    # Step 1: env fields other than name go first.
    step1 = truncate_metadata(full_document(env_extra=400))
    assert step1["env"] == {"name": "aws.lambda"} and step1["os"]["name"].startswith("Some Linux")

    # Step 2: then os fields other than type.
    long_os = full_document(env_extra=400)
    long_os["os"]["name"] = "x" * 420
    step2 = truncate_metadata(long_os)
    assert step2["os"] == {"type": "Linux"} and step2["env"] == {"name": "aws.lambda"}

    # Step 3: then env entirely.
    # A platform that fits only once env is gone: 10 bytes under the limit without it.
    without_env = {k: v for k, v in full_document(platform_string="").items() if k != "env"}
    without_env["os"] = {"type": "Linux"}
    length = MAX_METADATA_BYTES - size(without_env) - 10
    step3 = truncate_metadata(full_document(platform_string="p" * length))
    assert "env" not in step3 and step3["os"] == {"type": "Linux"} and step3["platform"] == "p" * length

    # Step 4: then the platform string, to exactly the limit.
    huge_platform = full_document(platform_string="p" * 600)
    step4 = truncate_metadata(huge_platform)
    assert size(step4) == MAX_METADATA_BYTES
    assert step4["platform"] == "p" * len(step4["platform"]) and len(step4["platform"]) < 600
    assert step4["driver"] == base["driver"] and step4["application"] == base["application"]


def test_platform_truncation_keeps_valid_utf8() -> None:
    document = truncate_metadata(full_document(platform_string="é" * 400))
    assert size(document) <= MAX_METADATA_BYTES
    assert set(document["platform"]) == {"é"}


def test_untruncatable_metadata_is_an_error() -> None:
    document = full_document()
    document["driver"]["name"] = "d" * 600
    with pytest.raises(ConfigurationError, match="512"):
        truncate_metadata(document)


def test_metadata_in_a_huge_faas_environment_fits() -> None:
    environ = {"K_SERVICE": "s", "FUNCTION_REGION": "r" * 1000, "KUBERNETES_SERVICE_HOST": "1"}
    document = ClientMetadata(appname="a" * 128, driver_info=DriverInfo("w" * 40, "1" * 40, "p" * 200), environ=environ, dockerenv=NO_DOCKER).document
    assert size(document) <= MAX_METADATA_BYTES
    assert document["application"]["name"] == "a" * 128
    assert document["driver"]["name"] == "mongio|" + "w" * 40


# -- wrapping libraries ---------------------------------------------------------------------------------------


def test_driver_info_is_appended_with_pipes() -> None:
    meta = ClientMetadata(driver_info=DriverInfo("library", "1.2", "Library Platform"), environ={}, dockerenv=NO_DOCKER)
    initial = meta.document
    assert initial["driver"] == {"name": "mongio|library", "version": f"{mongio.__version__}|1.2"}
    assert initial["platform"].endswith("|Library Platform")

    assert meta.append(DriverInfo("framework", None, "Framework Platform"))
    updated = meta.document
    assert updated["driver"] == {"name": "mongio|library|framework", "version": f"{mongio.__version__}|1.2"}
    assert updated["platform"] == initial["platform"] + "|Framework Platform"
    assert {k: v for k, v in updated.items() if k not in ("driver", "platform")} == {
        k: v for k, v in initial.items() if k not in ("driver", "platform")
    }


def test_duplicate_driver_info_is_not_appended_again() -> None:
    meta = ClientMetadata(driver_info=DriverInfo("library", "1.2", "Library Platform"), environ={}, dockerenv=NO_DOCKER)
    meta.append(DriverInfo("framework", "2.0", "Framework Platform"))
    before = meta.document
    assert not meta.append(DriverInfo("library", "1.2", "Library Platform"))
    assert not meta.append(DriverInfo("framework", "2.0", "Framework Platform"))
    assert meta.document == before
    # Empty strings count as unset (prose tests 7 and 8).
    other = ClientMetadata(driver_info=DriverInfo("library", None, "Library Platform"), environ={}, dockerenv=NO_DOCKER)
    assert not other.append(DriverInfo("library", "", "Library Platform"))
    # A partly different info is appended in full.
    assert meta.append(DriverInfo("framework", "1.2", "Library Platform"))
    assert meta.document["driver"]["name"].endswith("|library|framework|framework")


def test_driver_info_rejects_the_delimiter() -> None:
    with pytest.raises(ConfigurationError, match="'\\|'"):
        DriverInfo("a|b")
    with pytest.raises(ConfigurationError, match="needs a name"):
        DriverInfo("")


def test_document_is_a_copy() -> None:
    meta = ClientMetadata(environ={}, dockerenv=NO_DOCKER)
    meta.document["driver"]["name"] = "changed"
    assert meta.document["driver"]["name"] == "mongio"


# -- the hello command ----------------------------------------------------------------------------------------


class Api:
    def __init__(self, version: str = "1", strict: bool | None = None, deprecation_errors: bool | None = None):
        self.version = version
        self.strict = strict
        self.deprecation_errors = deprecation_errors


def test_legacy_hello_without_api_version_or_load_balancing() -> None:
    meta = ClientMetadata(appname="app", environ={}, dockerenv=NO_DOCKER)
    command = build_hello(meta)
    assert next(iter(command)) == "isMaster"
    assert command["helloOk"] is True
    assert command["backpressure"] == "2"
    assert command["client"] == meta.document
    for absent in ("compression", "loadBalanced", "apiVersion", "saslSupportedMechs", "speculativeAuthenticate"):
        assert absent not in command


def test_hello_with_api_version() -> None:
    command = build_hello(None, server_api=Api("1"))
    assert next(iter(command)) == "hello" and command["apiVersion"] == "1"
    assert "apiStrict" not in command and "apiDeprecationErrors" not in command
    assert "client" not in command  # a monitoring hello after the handshake carries no metadata
    strict = build_hello(None, server_api=Api("1", strict=False, deprecation_errors=True))
    assert strict["apiStrict"] is False and strict["apiDeprecationErrors"] is True


def test_hello_in_load_balanced_mode_with_compression_and_auth() -> None:
    command = build_hello(
        {"driver": {"name": "x", "version": "y"}},
        load_balanced=True,
        compressors=["zstd", "zlib"],
        auth_fields={"saslSupportedMechs": "admin.u", "speculativeAuthenticate": {"saslStart": 1}},
    )
    assert next(iter(command)) == "hello"
    assert command["loadBalanced"] is True
    assert command["compression"] == ["zstd", "zlib"]
    assert command["saslSupportedMechs"] == "admin.u"
    assert command["speculativeAuthenticate"] == {"saslStart": 1}
    assert command["backpressure"] == "2"


# -- the reply ------------------------------------------------------------------------------------------------


def test_reply_fields() -> None:
    reply = HelloResponse.from_document(
        {
            "isWritablePrimary": True,
            "helloOk": True,
            "maxBsonObjectSize": 1000,
            "maxMessageSizeBytes": 2000,
            "maxWriteBatchSize": 10,
            "minWireVersion": 6,
            "maxWireVersion": 27,
            "compression": ["zstd"],
            "connectionId": 42,
            "saslSupportedMechs": ["SCRAM-SHA-256", "UNKNOWN"],
            "speculativeAuthenticate": {"conversationId": 1, "done": False, "payload": b"r=x"},
            "logicalSessionTimeoutMinutes": 30,
            "setName": "rs",
            "topologyVersion": {"processId": "p", "counter": 0},
            "ok": 1,
        }
    )
    assert reply.is_writable_primary and reply.hello_ok
    assert (reply.max_bson_object_size, reply.max_message_size_bytes, reply.max_write_batch_size) == (1000, 2000, 10)
    assert (reply.min_wire_version, reply.max_wire_version) == (6, 27)
    assert reply.compression == ("zstd",)
    assert reply.connection_id == 42
    assert reply.sasl_supported_mechs == ("SCRAM-SHA-256", "UNKNOWN")
    assert reply.speculative_authenticate == {"conversationId": 1, "done": False, "payload": b"r=x"}
    assert reply.logical_session_timeout_minutes == 30
    assert reply.set_name == "rs" and reply.topology_version == {"processId": "p", "counter": 0}
    assert not reply.is_arbiter
    assert "payload" not in repr(reply)


def test_legacy_reply_and_defaults() -> None:
    reply = HelloResponse.from_document({"ismaster": True, "ok": 1})
    assert reply.is_writable_primary and not reply.hello_ok
    assert reply.max_bson_object_size == 16 * 1024 * 1024
    assert reply.max_message_size_bytes == 48_000_000
    assert reply.max_write_batch_size == 100_000
    assert reply.compression is None and reply.sasl_supported_mechs is None
    assert reply.service_id is None and reply.connection_id is None
    arbiter = HelloResponse.from_document({"arbiterOnly": True, "setName": "rs", "ok": 1})
    assert arbiter.is_arbiter


def test_reply_size_limits_are_made_sane() -> None:
    forged = HelloResponse.from_document(
        {"maxBsonObjectSize": -1, "maxMessageSizeBytes": 10**12, "maxWriteBatchSize": "many", "ok": 1}
    )
    limits = (forged.max_bson_object_size, forged.max_message_size_bytes, forged.max_write_batch_size)
    assert limits == (16 * 1024 * 1024, MAX_MESSAGE_SIZE_CEILING, 100_000)

