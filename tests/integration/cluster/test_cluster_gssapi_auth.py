"""GSSAPI through the loopback cluster harness: the members answer the conversation on ``$external`` as servers
configured for Kerberos (a real acceptor with the service keytab, spec_runner/cluster/gssapi_sasl.py), against a
real MIT KDC on loopback; then the client's reads and writes reach the test server as usual. Skipped, naming
what is missing, without ``krb5kdc`` or python-gssapi."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import pytest
from spec_runner.cluster import Deployment, replica_set
from spec_runner.cluster.gssapi_sasl import GssapiSaslServer

from mongio.client import MongoClient
from mongio.errors import OperationFailure
from tests.support.kerberos_realm import (
    SERVICE_PRINCIPAL,
    USER,
    KerberosRealm,
    missing_kerberos,
    realm_environment,
    start_realm,
)

_MISSING = missing_kerberos()
pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(_MISSING is not None, reason=f"GSSAPI with a real KDC: {_MISSING}"),
]


@pytest.fixture(scope="module")
def realm() -> Iterator[KerberosRealm]:
    realm = start_realm()
    try:
        with realm_environment(realm):
            realm.kinit()
            yield realm
    finally:
        realm.stop()


@pytest.fixture(scope="module")
def rs(realm: KerberosRealm) -> Iterator[Deployment]:
    # The members go by "localhost": the service principal is mongodb/localhost.
    with replica_set(3, member_host="localhost") as deployment:
        yield deployment


@pytest.fixture
def sasl(rs: Deployment, realm: KerberosRealm) -> Iterator[GssapiSaslServer]:
    server = GssapiSaslServer(realm.keytab_path)
    rs.accept_external_auth("GSSAPI", server)
    try:
        yield server
    finally:
        rs.accept_external_auth("GSSAPI", None)


def gssapi_uri(rs: Deployment, properties: str = "") -> str:
    query = "authMechanism=GSSAPI&serverSelectionTimeoutMS=5000"
    if properties:
        query += f"&authMechanismProperties={properties}"
    return rs.uri.replace("mongodb://", f"mongodb://{quote(USER, safe='')}@", 1) + (
        "&" if "?" in rs.uri else "/?"
    ) + query


async def test_every_pooled_connection_authenticates_with_the_members(
    rs: Deployment, sasl: GssapiSaslServer
) -> None:
    async with MongoClient(gssapi_uri(rs)) as client:
        collection = client.gssapi_auth.people
        await collection.delete_many({})
        await collection.insert_one({"name": "ada"})
        assert (await collection.find_one({}, {"_id": 0})) == {"name": "ada"}
    assert sasl.authenticated and set(sasl.authenticated) == {(USER, USER)}
    assert set(sasl.targets) == {SERVICE_PRINCIPAL}
    assert sasl.failures == []


async def test_members_without_the_service_key_refuse(rs: Deployment, sasl: GssapiSaslServer) -> None:
    # The client gets its ticket for mongodb/localhost from the KDC; members without that key cannot accept it.
    server = GssapiSaslServer(sasl.keytab_path.replace("mongodb.keytab", "missing.keytab"))
    rs.accept_external_auth("GSSAPI", server)
    async with MongoClient(gssapi_uri(rs)) as client:
        with pytest.raises(OperationFailure, match="GSSAPI authentication failed"):
            await client.gssapi_auth.people.find_one({})
    assert server.authenticated == [] and server.failures
