"""mongio quickstart: connect, insert, query, aggregate.

With MONGODB_URI unset it starts an embedded SecantusDB (``pip install 'mongio[server]'``); with it set,
it uses that deployment's first host. mongio's client API (``MongoClient``) is still being built, so this
uses the layer below it: an authenticated, handshaken ``Connection`` running commands.
"""

from __future__ import annotations

import asyncio
import os
from contextlib import AsyncExitStack

from mongio.bson import ObjectId
from mongio.connection.establish import ConnectionSettings, establish
from mongio.connection.tls import create_ssl_context
from mongio.embedded import EmbeddedServer
from mongio.options.client_options import ClientOptions


async def main() -> None:
    async with AsyncExitStack() as stack:
        uri = os.environ.get("MONGODB_URI")
        if uri is None:
            server = await stack.enter_async_context(EmbeddedServer())
            uri = server.uri
            print(f"started an embedded SecantusDB at {uri}")
        options = await ClientOptions.from_uri(uri).resolve()
        settings = ConnectionSettings(
            credential=options.credential,
            ssl_context=create_ssl_context(options.tls) if options.tls else None,
            connect_timeout=options.connect_timeout,
        )
        conn = await establish(options.seeds[0], settings)
        stack.callback(conn.close)

        db = "quickstart"
        await conn.command(db, {"drop": "people"}, check=False)
        people = [
            {"_id": ObjectId(), "name": "Ada", "born": 1815, "languages": ["English", "French"]},
            {"_id": ObjectId(), "name": "Grace", "born": 1906, "languages": ["English"]},
            {"_id": ObjectId(), "name": "Edsger", "born": 1930, "languages": ["Dutch", "English"]},
        ]
        inserted = await conn.command(db, {"insert": "people"}, document_sequences={"documents": people})
        print(f"inserted {inserted['n']} documents")

        found = await conn.command(db, {"find": "people", "filter": {"born": {"$gt": 1900}}, "sort": {"born": 1}})
        for person in found["cursor"]["firstBatch"]:
            print(f"  {person['name']} (born {person['born']})")

        pipeline = [{"$unwind": "$languages"}, {"$group": {"_id": "$languages", "speakers": {"$sum": 1}}},
                    {"$sort": {"speakers": -1, "_id": 1}}]
        counted = await conn.command(db, {"aggregate": "people", "pipeline": pipeline, "cursor": {}})
        for row in counted["cursor"]["firstBatch"]:
            print(f"  {row['_id']}: {row['speakers']}")


if __name__ == "__main__":
    asyncio.run(main())
