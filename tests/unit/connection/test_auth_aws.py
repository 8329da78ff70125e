"""MONGODB-AWS end to end with no cloud account: a ``MongoClient`` authenticates against a fake member that
recomputes the SigV4 signature, with credentials from the environment, a custom provider or fake IMDS, ECS
and STS endpoints on 127.0.0.1.

The prose tests of ``auth/tests/mongodb-aws.md`` a fake can stand behind are here, named by their number or
section: the scenarios 1-7 of the opening list, "Testing custom credential providers" 1 and 2 (case 2), and
both parts of "Cached Credentials". The same tests against a real AWS deployment are in the skip list.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import threading
import traceback
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mongio import MongoClient
from mongio.connection.auth import aws_credentials
from mongio.connection.auth.aws_credentials import CREDENTIAL_CACHE, AwsCredentials, AwsEndpoints
from mongio.errors import OperationFailure, PyMongoError
from mongio.monitoring import CommandListener, ConnectionPoolListener
from tests.support.fake_aws import (
    AWS_CHAIN_VARIABLES,
    ECS_RELATIVE_URI,
    WEB_IDENTITY_TOKEN,
    FakeAwsEndpoints,
    FakeAwsMember,
    IssuedKey,
    KeyStore,
    ServerFirst,
)
from tests.support.loopback_peer import LoopbackPeer

PERMANENT_SECRET = "perm-secret-wJalrXUtnFEMI"
ROLE_ARN = "arn:aws:iam::123456789012:role/web-identity"


@dataclass
class Aws:
    keys: KeyStore
    member: FakeAwsMember
    endpoints: FakeAwsEndpoints
    peer: LoopbackPeer
    monkeypatch: pytest.MonkeyPatch
    tmp_path: Path

    @property
    def uri(self) -> str:
        return f"{self.peer.uri.rstrip('/')}/?authMechanism=MONGODB-AWS&directConnection=true"

    def client(self, **kwargs: Any) -> MongoClient:
        return MongoClient(self.uri, serverSelectionTimeoutMS=3000, **kwargs)

    async def find(self, **kwargs: Any) -> None:
        async with self.client(**kwargs) as client:
            await client.db.coll.find_one({})

    def use_environment(self, key: IssuedKey | tuple[str, str, str | None]) -> None:
        access, secret, token = (
            (key.access_key, key.secret_key, key.token) if isinstance(key, IssuedKey) else key
        )
        self.monkeypatch.setenv("AWS_ACCESS_KEY_ID", access)
        self.monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
        if token is None:
            self.monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
        else:
            self.monkeypatch.setenv("AWS_SESSION_TOKEN", token)

    def clear_environment(self) -> None:
        for name in AWS_CHAIN_VARIABLES:
            self.monkeypatch.delenv(name, raising=False)

    def use_web_identity(self, session_name: str | None = None) -> None:
        token_file = self.tmp_path / "token"
        token_file.write_text(WEB_IDENTITY_TOKEN + "\n")
        self.monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token_file))
        self.monkeypatch.setenv("AWS_ROLE_ARN", ROLE_ARN)
        if session_name is not None:
            self.monkeypatch.setenv("AWS_ROLE_SESSION_NAME", session_name)


@pytest.fixture
async def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> AsyncIterator[Aws]:
    for name in AWS_CHAIN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    keys = KeyStore()
    member = FakeAwsMember(keys)
    CREDENTIAL_CACHE.clear()
    async with FakeAwsEndpoints(keys) as endpoints, LoopbackPeer(member) as peer:
        previous = aws_credentials.use_endpoints(
            AwsEndpoints(
                sts_url=endpoints.base + "/", ecs_base=endpoints.base, imds_base=endpoints.base, timeout=5
            )
        )
        try:
            yield Aws(keys, member, endpoints, peer, monkeypatch, tmp_path)
        finally:
            aws_credentials.use_endpoints(previous)
            CREDENTIAL_CACHE.clear()


def _permanent(aws: Aws) -> IssuedKey:
    return aws.keys.add("AKIAPERMANENTEXAMPLE", PERMANENT_SECRET)


# -- the scenarios of mongodb-aws.md -----------------------------------------------------------------------------


async def test_prose_1_regular_credentials_from_the_environment(aws: Aws) -> None:
    aws.use_environment(_permanent(aws))
    await aws.find()
    assert aws.member.accepted == ["AKIAPERMANENTEXAMPLE"]
    assert sum(aws.endpoints.hits.values()) == 0 and CREDENTIAL_CACHE.get() is None


async def test_prose_2_ec2_credentials_through_imdsv2(aws: Aws) -> None:
    await aws.find()
    hits = aws.endpoints.hits
    assert (hits["imds-token"], hits["imds-role"], hits["imds-credentials"], hits["imds-unauthorized"]) == (
        1,
        1,
        1,
        0,
    )
    assert aws.member.accepted == [aws.endpoints.issued[0].access_key]
    token_request, role_request, credentials_request = aws.endpoints.requests
    assert (
        token_request.method == "PUT"
        and int(token_request.headers["x-aws-ec2-metadata-token-ttl-seconds"]) > 0
    )
    assert (
        role_request.headers["x-aws-ec2-metadata-token"]
        == credentials_request.headers["x-aws-ec2-metadata-token"]
    )


async def test_prose_3_ecs_credentials(aws: Aws) -> None:
    aws.monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", ECS_RELATIVE_URI)
    await aws.find()
    assert dict(aws.endpoints.hits) == {"ecs": 1}
    assert aws.member.accepted == [aws.endpoints.issued[0].access_key]


async def test_prose_4_assume_role_temporary_credentials_in_the_environment(aws: Aws) -> None:
    aws.use_environment(aws.keys.issue(datetime.timedelta(hours=1)))
    await aws.find()
    assert len(aws.member.accepted) == 1 and sum(aws.endpoints.hits.values()) == 0


@pytest.mark.parametrize("session_name", [None, "app1"])
async def test_prose_5_assume_role_with_web_identity(aws: Aws, session_name: str | None) -> None:
    aws.use_web_identity(session_name)
    await aws.find()
    assert dict(aws.endpoints.hits) == {"sts-web-identity": 1}
    assert aws.member.accepted == [aws.endpoints.issued[0].access_key]
    body = aws.endpoints.requests[0].body.decode()
    sent = dict(part.split("=", 1) for part in body.split("&"))
    assert sent["RoleSessionName"] == (session_name or sent["RoleSessionName"]) and sent["RoleSessionName"]
    assert sent["RoleArn"] == ROLE_ARN.replace(":", "%3A").replace("/", "%2F")


@pytest.mark.parametrize("with_token", [False, True])
async def test_prose_6_aws_lambda_environment_variables(aws: Aws, with_token: bool) -> None:
    key = aws.keys.issue(datetime.timedelta(hours=1)) if with_token else _permanent(aws)
    aws.use_environment(key)
    await aws.find()
    assert aws.member.accepted == [key.access_key]


async def test_prose_6_a_wrong_session_token_is_refused(aws: Aws) -> None:
    key = aws.keys.issue(datetime.timedelta(hours=1))
    aws.use_environment((key.access_key, key.secret_key, "not-the-token"))
    with pytest.raises(OperationFailure, match="MONGODB-AWS authentication failed"):
        await aws.find()
    assert aws.member.refused == ["wrong or missing session token"]


# -- 7 and "Cached Credentials" ---------------------------------------------------------------------------------


async def test_prose_7_cached_credentials_part_1(aws: Aws) -> None:
    CREDENTIAL_CACHE.clear()  # 1
    await aws.find()  # 2, 3
    first = CREDENTIAL_CACHE.get()
    assert first is not None
    # 4: an expiry within one minute makes the cached credentials unusable.
    soon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=1)
    CREDENTIAL_CACHE.set(AwsCredentials(first.access_key, first.secret_key, first.token, soon))
    await aws.find()  # 5, 6
    second = CREDENTIAL_CACHE.get()
    assert second is not None and second.access_key != first.access_key
    assert aws.endpoints.hits["imds-credentials"] == 2
    # 7: poison the cache.
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    CREDENTIAL_CACHE.set(AwsCredentials("AKIAPOISONED", "wrong", "wrong", later))
    with pytest.raises(OperationFailure):  # 8, 9
        await aws.find()
    assert CREDENTIAL_CACHE.get() is None  # 10
    await aws.find()  # 11
    assert CREDENTIAL_CACHE.get() is not None  # 12
    assert aws.member.refused == ["unknown access key"]


async def test_prose_7_cached_credentials_part_2_environment(aws: Aws) -> None:
    CREDENTIAL_CACHE.clear()  # 1
    await aws.find()  # 2, 3
    cached = CREDENTIAL_CACHE.get()
    assert cached is not None
    aws.use_environment((cached.access_key, cached.secret_key, cached.token))  # 4
    CREDENTIAL_CACHE.clear()  # 5
    await aws.find()  # 6, 7
    assert CREDENTIAL_CACHE.get() is None
    aws.use_environment(("AKIAINVALID", "invalid", None))  # 8
    with pytest.raises(OperationFailure):  # 9, 10
        await aws.find()
    aws.clear_environment()  # 11
    CREDENTIAL_CACHE.clear()  # 12
    await aws.find()  # 13, 14
    assert CREDENTIAL_CACHE.get() is not None
    aws.use_environment(("AKIAINVALID", "invalid", None))  # 15
    await aws.find()  # 16, 17: the cache wins over the environment
    aws.clear_environment()  # 18
    assert aws.endpoints.hits["imds-credentials"] == 2


async def test_credentials_near_expiry_are_not_reused(aws: Aws) -> None:
    aws.endpoints.expires_in = datetime.timedelta(minutes=4)
    await aws.find()
    await aws.find()
    assert aws.endpoints.hits["imds-credentials"] == 2
    assert len(set(aws.member.accepted)) == 2


async def test_credentials_far_from_expiry_are_reused_by_new_clients(aws: Aws) -> None:
    await aws.find()
    await aws.find()
    assert aws.endpoints.hits["imds-credentials"] == 1
    assert len(aws.member.accepted) == 2 and len(set(aws.member.accepted)) == 1


async def test_connections_needing_credentials_at_once_share_one_fetch(aws: Aws) -> None:
    aws.endpoints.delay = 0.2
    async with aws.client(maxPoolSize=20, minPoolSize=0) as client:
        await asyncio.gather(*(client.db.command("ping") for _ in range(20)))
        opened = len(aws.member.accepted)
    assert opened > 1, "the pings should have needed several connections"
    assert aws.endpoints.hits["imds-credentials"] == 1


# -- custom credential providers ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("temporary", [False, True])
async def test_custom_provider_1_authenticates(aws: Aws, kind: str, temporary: bool) -> None:
    key = aws.keys.issue(datetime.timedelta(hours=1)) if temporary else _permanent(aws)
    threads: list[int] = []

    def sync_provider() -> AwsCredentials:
        threads.append(threading.get_ident())
        return AwsCredentials(key.access_key, key.secret_key, key.token)

    async def async_provider() -> AwsCredentials:
        threads.append(threading.get_ident())
        return AwsCredentials(key.access_key, key.secret_key, key.token)

    provider = sync_provider if kind == "sync" else async_provider
    await aws.find(authMechanismProperties={"AWS_CREDENTIAL_PROVIDER": provider})
    assert threads, "the provider was called"
    on_loop = all(thread == threading.get_ident() for thread in threads)
    assert on_loop is (kind == "async"), (
        "plain providers run in a worker thread, coroutine functions on the loop"
    )
    assert aws.member.accepted == [key.access_key] and sum(aws.endpoints.hits.values()) == 0


async def test_custom_provider_2_case_2_takes_precedence_over_the_environment(aws: Aws) -> None:
    aws.use_environment(("AKIAINVALID", "invalid", None))
    key = _permanent(aws)
    calls: list[None] = []

    def provider() -> AwsCredentials:
        calls.append(None)
        return AwsCredentials(key.access_key, key.secret_key)

    await aws.find(authMechanismProperties={"AWS_CREDENTIAL_PROVIDER": provider})
    assert calls and aws.member.accepted == [key.access_key]


@dataclass
class BotocoreShaped:
    """Credentials shaped like botocore's (``access_key``, ``secret_key``, ``token``)."""

    access_key: str
    secret_key: str
    token: str | None


