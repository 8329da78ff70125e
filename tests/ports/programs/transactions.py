"""Transactions: with_transaction with a callback (commit, abort by exception), and explicit sessions."""

import asyncio
import sys

from pymongo import AsyncMongoClient, ReadPreference, WriteConcern
from pymongo.errors import InvalidOperation, OperationFailure, PyMongoError
from pymongo.read_concern import ReadConcern

DB = "port_transactions"


class InsufficientFunds(Exception):
    pass


async def main(uri: str) -> None:
    client = AsyncMongoClient(uri)
    await client.drop_database(DB)
    db = client[DB]
    accounts = db.get_collection("accounts", write_concern=WriteConcern("majority"))
    ledger = db.ledger
    await accounts.insert_many([{"_id": "alice", "balance": 100}, {"_id": "bob", "balance": 20}])
    await db.create_collection("ledger")

    async def transfer(session, source, target, amount):
        account = await accounts.find_one({"_id": source}, session=session)
        if account["balance"] < amount:
            raise InsufficientFunds(f"{source} has {account['balance']}, needs {amount}")
        await accounts.update_one({"_id": source}, {"$inc": {"balance": -amount}}, session=session)
        await accounts.update_one({"_id": target}, {"$inc": {"balance": amount}}, session=session)
        await ledger.insert_one({"from": source, "to": target, "amount": amount}, session=session)
        return f"moved {amount}"

    async def balances():
        return {doc["_id"]: doc["balance"] async for doc in accounts.find().sort("_id", 1)}

    async with client.start_session() as session:
        result = await session.with_transaction(
            lambda s: transfer(s, "alice", "bob", 30),
            read_concern=ReadConcern("snapshot"),
            write_concern=WriteConcern("majority"),
            read_preference=ReadPreference.PRIMARY,
        )
        print("commit result:", result, await balances(), await ledger.count_documents({}))
        print("in transaction after commit:", session.in_transaction)

        try:
            await session.with_transaction(lambda s: transfer(s, "bob", "alice", 500))
        except InsufficientFunds as error:
            print("aborted:", error)
        print("after abort:", await balances(), await ledger.count_documents({}))

        async def partial_then_fail(s):
            await ledger.insert_one({"note": "never visible"}, session=s)
            inside = await ledger.count_documents({}, session=s)
            outside = await ledger.count_documents({})
            print("inside vs outside:", inside, outside)
            raise ValueError("changed my mind")

        try:
            await session.with_transaction(partial_then_fail)
        except ValueError as error:
            print("rolled back:", error, await ledger.count_documents({}))

    async with client.start_session() as session:
        await session.start_transaction()
        await accounts.update_one({"_id": "alice"}, {"$inc": {"balance": 1}}, session=session)
        print("explicit in transaction:", session.in_transaction)
        await session.abort_transaction()
        print("explicit abort:", await balances())

        await session.start_transaction(write_concern=WriteConcern(w=1))
        await accounts.update_one({"_id": "bob"}, {"$inc": {"balance": 5}}, session=session)
        await session.commit_transaction()
        print("explicit commit:", await balances())
        await session.commit_transaction()
        print("commit twice is fine:", session.in_transaction)

        try:
            await session.abort_transaction()
        except InvalidOperation as error:
            print("abort after commit:", type(error).__name__, str(error))

        async with await session.start_transaction():
            await ledger.insert_one({"note": "context manager commits"}, session=session)
        print("context manager:", await ledger.count_documents({}))

        await session.start_transaction()
        try:
            await session.start_transaction()
        except InvalidOperation as error:
            print("nested start:", str(error))
        await session.abort_transaction()

    async with client.start_session() as first, client.start_session() as second:
        await first.start_transaction()
        await second.start_transaction()
        await accounts.update_one({"_id": "alice"}, {"$inc": {"balance": 1}}, session=first)
        try:
            await accounts.update_one({"_id": "alice"}, {"$inc": {"balance": 1}}, session=second)
        except OperationFailure as error:
            print("write conflict:", error.code, error.has_error_label("TransientTransactionError"))
        except PyMongoError as error:
            print("other error:", type(error).__name__)
        await first.commit_transaction()
        await second.abort_transaction()
        print("after conflict:", await balances())

    await client.drop_database(DB)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
