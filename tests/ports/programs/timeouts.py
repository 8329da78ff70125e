"""Timeouts: pymongo.timeout() blocks, timeoutMS, socketTimeoutMS, server-side maxTimeMS and server selection,
against commands held by a blocking failCommand fail point; errors caught the way PyMongo code does."""

import asyncio
import sys

import pymongo
from pymongo import AsyncMongoClient
from pymongo.errors import (
    AutoReconnect,
    ConnectionFailure,
    ExecutionTimeout,
    NetworkTimeout,
    OperationFailure,
    PyMongoError,
    ServerSelectionTimeoutError,
)

DB = "port_timeouts"
BLOCK_MS = 250


async def block_next(client, command, block_ms=BLOCK_MS, app_name="port-timeouts"):
    await client.admin.command({
        "configureFailPoint": "failCommand",
        "mode": {"times": 1},
        "data": {"failCommands": [command], "blockConnection": True, "blockTimeMS": block_ms, "appName": app_name},
    })


async def let_server_finish():
    # the server keeps holding a blocked command after the client gave up on it
    await asyncio.sleep(BLOCK_MS / 1000 + 0.05)


def describe(error):
    return (error.timeout, isinstance(error, (NetworkTimeout, ExecutionTimeout)),
            isinstance(error, ConnectionFailure), isinstance(error, OperationFailure))


async def main(uri: str) -> None:
    admin = AsyncMongoClient(uri)
    client = AsyncMongoClient(uri, appname="port-timeouts")
    await client.drop_database(DB)
    jobs = client[DB].jobs
    await jobs.insert_many([{"n": i} for i in range(5)])

    with pymongo.timeout(10):
        print("generous timeout:", await jobs.count_documents({}))

    await block_next(admin, "find")
    try:
        with pymongo.timeout(0.1):
            await jobs.find_one({"n": 1})
    except PyMongoError as error:
        print("timeout block: timeout/network-or-execution/connection/operation =", *describe(error))
    await let_server_finish()
    print("client usable afterwards:", (await jobs.find_one({"n": 1}))["n"])

    await block_next(admin, "insert")
    try:
        with pymongo.timeout(0.1):
            await jobs.insert_one({"n": 99})
    except (NetworkTimeout, ExecutionTimeout) as error:
        print("insert timeout caught as NetworkTimeout/ExecutionTimeout:", error.timeout)
    await let_server_finish()

    limited = AsyncMongoClient(uri, appname="port-timeouts", timeoutMS=100)
    await block_next(admin, "aggregate")
    try:
        await limited[DB].jobs.count_documents({})
    except PyMongoError as error:
        print("timeoutMS: timeout/network-or-execution/connection/operation =", *describe(error))
    await let_server_finish()
    with pymongo.timeout(5):
        print("pymongo.timeout overrides timeoutMS:", await limited[DB].jobs.count_documents({}))
    await limited.close()

    legacy = AsyncMongoClient(uri, appname="port-timeouts", socketTimeoutMS=100)
    await block_next(admin, "find")
    print("socketTimeoutMS, read retried:", (await legacy[DB].jobs.find_one({"n": 2}))["n"])
    await let_server_finish()
    await legacy.close()
    legacy = AsyncMongoClient(uri, appname="port-timeouts", socketTimeoutMS=100, retryReads=False)
    await block_next(admin, "find")
    try:
        await legacy[DB].jobs.find_one()
    except NetworkTimeout as error:
        print("socketTimeoutMS, no retry:", error.timeout, isinstance(error, AutoReconnect))
    await let_server_finish()
    await legacy.close()

    await admin.admin.command({
        "configureFailPoint": "failCommand",
        "mode": {"times": 1},
        "data": {"failCommands": ["find"], "errorCode": 50, "appName": "port-timeouts"},
    })
    try:
        await jobs.find({}).max_time_ms(5).to_list()
    except ExecutionTimeout as error:
        print("server maxTimeMS expired:", error.code, error.timeout, isinstance(error, OperationFailure))

    nowhere = AsyncMongoClient("mongodb://127.0.0.1:9/?directConnection=true", serverSelectionTimeoutMS=100)
    try:
        await nowhere.admin.command("ping")
    except ServerSelectionTimeoutError as error:
        print("server selection:", error.timeout, isinstance(error, ConnectionFailure))
    await nowhere.close()

    try:
        with pymongo.timeout(-1):
            await jobs.find_one()
    except PyMongoError as error:
        print("expired before start:", error.timeout)
    except ValueError as error:
        print("negative timeout refused:", type(error).__name__)

    print("remaining docs:", await jobs.count_documents({}))
    await client.drop_database(DB)
    await client.close()
    await admin.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