async def test_a_provider_may_return_sdk_shaped_credentials(aws: Aws) -> None:
    key = _permanent(aws)
    provider = lambda: BotocoreShaped(key.access_key, key.secret_key, None)  # noqa: E731
    await aws.find(authMechanismProperties={"AWS_CREDENTIAL_PROVIDER": provider})
    assert aws.member.accepted == [key.access_key]


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        (BotocoreShaped("", "secret", None), "without an access key"),
        (BotocoreShaped("AKIA", "secret", 5), "session token that is not a string"),  # type: ignore[arg-type]
    ],
)
async def test_a_provider_returning_unusable_credentials_is_named(
    aws: Aws, result: Any, problem: str
) -> None:
    with pytest.raises(OperationFailure, match=problem):
        await aws.find(authMechanismProperties={"AWS_CREDENTIAL_PROVIDER": lambda: result})


async def test_a_failing_provider_is_named(aws: Aws) -> None:
    def provider() -> AwsCredentials:
        raise RuntimeError("no profile")

    with pytest.raises(OperationFailure, match="AWS_CREDENTIAL_PROVIDER raised RuntimeError"):
        await aws.find(authMechanismProperties={"AWS_CREDENTIAL_PROVIDER": provider})


# -- the conversation's checks -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "problem"),
    [
        (ServerFirst(nonce_size=63), "63 bytes instead of 64"),
        (ServerFirst(keep_client_nonce=False), "does not start with the client nonce"),
        (ServerFirst(host="sts..amazonaws.com"), "empty label"),
        (ServerFirst(host=""), "empty STS host"),
        (ServerFirst(host="." + "a" * 20), "starts with a period"),
        (ServerFirst(host="sts.amazonaws.com."), "ends with a period"),
        (ServerFirst(host="a" * 256), "256 bytes"),
    ],
)
async def test_the_server_first_message_is_checked(aws: Aws, shape: ServerFirst, problem: str) -> None:
    aws.use_environment(_permanent(aws))
    aws.member.server_first = shape
    with pytest.raises(OperationFailure, match=problem):
        await aws.find()
    assert aws.peer.commands("saslContinue") == []


