"""The two indexes GridFS needs, made before a bucket's first write as the specification says: only when the
files collection is empty (checked on the primary), and only after ``listIndexes`` shows they are missing, so
an application with read-only rights on an existing bucket never sends ``createIndexes``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mongio.gridfs.layout import CHUNKS_INDEX, FILES_INDEX, index_keys_match
from mongio.options.read_preference import ReadPreference

if TYPE_CHECKING:
    from mongio.collection import Collection

__all__ = ["IndexGuard"]


async def _has_index(collection: Collection[Any], keys: tuple[tuple[str, int], ...], session: Any) -> bool:
    async with collection.list_indexes(session=session) as cursor:
        async for index in cursor:
            if index_keys_match(index.get("key", {}), keys):
                return True
    return False


class IndexGuard:
    """Checks (and if needed makes) a bucket's indexes once, before its first write.

    ``reset()`` makes the next write check again (after the bucket was dropped). Two uploads starting at once
    may both check: creating an index that exists is harmless, so no lock is needed.
    """

    __slots__ = ("_chunks", "_done", "_files")

    def __init__(self, files: Collection[Any], chunks: Collection[Any]) -> None:
        self._files = files
        self._chunks = chunks
        self._done = False

    def reset(self) -> None:
        self._done = False

    async def ensure(self, session: Any = None) -> None:
        if self._done:
            return
        primary = self._files.with_options(read_preference=ReadPreference.PRIMARY)
        if await primary.find_one({}, {"_id": 1}, session=session) is None:
            if not await _has_index(self._files, FILES_INDEX, session):
                await self._files.create_index(list(FILES_INDEX), session=session)
            if not await _has_index(self._chunks, CHUNKS_INDEX, session):
                await self._chunks.create_index(list(CHUNKS_INDEX), unique=True, session=session)
        self._done = True
