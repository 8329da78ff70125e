"""Write results, named and shaped as PyMongo's so code ports unchanged.

A result of an unacknowledged write (``w=0``) knows nothing the server would have said: reading such a field
raises :class:`~mongio.errors.InvalidOperation`; check ``acknowledged`` first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from mongio.errors import InvalidOperation

__all__ = [
    "BulkWriteResult",
    "ClientBulkWriteResult",
    "DeleteResult",
    "InsertManyResult",
    "InsertOneResult",
    "UpdateResult",
]


class _WriteResult:
    __slots__ = ("_acknowledged",)

    def __init__(self, acknowledged: bool) -> None:
        self._acknowledged = acknowledged

    @property
    def acknowledged(self) -> bool:
        """Whether the server acknowledged the write. When False (``w=0``) the counts and ids the server would
        have reported are not available and reading them raises ``InvalidOperation``."""
        return self._acknowledged

    def _check(self, name: str) -> None:
        if not self._acknowledged:
            _unavailable(name)


def _unavailable(name: str) -> NoReturn:
    raise InvalidOperation(
        f"A value for {name} is not available when the write is unacknowledged. "
        "Check the acknowledged attribute to avoid this error."
    )


class InsertOneResult(_WriteResult):
    """The result of ``insert_one``: the inserted document's ``_id`` (known even when unacknowledged)."""

    __slots__ = ("_inserted_id",)

    def __init__(self, inserted_id: Any, acknowledged: bool) -> None:
        # Both slots set here, without calling the base class's __init__: one call fewer per insert_one.
        self._acknowledged = acknowledged
        self._inserted_id = inserted_id

    @property
    def inserted_id(self) -> Any:
        """The ``_id`` of the inserted document."""
        return self._inserted_id

    def __repr__(self) -> str:
        return f"InsertOneResult({self._inserted_id!r}, acknowledged={self._acknowledged})"


class InsertManyResult(_WriteResult):
    """The result of ``insert_many``: the ``_id`` of every document, in the order given."""

    __slots__ = ("_inserted_ids",)

    def __init__(self, inserted_ids: list[Any], acknowledged: bool) -> None:
        super().__init__(acknowledged)
        self._inserted_ids = inserted_ids

    @property
    def inserted_ids(self) -> list[Any]:
        """The ``_id`` of each inserted document, in the order given."""
        return self._inserted_ids

    def __repr__(self) -> str:
        return f"InsertManyResult({self._inserted_ids!r}, acknowledged={self._acknowledged})"


class UpdateResult(_WriteResult):
    """The result of ``update_one``, ``update_many`` or ``replace_one`` (and of one update in a verbose
    client-level bulk write). ``raw_result`` is the server's reply, with ``upserted`` reduced to the id."""

    __slots__ = ("_in_client_bulk", "_raw_result")

    def __init__(
        self, raw_result: Mapping[str, Any], acknowledged: bool, in_client_bulk: bool = False
    ) -> None:
        # Every slot set here, without calling the base class's __init__: one call fewer per update.
        self._acknowledged = acknowledged
        self._raw_result = raw_result
        self._in_client_bulk = in_client_bulk

    @property
    def raw_result(self) -> Mapping[str, Any]:
        """The server's reply to the update command."""
        return self._raw_result

    @property
    def matched_count(self) -> int:
        """Documents the filter matched (0 when the write was an upsert, except in a client-level bulk write,
        whose server reply counts the upserted document)."""
        self._check("matched_count")
        if self.did_upsert and not self._in_client_bulk:
            return 0
        return int(self._raw_result.get("n", 0))

    @property
    def modified_count(self) -> int:
        """How many documents were changed; raises ``InvalidOperation`` for an unacknowledged write."""
        self._check("modified_count")
        return int(self._raw_result.get("nModified", 0))

    @property
    def upserted_id(self) -> Any:
        """The ``_id`` of the document an upsert inserted, or None."""
        self._check("upserted_id")
        value = self._raw_result.get("upserted")
        if isinstance(value, Mapping) and self._in_client_bulk:
            return value.get("_id")
        return value

    @property
    def did_upsert(self) -> bool:
        """Whether an upsert happened; tells an upserted ``_id`` of None apart from no upsert."""
        self._check("did_upsert")
        return "upserted" in self._raw_result

    def __repr__(self) -> str:
        return f"UpdateResult({self._raw_result!r}, acknowledged={self._acknowledged})"


class DeleteResult(_WriteResult):
    """The result of ``delete_one`` or ``delete_many``."""

    __slots__ = ("_raw_result",)

    def __init__(self, raw_result: Mapping[str, Any], acknowledged: bool) -> None:
        # Both slots set here, without calling the base class's __init__: one call fewer per delete.
        self._acknowledged = acknowledged
        self._raw_result = raw_result

    @property
    def raw_result(self) -> Mapping[str, Any]:
        """The server's reply to the delete command."""
        return self._raw_result

    @property
    def deleted_count(self) -> int:
        """How many documents were deleted; raises ``InvalidOperation`` for an unacknowledged write."""
        self._check("deleted_count")
        return int(self._raw_result.get("n", 0))

    def __repr__(self) -> str:
        return f"DeleteResult({self._raw_result!r}, acknowledged={self._acknowledged})"