@pytest.mark.parametrize(
    ("host", "region"), [("sts.us-west-2.amazonaws.com", "us-west-2"), ("localhost", "us-east-1")]
)
async def test_the_region_is_taken_from_the_servers_sts_host(aws: Aws, host: str, region: str) -> None:
    aws.use_environment(_permanent(aws))
    aws.member.server_first = ServerFirst(host=host)
    await aws.find()
    (second,) = aws.peer.commands("saslContinue")
    assert f"/{region}/sts/aws4_request" in str(second.document["payload"])


async def test_the_client_first_message_advertises_no_channel_binding(aws: Aws) -> None:
    aws.use_environment(_permanent(aws))
    await aws.find()
    (start,) = aws.peer.commands("saslStart")
    assert start.db == "$external" and start.document["mechanism"] == "MONGODB-AWS"
    assert aws.member.refused == []  # the member checks p == 110 and a 32-byte nonce


# -- failing endpoints -------------------------------------------------------------------------------------------


async def test_a_failing_endpoint_is_named(aws: Aws) -> None:
    aws.endpoints.fail_status = 500
    with pytest.raises(OperationFailure, match="EC2 instance metadata service answered HTTP 500"):
        await aws.find()
    assert CREDENTIAL_CACHE.get() is None


async def test_a_slow_endpoint_runs_into_the_timeout(aws: Aws) -> None:
    aws_credentials.use_endpoints(
        AwsEndpoints(ecs_base=aws.endpoints.base, imds_base=aws.endpoints.base, timeout=0.2)
    )
    aws.endpoints.delay = 5
    aws.monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", ECS_RELATIVE_URI)
    with pytest.raises(OperationFailure, match=r"ECS container credentials endpoint: .*within 0\.2 s"):
        await aws.find()


