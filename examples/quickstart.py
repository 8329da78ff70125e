"""mongio quickstart: a short tour of the client API.

Run it with ``python examples/quickstart.py``. With ``MONGODB_URI`` set it uses that deployment; otherwise it
starts an embedded SecantusDB for the duration of the run (``pip install 'mongio[server]'``).
"""

from __future__ import annotations

import asyncio
import os
from contextlib import AsyncExitStack
from typing import Any

from mongio import ASCENDING, DESCENDING, MongoClient
from mongio.embedded import EmbeddedServer


async def main() -> None:
    # An AsyncExitStack lets the embedded server be optional while still being stopped on the way out.
    async with AsyncExitStack() as stack:
        uri = os.environ.get("MONGODB_URI")
        if uri is None:
            server = await stack.enter_async_context(EmbeddedServer())
            uri = server.uri
            print(f"started an embedded SecantusDB at {uri}")

        # ``async with`` closes the client at the end: its monitors and pooled connections are all awaited.
        client = await stack.enter_async_context(MongoClient(uri))
        people = client.quickstart.people
        await people.drop()  # start from an empty collection, so every run prints the same thing

        # insert_one returns the _id it generated; insert_many does the same for several documents.
        ada = await people.insert_one({"name": "Ada", "born": 1815, "languages": ["English", "French"]})
        print(f"inserted Ada with _id {ada.inserted_id}")
        more = await people.insert_many(
            [
                {"name": "Grace", "born": 1906, "languages": ["English"]},
                {"name": "Edsger", "born": 1930, "languages": ["Dutch", "English"]},
            ]
        )
        print(f"inserted {1 + len(more.inserted_ids)} documents")

        # find() returns a cursor without doing I/O; ``async for`` fetches batches as it goes.
        print("born after 1900, oldest first:")
        async for person in people.find({"born": {"$gt": 1900}}).sort("born", ASCENDING):
            print(f"  {person['name']} (born {person['born']})")

        # to_list() reads the whole result at once, for results known to be small.
        speakers = await people.find({"languages": "English"}, {"_id": 0, "name": 1}).sort("name").to_list()
        print(f"English speakers: {', '.join(person['name'] for person in speakers)}")

        updated = await people.update_one({"name": "Grace"}, {"$push": {"languages": "COBOL"}})
        print(f"updated {updated.modified_count} document")
        grace: dict[str, Any] | None = await people.find_one({"name": "Grace"})
        assert grace is not None
        print(f"  Grace now speaks {', '.join(grace['languages'])}")

        print(f"{await people.count_documents({})} people in the collection")

        # Aggregations also return a cursor; this one counts speakers per language.
        pipeline: list[dict[str, Any]] = [
            {"$unwind": "$languages"},
            {"$group": {"_id": "$languages", "speakers": {"$sum": 1}}},
            {"$sort": {"speakers": DESCENDING, "_id": ASCENDING}},
        ]
        print("speakers per language:")
        async for row in people.aggregate(pipeline):
            print(f"  {row['_id']}: {row['speakers']}")

        deleted = await people.delete_one({"name": "Edsger"})
        print(f"deleted {deleted.deleted_count} document, {await people.count_documents({})} left")


if __name__ == "__main__":
    asyncio.run(main())
