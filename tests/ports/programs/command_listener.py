"""Command monitoring: a CommandListener subclass counting commands, registered with event_listeners."""

import asyncio
import sys
from collections import Counter

from pymongo import AsyncMongoClient, monitoring
from pymongo.errors import OperationFailure

DB = "port_command_listener"
IGNORED = {"hello", "isMaster", "ismaster", "endSessions", "killCursors"}


class CountingListener(monitoring.CommandListener):
    def __init__(self):
        self.started_names = Counter()
        self.succeeded_names = Counter()
        self.failed_names = Counter()
        self.databases = set()
        self.open_requests = {}
        self.mismatches = 0
        self.failure_codes = []
        self.insert_sizes = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name in IGNORED:
            return
        self.started_names[event.command_name] += 1
        self.databases.add(event.database_name)
        self.open_requests[event.request_id] = event.command_name
        if event.command_name == "insert":
            self.insert_sizes.append(len(event.command["documents"]))
            print("   started insert on", event.command["insert"], "lsid sent:", "lsid" in event.command)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        if event.command_name in IGNORED:
            return
        self.succeeded_names[event.command_name] += 1
        if self.open_requests.pop(event.request_id, None) != event.command_name:
            self.mismatches += 1
        if event.command_name == "find":
            batch = event.reply["cursor"]["firstBatch"]
            print("   find reply batch:", len(batch), "duration ok:", event.duration_micros >= 0)

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        if event.command_name in IGNORED:
            return
        self.failed_names[event.command_name] += 1
        self.open_requests.pop(event.request_id, None)
        self.failure_codes.append(event.failure.get("code"))


async def main(uri: str) -> None:
    listener = CountingListener()
    client = AsyncMongoClient(uri, event_listeners=[listener])
    await client.drop_database(DB)
    things = client[DB].things

    await things.insert_one({"n": 0})
    await things.insert_many([{"n": i} for i in range(1, 6)])
    print("found:", [doc["n"] async for doc in things.find({"n": {"$gt": 2}}).sort("n", 1)])
    await things.update_many({}, {"$inc": {"n": 1}})
    await things.delete_one({"n": 1})
    print("count:", await things.count_documents({}))
    batches = things.find().batch_size(2)
    print("batched total:", len(await batches.to_list()))
    try:
        await client[DB].command("noSuchCommand")
    except OperationFailure as error:
        print("failed command code:", error.code)
    await client[DB].command("ping")

    print("started:", sorted(listener.started_names.items()))
    print("succeeded:", sorted(listener.succeeded_names.items()))
    print("failed:", sorted(listener.failed_names.items()), listener.failure_codes)
    print("databases:", sorted(listener.databases))
    print("insert sizes:", listener.insert_sizes)
    print("all answered:", not listener.open_requests, "mismatched:", listener.mismatches)

    await client.drop_database(DB)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
