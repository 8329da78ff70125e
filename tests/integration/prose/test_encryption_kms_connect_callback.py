"""``kms_connect_callback`` (the client-side encryption specification's ``kmsConnectCallback``), with the prose
test "28. KMS Connect Callback" (README of client-side-encryption/tests), cases 1 to 6, against the fake AWS KMS
(tests/support/fake_kms.py) behind an HTTP ``CONNECT`` proxy of the tests' own (tests/support/http_proxy.py),
plain and over TLS.

The KMS is named ``kms.example.test`` (a name that resolves nowhere) and its certificate is for that name only;
the proxy maps the name to the fake's loopback port. So a data key made proves the KMS request went through the
callback's tunnel, and that the driver's TLS handshake named the KMS host (SNI and the certificate check), not
the address the socket was connected to. The README's AWS master key is kept, with that endpoint. Case 3's
schema is given in the ``schema_map`` (SecantusDB refuses the ``encrypt`` keyword in a validator), marked by the
stand-in query analyser.

Cases 4 to 6: another exception from the callback fails the operation naming the callback; the callback is
told what is left of the key vault client's ``timeoutMS``; an ``OSError`` from the callback is retried (the
callback called again). Then: a certificate for another name fails; network errors past the retries; a
coroutine-function callback; a coroutine callback cancelled and a worker-thread callback abandoned (its late
socket closed) at the deadline; a value that is not callable is refused.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mongio import MongoClient, timeout
from mongio.bson.binary import Binary
from mongio.encryption import Algorithm, AutoEncryptionOpts, ClientEncryption, crypt_io, libmongocrypt
from mongio.encryption_options import KMSConnectContext
from mongio.errors import ConfigurationError, EncryptionError, MongioError
from tests.support.fake_kms import FakeCloudKms, KmsCertificates, kms_credentials
from tests.support.http_proxy import HttpConnectProxy, ProxyCertificates, TlsBridges
from tests.support.key_vault import own_databases
from tests.support.query_analyser import QueryAnalyser

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(libmongocrypt.version() is None, reason="needs mongio[encryption]"),
]

KMS_HOST = "kms.example.test"
README_KEY_ARN = "arn:aws:kms:us-east-1:579766882180:key/89fcc2c4-08b0-4bd9-9f25-e30687b580d0"
DETERMINISTIC = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Deterministic
Callback = Callable[[KMSConnectContext], socket.socket]


def kms_port(kms: FakeCloudKms) -> int:
    return int(kms.endpoint.rpartition(":")[2])


def master_key(kms: FakeCloudKms) -> dict[str, Any]:
    """The README's AWS master key, its KMS the fake under the name ``kms.example.test``."""
    return {"region": "us-east-1", "key": README_KEY_ARN, "endpoint": f"{KMS_HOST}:{kms_port(kms)}"}


@pytest.fixture
def named_certificates(tmp_path: Path) -> KmsCertificates:
    """The fake KMS's certificate authority and a certificate for ``kms.example.test`` only."""
    (tmp_path / "kms").mkdir()
    return KmsCertificates.make(str(tmp_path / "kms"), names=(KMS_HOST,))


@pytest.fixture
async def named_kms(named_certificates: KmsCertificates) -> AsyncIterator[FakeCloudKms]:
    async with FakeCloudKms(named_certificates) as fake:
        yield fake


@pytest.fixture
async def proxy(named_kms: FakeCloudKms) -> AsyncIterator[HttpConnectProxy]:
    """The plain HTTP proxy (the README's port 9004), ``kms.example.test`` mapped to the fake KMS."""
    async with HttpConnectProxy(mapping={KMS_HOST: ("127.0.0.1", kms_port(named_kms))}) as serving:
        yield serving


@pytest.fixture
async def https_proxy(named_kms: FakeCloudKms, tmp_path: Path) -> AsyncIterator[HttpConnectProxy]:
    """The proxy over TLS (the README's port 9005), with a certificate authority of its own."""
    (tmp_path / "proxy").mkdir()
    certificates = ProxyCertificates.make(str(tmp_path / "proxy"))
    mapping = {KMS_HOST: ("127.0.0.1", kms_port(named_kms))}
    async with HttpConnectProxy(mapping=mapping, certificates=certificates) as serving:
        yield serving


