"""TLS connections, with trustme certificates: to the test server started with TLS, and to a TLS loopback peer."""

from __future__ import annotations

import ssl
from collections.abc import Iterator

import pytest
import trustme
from spec_runner.server import external_uri

from mongio.connection import TLSOptions, connect, create_ssl_context
from mongio.errors import AutoReconnect
from tests.support.loopback_peer import LoopbackPeer
from tests.support.tls_server import tls_test_server


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def pki(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("pki")
    server = ca.issue_cert("localhost")  # deliberately not 127.0.0.1: connecting by IP is a hostname mismatch
    client = ca.issue_cert("client@example.com")
    paths = {
        "ca": directory / "ca.pem",
        "other_ca": directory / "other_ca.pem",
        "server_cert": directory / "server.crt",
        "server_key": directory / "server.key",
        "client": directory / "client.pem",
    }
    ca.cert_pem.write_to_path(str(paths["ca"]))
    trustme.CA().cert_pem.write_to_path(str(paths["other_ca"]))
    server.cert_chain_pems[0].write_to_path(str(paths["server_cert"]))
    server.private_key_pem.write_to_path(str(paths["server_key"]))
    client.private_key_and_cert_chain_pem.write_to_path(str(paths["client"]))
    return {name: str(path) for name, path in paths.items()}


@pytest.fixture(scope="module")
def tls_server_port(pki: dict[str, str]) -> Iterator[int]:
    """A SecantusDB speaking TLS only, with a certificate for "localhost" signed by the test CA."""
    if external_uri() is not None:
        pytest.skip("MONGODB_URI names an external deployment; its TLS setup is not ours to know")
    with tls_test_server(pki["server_cert"], pki["server_key"], pki["ca"]) as port:
        yield port


@pytest.mark.server
async def test_tls_hello_and_ping_to_the_test_server(tls_server_port: int, pki: dict[str, str]) -> None:
    context = create_ssl_context(TLSOptions(ca_file=pki["ca"]))
    conn = await connect(("localhost", tls_server_port), connect_timeout=10, ssl_context=context)
    try:
        hello = await conn.command("admin", {"hello": 1})
        assert hello["ok"] == 1
        assert (await conn.command("admin", {"ping": 1}))["ok"] == 1
        ssl_object = conn._transport.get_extra_info("ssl_object")
        assert ssl_object is not None and ssl_object.version() in ("TLSv1.2", "TLSv1.3")
    finally:
        conn.close()


@pytest.mark.server
async def test_tls_hostname_mismatch_is_refused_unless_allowed(
    tls_server_port: int, pki: dict[str, str]
) -> None:
    strict = create_ssl_context(TLSOptions(ca_file=pki["ca"]))
    with pytest.raises(
        AutoReconnect, match=rf"127\.0\.0\.1:{tls_server_port}.*(IP address mismatch|doesn't match)"
    ):
        await connect(("127.0.0.1", tls_server_port), connect_timeout=10, ssl_context=strict)
    relaxed = create_ssl_context(TLSOptions(ca_file=pki["ca"], allow_invalid_hostnames=True))
    conn = await connect(("127.0.0.1", tls_server_port), connect_timeout=10, ssl_context=relaxed)
    try:
        assert (await conn.command("admin", {"ping": 1}))["ok"] == 1
    finally:
        conn.close()


@pytest.mark.server
async def test_tls_untrusted_server_is_refused_unless_insecure(
    tls_server_port: int, pki: dict[str, str]
) -> None:
    wrong_ca = create_ssl_context(TLSOptions(ca_file=pki["other_ca"]))
    with pytest.raises(AutoReconnect, match="certificate"):
        await connect(("localhost", tls_server_port), connect_timeout=10, ssl_context=wrong_ca)
    insecure = create_ssl_context(TLSOptions(insecure=True))
    conn = await connect(("127.0.0.1", tls_server_port), connect_timeout=10, ssl_context=insecure)
    try:
        assert (await conn.command("admin", {"ping": 1}))["ok"] == 1
    finally:
        conn.close()


def _peer_context(ca: trustme.CA, *, require_client_cert: bool) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(context)
    if require_client_cert:
        ca.configure_trust(context)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


async def test_tls_loopback_peer_with_client_certificate(ca: trustme.CA, pki: dict[str, str]) -> None:
    async with LoopbackPeer(ssl=_peer_context(ca, require_client_cert=True)) as peer:
        context = create_ssl_context(TLSOptions(ca_file=pki["ca"], certificate_key_file=pki["client"]))
        conn = await connect(peer.address, connect_timeout=10, ssl_context=context)
        try:
            assert await conn.command("admin", {"ping": 1}) == {"ok": 1}
            peer_ssl = peer.connections[0].writer.get_extra_info("ssl_object")
            assert ("email", "client@example.com") in peer_ssl.getpeercert()["subjectAltName"]
        finally:
            conn.close()
    assert [r.command_name for r in peer.requests] == ["ping"]


async def test_tls_loopback_peer_refuses_a_client_without_certificate(
    ca: trustme.CA, pki: dict[str, str]
) -> None:
    async with LoopbackPeer(ssl=_peer_context(ca, require_client_cert=True)) as peer:
        context = create_ssl_context(TLSOptions(ca_file=pki["ca"]))
        with pytest.raises(AutoReconnect):
            conn = await connect(peer.address, connect_timeout=10, ssl_context=context)
            try:
                # TLS 1.3 reports the missing certificate only once the client reads.
                await conn.command("admin", {"ping": 1})
            finally:
                conn.close()


@pytest.mark.server
async def test_tls_large_insert_sent_in_parts_arrives_whole(tls_server_port: int, pki: dict[str, str]) -> None:
    # Documents past LARGE_PACKED_SIZE go to the TLS transport as a part of their own after the command.
    from mongio.bson import DEFAULT_CODEC_OPTIONS
    from mongio.bson._encoder import pack_inserts
    from mongio.operations.base import encode_insert
    from mongio.wire.op_msg import LARGE_PACKED_SIZE, PackedDocuments

    documents = [{"_id": n, "s": chr(97 + n) * (LARGE_PACKED_SIZE // 2)} for n in range(5)]
    data, _, _ = pack_inserts(documents, DEFAULT_CODEC_OPTIONS, lambda d: encode_insert(d, DEFAULT_CODEC_OPTIONS))
    context = create_ssl_context(TLSOptions(ca_file=pki["ca"]))
    conn = await connect(("localhost", tls_server_port), connect_timeout=10, ssl_context=context)
    try:
        await conn.command("tls_large", {"drop": "c"}, check=False)
        reply = await conn.command(
            "tls_large", {"insert": "c"}, document_sequences={"documents": [PackedDocuments(memoryview(data))]}
        )
        assert reply["n"] == 5
        found = await conn.command("tls_large", {"find": "c", "sort": {"_id": 1}})
        assert found["cursor"]["firstBatch"] == documents
    finally:
        conn.close()