async def test_the_connections_time_limit_bounds_the_credential_requests(aws: Aws) -> None:
    # Each request may take 5 s here; connectTimeoutMS (which bounds the whole handshake) is 300 ms.
    aws.endpoints.delay = 5
    with pytest.raises(OperationFailure, match="no AWS credentials before the connection's time limit"):
        await aws.find(connectTimeoutMS=300)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"not json", "something other than JSON"),
        (b"[1]", "JSON that is not an object"),
        (
            b'{"AccessKeyId": "A", "SecretAccessKey": "S", "Expiration": "2030-01-01T00:00:00Z"}',
            "without a Token",
        ),
        (b'{"AccessKeyId": "A", "SecretAccessKey": "S", "Token": "T", "Expiration": "soon"}', "not a date"),
        (b'{"AccessKeyId": "A", "SecretAccessKey": "S", "Token": "T"}', "without an Expiration"),
    ],
)
async def test_malformed_credential_documents_are_named(aws: Aws, body: bytes, problem: str) -> None:
    aws.monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", ECS_RELATIVE_URI)
    aws.endpoints.body = body
    with pytest.raises(OperationFailure, match=problem):
        await aws.find()


async def test_an_ecs_uri_must_be_relative(aws: Aws) -> None:
    aws.monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "@evil.example.com/creds")
    with pytest.raises(OperationFailure, match="must start with '/'"):
        await aws.find()
    assert sum(aws.endpoints.hits.values()) == 0