@pytest.fixture
def bridges() -> Iterator[TlsBridges]:
    made = TlsBridges()
    yield made
    made.close()


def aws(kms: FakeCloudKms) -> dict[str, Any]:
    return {"aws": kms_credentials("aws", kms.endpoint)}


def tls_trusting(ca_file: str) -> dict[str, dict[str, Any]]:
    return {"aws": {"tlsCAFile": ca_file}}


def encryption_through(
    key_client: MongoClient, namespace: str, kms: FakeCloudKms, ca_file: str, callback: Any
) -> ClientEncryption:
    """The README's ClientEncryption: AWS credentials, the given ``kms_connect_callback``, the KMS's TLS
    verified against ``ca_file``."""
    return ClientEncryption(
        aws(kms), namespace, key_client, None, kms_tls_options=tls_trusting(ca_file), kms_connect_callback=callback
    )


# --- 28: KMS Connect Callback -------------------------------------------------------------------------------


async def test_prose_28_case_1_plain_http_proxy(
    key_client: MongoClient,
    namespace: str,
    named_kms: FakeCloudKms,
    named_certificates: KmsCertificates,
    proxy: HttpConnectProxy,
) -> None:
    async with encryption_through(
        key_client, namespace, named_kms, named_certificates.ca_file, proxy.connect_callback()
    ) as encryption:
        proxy.reset()
        key_id = await encryption.create_data_key("aws", master_key(named_kms))
        assert isinstance(key_id, Binary) and key_id.subtype == 4
        assert proxy.connect_count >= 1
        assert proxy.targets == [f"{KMS_HOST}:{kms_port(named_kms)}"]  # the KMS as named, port included
        assert named_kms.requests == 1  # the TrentService.Encrypt that made the key, through the tunnel
        assert await encryption.decrypt(await encryption.encrypt("hello", DETERMINISTIC, key_id=key_id)) == "hello"


async def test_prose_28_case_2_https_proxy(
    key_client: MongoClient,
    namespace: str,
    named_kms: FakeCloudKms,
    named_certificates: KmsCertificates,
    https_proxy: HttpConnectProxy,
    bridges: TlsBridges,
) -> None:
    # Two TLS layers: the callback's to the proxy (the proxy's authority), the driver's to the KMS through it
    # (the KMS's authority only: the proxy's certificate would not verify).
    async with encryption_through(
        key_client, namespace, named_kms, named_certificates.ca_file, https_proxy.connect_callback(bridges)
    ) as encryption:
        https_proxy.reset()
        await encryption.create_data_key("aws", master_key(named_kms))
    assert https_proxy.connect_count >= 1
    assert https_proxy.targets == [f"{KMS_HOST}:{kms_port(named_kms)}"]
    assert named_kms.requests == 1


async def test_prose_28_case_2_the_driver_does_not_verify_against_the_proxys_certificate(
    key_client: MongoClient,
    namespace: str,
    named_kms: FakeCloudKms,
    https_proxy: HttpConnectProxy,
    bridges: TlsBridges,
) -> None:
    assert https_proxy.certificates is not None
    async with encryption_through(
        key_client, namespace, named_kms, https_proxy.certificates.ca_file, https_proxy.connect_callback(bridges)
    ) as encryption:
        with pytest.raises(EncryptionError, match=f"KMS {KMS_HOST}:\\d+: .*certificate"):
            await encryption.create_data_key("aws", master_key(named_kms))
    assert https_proxy.connect_count >= 1 and named_kms.requests == 0


