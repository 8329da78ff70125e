"""The shapes of other libraries' option objects that mongio's signatures take beside its own.

mongio accepts PyMongo's ``WriteConcern``, ``ReadConcern``, read preferences, ``CodecOptions``, write models,
index and search index models, ``DriverInfo``, ``TransactionOptions``, ``bson.Timestamp`` and ``bson.DBRef`` wherever it accepts its own (it converts them on the way
in, reading the attributes below). These protocols let a type checker see that too, so an application typed
against PyMongo passes ``pymongo.WriteConcern(w=1)`` to :meth:`~mongio.MongoClient.get_database` without a
type error, while an object of another kind (a read concern where a write concern goes) is still refused.

They exist for type checking only: nothing here is checked with ``isinstance`` at runtime, and mongio never
imports PyMongo to describe them. Each one names the attributes mongio reads from the foreign object, plus,
where those alone would fit other option kinds, one that tells the kind apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

__all__ = [
    "CodecOptionsLike",
    "DBRefLike",
    "DriverInfoLike",
    "IndexModelLike",
    "ReadConcernLike",
    "ReadPreferenceLike",
    "SearchIndexModelLike",
    "TimestampLike",
    "TransactionOptionsLike",
    "WriteConcernLike",
    "WriteModelLike",
]


class WriteConcernLike(Protocol):
    """A write concern of another library (PyMongo's ``WriteConcern``): its fields as a ``document``."""

    @property
    def document(self) -> dict[str, Any]:
        """The write concern's fields (``w``, ``wtimeout``, ``j``, ``fsync``)."""

    @property
    def acknowledged(self) -> bool:
        """Whether writes under it are acknowledged (tells a write concern from a read concern)."""


class ReadConcernLike(Protocol):
    """A read concern of another library (PyMongo's ``ReadConcern``): its ``level``."""

    @property
    def level(self) -> str | None:
        """The read concern level (``"majority"``, ``"local"``, ...), None for the server's default."""


class ReadPreferenceLike(Protocol):
    """A read preference of another library (PyMongo's ``ReadPreference.SECONDARY``, ``Nearest(...)``, ...)."""

    @property
    def mode(self) -> int:
        """The mode number: 0 primary, 1 primaryPreferred, 2 secondary, 3 secondaryPreferred, 4 nearest."""

    @property
    def tag_sets(self) -> Sequence[Mapping[str, Any]]:
        """The tag sets, tried in order."""

    @property
    def max_staleness(self) -> int:
        """``maxStalenessSeconds``, -1 for none."""


class CodecOptionsLike(Protocol):
    """PyMongo's ``CodecOptions``: a named tuple of the same seven fields as mongio's, read with ``_asdict``."""

    @property
    def tz_aware(self) -> bool:
        """Whether decoded datetimes carry a time zone."""

    @property
    def uuid_representation(self) -> int:
        """How UUIDs are encoded to BSON binary."""

    def _asdict(self) -> dict[str, Any]:
        """The seven fields by name."""


class DBRefLike(Protocol):
    """A DBRef of another library (``bson.DBRef``): the collection, the id and the database it points to."""

    @property
    def collection(self) -> str:
        """The collection of the referenced document."""

    @property
    def id(self) -> Any:
        """The ``_id`` of the referenced document."""

    @property
    def database(self) -> str | None:
        """The database of the referenced document, or None for the one it is dereferenced in."""


class WriteModelLike(Protocol):
    """One of PyMongo's write models (``pymongo.InsertOne``, ``UpdateMany``, ...), which mongio reads by class
    name. Their common method tells them apart from other objects; mongio does not call it."""

    def _add_to_bulk(self, bulkobj: Any) -> None:
        """PyMongo's hook that adds the model to one of its bulk writes."""


class IndexModelLike(Protocol):
    """An index model of another library (PyMongo's ``IndexModel``): the ``createIndexes`` entry as its
    ``document`` (with ``key`` and ``name``)."""

    @property
    def document(self) -> Mapping[str, Any]:
        """The index specification."""


class SearchIndexModelLike(Protocol):
    """A search index model of another library (PyMongo's ``SearchIndexModel``): the ``createSearchIndexes``
    entry as its ``document`` (with ``name``, ``definition`` and ``type``)."""

    @property
    def document(self) -> Mapping[str, Any]:
        """The search index specification."""


class DriverInfoLike(Protocol):
    """Driver information of another library (PyMongo's ``DriverInfo`` named tuple)."""

    @property
    def name(self) -> str:
        """The name of the library wrapping the driver."""

    @property
    def version(self) -> str | None:
        """Its version."""

    @property
    def platform(self) -> str | None:
        """Its platform."""


class TimestampLike(Protocol):
    """A BSON timestamp of another library (``bson.Timestamp``): seconds since the epoch and an increment."""

    @property
    def time(self) -> int:
        """Seconds since the Unix epoch."""

    @property
    def inc(self) -> int:
        """The ordinal within that second."""


class TransactionOptionsLike(Protocol):
    """Transaction options of another library (PyMongo's ``TransactionOptions``), read attribute by attribute."""

    @property
    def read_concern(self) -> ReadConcernLike | None:
        """The transaction's read concern, None to inherit it."""

    @property
    def write_concern(self) -> WriteConcernLike | None:
        """The write concern of its commit and abort, None to inherit it."""

    @property
    def read_preference(self) -> ReadPreferenceLike | None:
        """The read preference of its reads, None to inherit it."""

    @property
    def max_commit_time_ms(self) -> int | None:
        """The commit's ``maxTimeMS``, None for none."""
