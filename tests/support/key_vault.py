"""The key vault of the client-side encryption tests: a key vault namespace and a database of the test's own."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mongio import MongoClient


@asynccontextmanager
async def own_databases(client: MongoClient, database_prefix: str) -> AsyncIterator[tuple[str, str]]:
    """A key vault namespace and a database named ``<database_prefix>_<suffix>``, both the test's own and
    dropped afterwards."""
    suffix = uuid.uuid4().hex[:10]
    yield f"keyvault_{suffix}.datakeys", f"{database_prefix}_{suffix}"
    await client.drop_database(f"keyvault_{suffix}")
    await client.drop_database(f"{database_prefix}_{suffix}")