async def test_prose_28_case_3_auto_encryption_through_the_proxy(
    server_uri: str,
    key_client: MongoClient,
    named_kms: FakeCloudKms,
    named_certificates: KmsCertificates,
    proxy: HttpConnectProxy,
    analyser: QueryAnalyser,
) -> None:
    async with own_databases(key_client, "db") as (key_vault, database):
        async with encryption_through(
            key_client, key_vault, named_kms, named_certificates.ca_file, proxy.connect_callback()
        ) as client_encryption:
            data_key_id = await client_encryption.create_data_key("aws", master_key(named_kms))
        schema = {
            "bsonType": "object",
            "properties": {
                "encrypted_string": {
                    "encrypt": {"keyId": [data_key_id], "bsonType": "string", "algorithm": str(DETERMINISTIC)}
                }
            },
        }
        proxy.reset()
        kms_requests_before = named_kms.requests
        opts = AutoEncryptionOpts(
            aws(named_kms),
            key_vault,
            schema_map={f"{database}.coll": schema},
            kms_tls_options=tls_trusting(named_certificates.ca_file),
            kms_connect_callback=proxy.connect_callback(),
            mongocryptd_uri=analyser.uri,
            mongocryptd_bypass_spawn=True,
        )
        async with MongoClient(server_uri, auto_encryption_opts=opts) as client_encrypted:
            coll = client_encrypted[database].coll
            await coll.insert_one({"_id": 1, "encrypted_string": "hello"})
            assert await coll.find_one({"_id": 1}) == {"_id": 1, "encrypted_string": "hello"}
        stored = await key_client[database].coll.find_one({"_id": 1})
        assert stored is not None and isinstance(stored["encrypted_string"], Binary)
        assert stored["encrypted_string"].subtype == 6
    # One KMS request (the data key's decryption), cached for the find: one connection through the proxy.
    assert proxy.connect_count == 1
    assert named_kms.requests - kms_requests_before == 1


# --- the KMS's name is what TLS checks ----------------------------------------------------------------------


async def test_a_kms_certificate_for_another_name_fails_though_it_names_the_address_connected_to(
    key_client: MongoClient, namespace: str, tmp_path: Path
) -> None:
    # The certificate names 127.0.0.1, the address the socket really is connected to (through the proxy):
    # checked against the KMS host, kms.example.test, it must fail.
    certificates = KmsCertificates.make(str(tmp_path), names=("127.0.0.1", "kms.wrong-host.invalid"))
    async with FakeCloudKms(certificates) as kms, HttpConnectProxy(
        mapping={KMS_HOST: ("127.0.0.1", kms_port(kms))}
    ) as proxy, encryption_through(
        key_client, namespace, kms, certificates.ca_file, proxy.connect_callback()
    ) as encryption:
        with pytest.raises(EncryptionError, match=f"KMS {KMS_HOST}:\\d+: Hostname mismatch") as raised:
            await encryption.create_data_key("aws", master_key(kms))
    assert f"'{KMS_HOST}'" in str(raised.value)
    assert proxy.connect_count == 1  # not retried: the same certificate would come back
    assert kms.requests == 0


# --- the callback's errors ----------------------------------------------------------------------------------


class Flaky:
    """A callback that raises ``failures`` (one per call, in order) before connecting through ``connect``."""

    def __init__(self, connect: Callback, failures: list[BaseException]) -> None:
        self.connect = connect
        self.failures = failures
        self.calls = 0

    def __call__(self, context: KMSConnectContext) -> socket.socket:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return self.connect(context)


async def test_prose_28_case_6_a_network_error_from_the_callback_is_retried_by_calling_it_again(
    key_client: MongoClient,
    namespace: str,
    named_kms: FakeCloudKms,
    named_certificates: KmsCertificates,
    proxy: HttpConnectProxy,
) -> None:
    callback = Flaky(proxy.connect_callback(), [ConnectionRefusedError(111, "proxy refused")])
    async with encryption_through(
        key_client, namespace, named_kms, named_certificates.ca_file, callback
    ) as encryption:
        await encryption.create_data_key("aws", master_key(named_kms))
    assert callback.calls == 2 and proxy.connect_count == 1


