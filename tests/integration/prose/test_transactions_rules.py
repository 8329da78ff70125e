"""Rules of the transactions specification that its shared test files do not reach, against the test server."""

from __future__ import annotations

from typing import Any

import pytest

from mongio.client import MongoClient
from mongio.collection import Collection
from mongio.errors import ConfigurationError, InvalidDocument
from mongio.sessions.client_session import ClientSession
from mongio.sessions.transaction_state import TxnState
from tests.support.loopback_peer import LoopbackPeer
from tests.support.recorders import CommandRecorder


class Unencodable:
    """A value the BSON encoder refuses when the command is encoded for the wire."""


def _state(session: ClientSession) -> TxnState:
    # Read through a function so the checker does not carry a narrowed state across the awaits.
    return session._transaction.state


async def test_client_side_error_leaves_the_transaction_starting(
    client: MongoClient, coll: Collection[Any], recorder: CommandRecorder
) -> None:
    """Transactions spec, ClientSession changes: "Client-side errors MUST NOT change transaction state": a first
    command that cannot be encoded leaves the session in "starting transaction", so the next command is the
    one that starts the transaction (startTransaction, and the read concern) on the server."""
    async with client.start_session() as session:
        session.start_transaction()
        with pytest.raises(InvalidDocument):
            await coll.find_one({"x": Unencodable()}, session=session)
        assert _state(session) is TxnState.STARTING
        await coll.insert_one({"_id": 1}, session=session)
        assert _state(session) is TxnState.IN_PROGRESS
        with pytest.raises(InvalidDocument):
            await coll.find_one({"x": Unencodable()}, session=session)
        assert _state(session) is TxnState.IN_PROGRESS
        await session.commit_transaction()
    first = recorder.commands("insert")[-1]
    assert first["startTransaction"] is True and first["autocommit"] is False
    assert await coll.count_documents({}) == 1


async def test_start_transaction_refused_when_the_deployment_has_no_sessions() -> None:
    """Transactions spec, startTransaction: it "SHOULD report an error if the driver can detect that
    transactions are not supported by the deployment", which is so when the deployment does not support
    sessions; before the deployment is known nothing is refused (the driver sessions spec forbids checking
    for session support up front)."""
    async with LoopbackPeer(lambda request: None) as peer:  # a standalone without logicalSessionTimeoutMinutes
        client = MongoClient(peer.uri)  # not opened: nothing is known of the deployment yet
        try:
            session = client.start_session()
            session.start_transaction()
            await session.abort_transaction()
            await client.admin.command("ping")
            with pytest.raises(ConfigurationError, match="Transactions are not supported by this deployment"):
                session.start_transaction()
            assert session._transaction.state is TxnState.ABORTED
            await session.end_session()
        finally:
            await client.close()
