"""Queryable Encryption's collection helpers, as the client-side encryption specification describes them
("Queryable Encryption Create and Drop Collection Helpers"): a collection whose fields are encrypted for
Queryable Encryption needs two state collections (``enxcol_.<name>.esc`` and ``enxcol_.<name>.ecoc``,
clustered on ``_id``) and an index on ``__safeContent__``; dropping it drops the state collections too.

:func:`encrypted_fields_of` finds a collection's ``encryptedFields`` the specification's way (the option
given, else the client's ``encrypted_fields_map``); ``Database.create_collection`` and
``Database.drop_collection`` (``Collection.drop`` through it) do the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mongio.bson import DEFAULT_CODEC_OPTIONS, CodecOptions
from mongio.errors import ConfigurationError
from mongio.operations.base import Command, ConnectionContext
from mongio.operations.collections import Create

if TYPE_CHECKING:
    from mongio.client import MongoClient
    from mongio.options.write_concern import WriteConcern

__all__ = [
    "QUERYABLE_ENCRYPTION_MIN_WIRE_VERSION",
    "SAFE_CONTENT_INDEX",
    "CreateStateCollection",
    "asks_the_server",
    "encrypted_fields_of",
    "state_collection_names",
    "takes_encrypted_fields",
]

QUERYABLE_ENCRYPTION_MIN_WIRE_VERSION = 21
"""MongoDB 7.0, the first server with the Queryable Encryption protocol this driver speaks."""
SAFE_CONTENT_INDEX = [("__safeContent__", 1)]
"""The index every Queryable Encryption collection has (its tags)."""
_INCOMPATIBLE_SERVER = (
    "Driver support of Queryable Encryption is incompatible with server. Upgrade server to use Queryable "
    "Encryption. The server's maxWireVersion is {found}; Queryable Encryption needs {needed} (MongoDB 7.0)."
)
_CLUSTERED_ON_ID = {"key": {"_id": 1}, "unique": True}


def takes_encrypted_fields(options: dict[str, Any]) -> Mapping[str, Any] | None:
    """Remove the ``encryptedFields`` option (either spelling) from create options and return it."""
    given = [options.pop(name) for name in ("encrypted_fields", "encryptedFields") if name in options]
    found = [value for value in given if value is not None]
    if len(found) > 1:
        raise ConfigurationError("give encrypted_fields or encryptedFields, not both")
    if found and not isinstance(found[0], Mapping):
        raise TypeError(f"encrypted_fields must be a mapping, not {type(found[0]).__name__}")
    return found[0] if found else None


def encrypted_fields_of(
    client: MongoClient[Any], database: str, name: str, given: Mapping[str, Any] | None
) -> Mapping[str, Any] | None:
    """The collection's ``encryptedFields``: ``given`` when it is, else the client's ``encrypted_fields_map``
    entry for the namespace (None when neither has one)."""
    if given is not None:
        return given
    opts = client.options.extras.get("auto_encryption_opts")
    fields_map = None if opts is None else opts.encrypted_fields_map
    if not fields_map:
        return None
    found = fields_map.get(f"{database}.{name}")
    return found if isinstance(found, Mapping) else None


def asks_the_server(client: MongoClient[Any]) -> bool:
    """Whether a drop looks for the collection's ``encryptedFields`` on the server (``listCollections``) when
    neither the call nor the map gives them: only a client with automatic encryption does, so that no other
    client pays a round trip on every drop."""
    return client.options.extras.get("auto_encryption_opts") is not None


def state_collection_names(name: str, encrypted_fields: Mapping[str, Any]) -> tuple[str, str]:
    """The names of the collection's state collections (ESC, ECOC)."""
    esc = encrypted_fields.get("escCollection") or f"enxcol_.{name}.esc"
    ecoc = encrypted_fields.get("ecocCollection") or f"enxcol_.{name}.ecoc"
    return str(esc), str(ecoc)


class CreateStateCollection(Create):
    """``create`` of a state collection, clustered on ``_id``. The first command of creating a Queryable
    Encryption collection, so it refuses (before anything is sent) a server older than MongoDB 7.0."""

    def __init__(
        self,
        database: str,
        name: str,
        *,
        write_concern: WriteConcern | None = None,
        codec_options: CodecOptions = DEFAULT_CODEC_OPTIONS,
    ) -> None:
        super().__init__(
            database,
            name,
            clusteredIndex=dict(_CLUSTERED_ON_ID),
            write_concern=write_concern,
            codec_options=codec_options,
        )

    def build(self, context: ConnectionContext) -> Command:
        if context.max_wire_version < QUERYABLE_ENCRYPTION_MIN_WIRE_VERSION:
            raise ConfigurationError(
                _INCOMPATIBLE_SERVER.format(
                    found=context.max_wire_version, needed=QUERYABLE_ENCRYPTION_MIN_WIRE_VERSION
                )
            )
        return super().build(context)