async def test_a_callback_that_keeps_failing_with_network_errors_fails_after_the_retries(
    key_client: MongoClient, namespace: str, named_kms: FakeCloudKms, named_certificates: KmsCertificates
) -> None:
    never: Callback = Flaky(lambda context: socket.socket(), [OSError(f"down {n}") for n in range(10)])
    async with encryption_through(
        key_client, namespace, named_kms, named_certificates.ca_file, never
    ) as encryption:
        with pytest.raises(EncryptionError, match="kms_connect_callback raised OSError: down 3"):
            await encryption.create_data_key("aws", master_key(named_kms))
    assert isinstance(never, Flaky) and never.calls == 4  # the first attempt and libmongocrypt's three retries


async def test_prose_28_case_4_another_error_from_the_callback_fails_the_operation_naming_it(
    key_client: MongoClient, namespace: str, named_kms: FakeCloudKms, named_certificates: KmsCertificates
) -> None:
    callback = Flaky(lambda context: socket.socket(), [LookupError("no route for this KMS")])
    async with encryption_through(
        key_client, namespace, named_kms, named_certificates.ca_file, callback
    ) as encryption:
        with pytest.raises(EncryptionError) as raised:
            await encryption.create_data_key("aws", master_key(named_kms))
    assert str(raised.value) == (
        f"kms_connect_callback for KMS {KMS_HOST}:{kms_port(named_kms)}: raised LookupError: no route for this KMS"
    )
    assert isinstance(raised.value.__cause__, LookupError)
    assert callback.calls == 1  # not retried


async def test_a_callback_returning_something_else_than_a_socket_fails_naming_the_callback(
    key_client: MongoClient, namespace: str, named_kms: FakeCloudKms, named_certificates: KmsCertificates
) -> None:
    async with encryption_through(
        key_client, namespace, named_kms, named_certificates.ca_file, lambda context: ("127.0.0.1", 9004)
    ) as encryption:
        with pytest.raises(EncryptionError, match=r"kms_connect_callback .* returned tuple, not a connected socket"):
            await encryption.create_data_key("aws", master_key(named_kms))


@pytest.mark.parametrize("value", ["http://proxy.example.net:3128", 9004])
def test_a_value_that_is_not_callable_is_refused(value: object) -> None:
    with pytest.raises(ConfigurationError, match=f"kms_connect_callback must be callable.* not {type(value).__name__}"):
        AutoEncryptionOpts({"local": {"key": bytes(96)}}, "keyvault.datakeys", kms_connect_callback=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["http://proxy.example.net:3128", 9004])
async def test_a_client_encryption_refuses_a_value_that_is_not_callable(
    key_client: MongoClient, namespace: str, value: object
) -> None:
    with pytest.raises(ConfigurationError, match="kms_connect_callback must be callable"):
        ClientEncryption({"local": {"key": bytes(96)}}, namespace, key_client, None, kms_connect_callback=value)  # type: ignore[arg-type]


# --- a coroutine function; the time the callback has ---------------------------------------------------------


def async_callback(proxy: HttpConnectProxy, seen: list[KMSConnectContext]) -> Any:
    """A coroutine-function callback for the plain proxy: a non-blocking socket, waited on by the event loop
    (asyncio or trio, through anyio)."""

    async def connect(context: KMSConnectContext) -> socket.socket:
        seen.append(context)
        sock = socket.socket()
        sock.setblocking(False)
        try:
            try:
                sock.connect(("127.0.0.1", proxy.port))
            except BlockingIOError:
                await anyio.wait_writable(sock)
            if error := sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                raise OSError(error, os.strerror(error))
            await open_tunnel_without_blocking(sock, context.host, context.port)
        except BaseException:
            sock.close()
            raise
        return sock

    return connect