class BulkWriteResult(_WriteResult):
    """The result of a collection's ``bulk_write``. ``bulk_api_result`` holds ``nInserted``, ``nMatched``,
    ``nModified``, ``nRemoved``, ``nUpserted``, ``upserted`` (``[{index, _id}]`` with indexes into the
    request list), ``writeErrors`` and ``writeConcernErrors``."""

    __slots__ = ("_bulk_api_result",)

    def __init__(self, bulk_api_result: dict[str, Any], acknowledged: bool) -> None:
        super().__init__(acknowledged)
        self._bulk_api_result = bulk_api_result

    @property
    def bulk_api_result(self) -> dict[str, Any]:
        """The combined counts, upserts and errors in PyMongo's bulk API result layout."""
        return self._bulk_api_result

    def _count(self, name: str, key: str) -> int:
        self._check(name)
        return int(self._bulk_api_result.get(key, 0))

    @property
    def inserted_count(self) -> int:
        """How many documents were inserted."""
        return self._count("inserted_count", "nInserted")

    @property
    def matched_count(self) -> int:
        """How many documents the updates and replacements matched."""
        return self._count("matched_count", "nMatched")

    @property
    def modified_count(self) -> int:
        """How many documents the updates and replacements changed."""
        return self._count("modified_count", "nModified")

    @property
    def deleted_count(self) -> int:
        """How many documents were deleted."""
        return self._count("deleted_count", "nRemoved")

    @property
    def upserted_count(self) -> int:
        """How many documents were upserted."""
        return self._count("upserted_count", "nUpserted")

    @property
    def upserted_ids(self) -> dict[int, Any]:
        """``{request index: _id}`` for every upsert."""
        self._check("upserted_ids")
        return {item["index"]: item["_id"] for item in self._bulk_api_result.get("upserted", ())}

    def __repr__(self) -> str:
        return f"BulkWriteResult({self._bulk_api_result!r}, acknowledged={self._acknowledged})"


class ClientBulkWriteResult(_WriteResult):
    """The result of ``MongoClient.bulk_write``. The per-operation maps (``insert_results``,
    ``update_results``, ``delete_results``, keyed by the index of the model) are there only when the write was
    made with ``verbose_results=True`` (``has_verbose_results``); reading them otherwise raises
    ``InvalidOperation``."""

    __slots__ = ("_bulk_api_result", "_has_verbose_results")

    def __init__(
        self, bulk_api_result: dict[str, Any], acknowledged: bool, has_verbose_results: bool
    ) -> None:
        super().__init__(acknowledged)
        self._bulk_api_result = bulk_api_result
        self._has_verbose_results = has_verbose_results

    @property
    def bulk_api_result(self) -> dict[str, Any]:
        """The combined counts, with the per-operation results when verbose."""
        return self._bulk_api_result

    @property
    def has_verbose_results(self) -> bool:
        """Whether per-operation results were asked for (``verbose_results=True``)."""
        self._check("has_verbose_results")
        return self._has_verbose_results

    def _count(self, name: str, key: str) -> int:
        self._check(name)
        return int(self._bulk_api_result.get(key, 0))

    @property
    def inserted_count(self) -> int:
        """How many documents were inserted."""
        return self._count("inserted_count", "nInserted")

    @property
    def upserted_count(self) -> int:
        """How many documents were upserted."""
        return self._count("upserted_count", "nUpserted")

    @property
    def matched_count(self) -> int:
        """How many documents the updates and replacements matched."""
        return self._count("matched_count", "nMatched")

    @property
    def modified_count(self) -> int:
        """How many documents the updates and replacements changed."""
        return self._count("modified_count", "nModified")

    @property
    def deleted_count(self) -> int:
        """How many documents were deleted."""
        return self._count("deleted_count", "nDeleted")

    def _verbose(self, name: str, key: str) -> dict[int, Any]:
        self._check(name)
        if not self._has_verbose_results:
            raise InvalidOperation(
                f"{name} is only available when the bulk write was made with verbose_results=True"
            )
        value: dict[int, Any] = self._bulk_api_result.get(key, {})
        return value

    @property
    def insert_results(self) -> dict[int, InsertOneResult]:
        """Each insert's result by its index in the models (verbose results only)."""
        return self._verbose("insert_results", "insertResults")

    @property
    def update_results(self) -> dict[int, UpdateResult]:
        """Each update's result by its index in the models (verbose results only)."""
        return self._verbose("update_results", "updateResults")

    @property
    def delete_results(self) -> dict[int, DeleteResult]:
        """Each delete's result by its index in the models (verbose results only)."""
        return self._verbose("delete_results", "deleteResults")

    def __repr__(self) -> str:
        return (
            f"ClientBulkWriteResult({self._bulk_api_result!r}, acknowledged={self._acknowledged}, "
            f"verbose={self._has_verbose_results})"
        )