async def test_only_one_of_the_key_variables_is_named(aws: Aws) -> None:
    aws.monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAONLY")
    with pytest.raises(OperationFailure, match="AWS_SECRET_ACCESS_KEY is not set"):
        await aws.find()


async def test_a_web_identity_token_refused_by_sts(aws: Aws) -> None:
    aws.use_web_identity()
    (aws.tmp_path / "token").write_text("a-token-sts-does-not-know")
    with pytest.raises(OperationFailure, match="AssumeRoleWithWebIdentity answered HTTP 403"):
        await aws.find()


async def test_a_missing_token_file_is_named(aws: Aws) -> None:
    aws.monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(aws.tmp_path / "absent"))
    aws.monkeypatch.setenv("AWS_ROLE_ARN", ROLE_ARN)
    with pytest.raises(
        OperationFailure, match=r"cannot read AWS_WEB_IDENTITY_TOKEN_FILE .*FileNotFoundError"
    ):
        await aws.find()


# -- secrets -----------------------------------------------------------------------------------------------------


def _everything_shown(error: BaseException, records: list[logging.LogRecord]) -> Iterator[str]:
    yield "".join(traceback.format_exception(error))
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None:
            continue
        yield str(current)
        yield repr(current)
        yield repr(getattr(current, "details", None))
        pending += [current.__cause__, current.__context__]
    for record in records:
        yield record.getMessage()
        yield repr(record.args)


class EventRecorder(CommandListener, ConnectionPoolListener):
    """Every command and pool event's ``repr`` and fields, as text."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def _record(self, event: object) -> None:
        self.texts += [repr(event), repr(vars(event) if hasattr(event, "__dict__") else event)]

    started = succeeded = failed = _record
    pool_cleared = connection_closed = connection_check_out_failed = _record


async def _failure(aws: Aws, recorder: EventRecorder, **kwargs: Any) -> PyMongoError:
    with pytest.raises(PyMongoError) as info:
        await aws.find(event_listeners=[recorder], **kwargs)
    return info.value


async def test_no_secret_in_any_error_or_log_record(aws: Aws, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    records = caplog.records
    recorder = EventRecorder()
    secrets: list[str] = [WEB_IDENTITY_TOKEN, "s3cr3t-session-token", "s3cr3t-secret-key"]
    failures: list[PyMongoError] = []
    # A signature the member refuses (wrong secret), with a session token.
    aws.keys.add("AKIAREFUSED", "the-real-secret", "s3cr3t-session-token")
    aws.use_environment(("AKIAREFUSED", "s3cr3t-secret-key", "s3cr3t-session-token"))
    failures.append(await _failure(aws, recorder))
    # A server nonce that does not extend ours.
    aws.member.server_first = ServerFirst(keep_client_nonce=False)
    failures.append(await _failure(aws, recorder))
    aws.member.server_first = ServerFirst()
    aws.clear_environment()
    # Credentials from the endpoints, refused by a member that answers the wrong host.
    aws.member.server_first = ServerFirst(host="sts..com")
    failures.append(await _failure(aws, recorder))
    secrets += [key.secret_key for key in aws.endpoints.issued] + [
        str(key.token) for key in aws.endpoints.issued
    ]
    aws.member.server_first = ServerFirst()
    # STS refusing the web identity token, and the credentials document echoed back as garbage.
    aws.use_web_identity()
    aws.endpoints.fail_status = 403
    failures.append(await _failure(aws, recorder))
    aws.endpoints.fail_status = None
    aws.endpoints.body = b'{"Credentials": {"SecretAccessKey": "s3cr3t-secret-key", "SessionToken": "x"}}'
    failures.append(await _failure(aws, recorder))
    # A provider whose credentials are refused.
    provider = lambda: AwsCredentials("AKIAPROVIDED", "s3cr3t-secret-key", "s3cr3t-session-token")  # noqa: E731
    failures.append(
        await _failure(aws, recorder, authMechanismProperties={"AWS_CREDENTIAL_PROVIDER": provider})
    )
    assert len(failures) == 6
    assert any("pool_cleared" in text.lower() or "PoolCleared" in text for text in recorder.texts)
    for error in failures:
        for text in [*_everything_shown(error, records), *recorder.texts]:
            for secret in secrets:
                assert secret not in text, text
    assert "s3cr3t" not in repr(AwsCredentials("AKIA", "s3cr3t-secret-key", "s3cr3t-session-token"))