async def open_tunnel_without_blocking(sock: socket.socket, host: str, port: int) -> None:
    request = memoryview(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    while request:
        await anyio.wait_writable(sock)
        request = request[sock.send(request) :]
    head = b""
    while b"\r\n\r\n" not in head:
        await anyio.wait_readable(sock)
        chunk = sock.recv(1)  # nothing past the answer's head may be read here
        if not chunk:
            raise ConnectionError("the proxy closed the connection")
        head += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        raise ConnectionError("the proxy refused the tunnel")


async def test_a_coroutine_function_callback_is_awaited_and_told_the_time_left(
    key_client: MongoClient,
    namespace: str,
    named_kms: FakeCloudKms,
    named_certificates: KmsCertificates,
    proxy: HttpConnectProxy,
) -> None:
    seen: list[KMSConnectContext] = []
    async with encryption_through(
        key_client, namespace, named_kms, named_certificates.ca_file, async_callback(proxy, seen)
    ) as encryption:
        key_id = await encryption.create_data_key("aws", master_key(named_kms))
        # A new key cache, in a mongio.timeout() block: the key is decrypted by the KMS again.
        async with timeout(5), encryption_through(
            key_client, namespace, named_kms, named_certificates.ca_file, async_callback(proxy, seen)
        ) as fresh:
            assert await fresh.encrypt("x", DETERMINISTIC, key_id=key_id) is not None
    (unbounded, bounded) = seen
    assert (unbounded.host, unbounded.port) == (KMS_HOST, kms_port(named_kms))
    assert unbounded.timeout == crypt_io.KMS_TIMEOUT  # an attempt's own limit, without timeoutMS
    assert 0 < bounded.timeout <= 5  # what was left of the mongio.timeout() block
    assert proxy.connect_count == 2


async def test_prose_28_case_5_the_callback_receives_the_key_vault_clients_timeout(
    server_uri: str,
    namespace: str,
    named_kms: FakeCloudKms,
    named_certificates: KmsCertificates,
    proxy: HttpConnectProxy,
) -> None:
    seen: list[KMSConnectContext] = []
    connect = proxy.connect_callback()

    def recording(context: KMSConnectContext) -> socket.socket:
        seen.append(context)
        return connect(context)

    async with MongoClient(server_uri, timeoutMS=1000) as bounded, encryption_through(
        bounded, namespace, named_kms, named_certificates.ca_file, recording
    ) as encryption:
        await encryption.create_data_key("aws", master_key(named_kms))
    (context,) = seen
    assert 0 < context.timeout <= 1.0  # what was left of the 1000 ms


async def test_a_coroutine_callback_that_stalls_is_cancelled_at_the_deadline(
    key_client: MongoClient, namespace: str, named_kms: FakeCloudKms, named_certificates: KmsCertificates
) -> None:
    cancelled: list[bool] = []

    async def stalls(context: KMSConnectContext) -> socket.socket:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled.append(True)
            raise
        raise AssertionError("not reached")

    async with encryption_through(
        key_client, namespace, named_kms, named_certificates.ca_file, stalls
    ) as encryption:
        with pytest.raises(MongioError) as raised:
            async with timeout(0.5):
                await encryption.create_data_key("aws", master_key(named_kms))
    assert raised.value.timeout and not isinstance(raised.value, EncryptionError)
    assert cancelled == [True]


async def test_a_worker_thread_callback_that_overruns_is_abandoned_and_its_late_socket_closed(
    key_client: MongoClient, namespace: str, named_kms: FakeCloudKms, named_certificates: KmsCertificates
) -> None:
    release = threading.Event()
    pairs: list[tuple[socket.socket, socket.socket]] = []

    def blocks(context: KMSConnectContext) -> socket.socket:
        late, peer = socket.socketpair()
        pairs.append((late, peer))  # held here too, so only the driver can close it
        release.wait(30)
        return late

    async with encryption_through(
        key_client, namespace, named_kms, named_certificates.ca_file, blocks
    ) as encryption:
        with pytest.raises(MongioError) as raised:
            async with timeout(0.5):
                await encryption.create_data_key("aws", master_key(named_kms))
    assert raised.value.timeout
    assert not release.is_set()  # the operation ended while the callback still blocked
    release.set()
    ((late, peer),) = pairs
    peer.settimeout(10)
    with peer:
        # The socket returned after the deadline is closed: its peer reads the end of the stream.
        assert await anyio.to_thread.run_sync(peer.recv, 1) == b""
    assert late.fileno() == -1
