"""The entity map of one test: driver objects and BSON values by unique name, each with its kind.

Storing a name twice, fetching an unknown name, or fetching an entity as another kind raises ``EntityError``.
The map is used from the test's own task and from thread entities (asyncio tasks on the same loop), so no
lock is needed: nothing here awaits.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any, cast

from spec_runner.unified.errors import EntityError
from spec_runner.unified.matcher import bson_type

if TYPE_CHECKING:
    from spec_runner.unified.events import ClientEventStore, ClientLogStore


class EntityKind(Enum):
    """The entity types the unified test format allows (the ``createEntities`` keys and the saved results)."""

    CLIENT = "client"
    CLIENT_ENCRYPTION = "clientEncryption"
    DATABASE = "database"
    COLLECTION = "collection"
    SESSION = "session"
    BUCKET = "bucket"
    THREAD = "thread"
    CHANGE_STREAM = "changeStream"
    FIND_CURSOR = "findCursor"
    COMMAND_CURSOR = "commandCursor"
    TOPOLOGY_DESCRIPTION = "topologyDescription"
    BSON = "bson"  # any BSON value: a saved result, an id, a list of stored events or a counter


CREATABLE_KINDS: frozenset[EntityKind] = frozenset(
    {
        EntityKind.CLIENT,
        EntityKind.CLIENT_ENCRYPTION,
        EntityKind.DATABASE,
        EntityKind.COLLECTION,
        EntityKind.SESSION,
        EntityKind.BUCKET,
        EntityKind.THREAD,
    }
)
"""The kinds ``createEntities`` can declare; the others come from operation results and runner operations."""

CURSOR_KINDS: frozenset[EntityKind] = frozenset(
    {EntityKind.CHANGE_STREAM, EntityKind.FIND_CURSOR, EntityKind.COMMAND_CURSOR}
)


class Entity:
    """One stored entity: its name, kind and value, plus per-kind extras the runner keeps beside it
    (a session's lsid, kept because it must stay readable after the session ends)."""

    __slots__ = ("extras", "kind", "name", "value")

    def __init__(
        self, name: str, kind: EntityKind, value: Any, extras: Mapping[str, Any] | None = None
    ) -> None:
        self.name = name
        self.kind = kind
        self.value = value
        self.extras: dict[str, Any] = dict(extras or {})

    def __repr__(self) -> str:
        return f"Entity({self.name!r}, {self.kind.value})"


class EntityMap:
    """The entities of one test by name. Never shared between tests."""

    def __init__(self) -> None:
        self._entities: dict[str, Entity] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._entities

    def __iter__(self) -> Iterator[Entity]:
        return iter(list(self._entities.values()))

    def __len__(self) -> int:
        return len(self._entities)

    def add(self, name: str, kind: EntityKind, value: Any, **extras: Any) -> Entity:
        """Store ``value`` under ``name``; a name already in use is an error."""
        if not isinstance(name, str) or not name:
            raise EntityError(f"entity names are non-empty strings, not {name!r}")
        if name in self._entities:
            existing = self._entities[name]
            raise EntityError(f"entity {name!r} already exists (a {existing.kind.value})")
        if kind is EntityKind.BSON and bson_type(value) is None:
            raise EntityError(
                f"cannot store {type(value).__name__} {value!r} as entity {name!r}: not a BSON value"
            )
        entity = Entity(name, kind, value, extras)
        self._entities[name] = entity
        return entity

    def add_session(self, name: str, session: Any, lsid: Mapping[str, Any]) -> Entity:
        """Store a session with its logical session id (read once, so ``$$sessionLsid`` works after it ends)."""
        return self.add(name, EntityKind.SESSION, session, lsid=lsid)

    def add_bson(self, name: str, value: Any) -> Entity:
        """Store a BSON value (a saved operation result, a list, a counter)."""
        return self.add(name, EntityKind.BSON, value)

    def new_list(self, name: str) -> list[Any]:
        """Store and return an empty array that the runner appends to (stored events, iteration records)."""
        values: list[Any] = []
        self.add(name, EntityKind.BSON, values)
        return values

    def entity(self, name: str, *kinds: EntityKind) -> Entity:
        """The entity named ``name``; with ``kinds``, it must be of one of them."""
        try:
            entity = self._entities[name]
        except KeyError:
            known = ", ".join(sorted(self._entities)) or "none"
            raise EntityError(f"no entity named {name!r} (defined: {known})") from None
        if kinds and entity.kind not in kinds:
            wanted = " or ".join(k.value for k in kinds)
            raise EntityError(f"entity {name!r} is a {entity.kind.value}, not a {wanted}")
        return entity

    def get(self, name: str, *kinds: EntityKind) -> Any:
        """The value of the entity named ``name`` (of one of ``kinds`` when given)."""
        return self.entity(name, *kinds).value

    def kind_of(self, name: str) -> EntityKind:
        return self.entity(name).kind

    def client(self, name: str) -> Any:
        return self.get(name, EntityKind.CLIENT)

    def database(self, name: str) -> Any:
        return self.get(name, EntityKind.DATABASE)

    def collection(self, name: str) -> Any:
        return self.get(name, EntityKind.COLLECTION)

    def session(self, name: str) -> Any:
        return self.get(name, EntityKind.SESSION)

    def bucket(self, name: str) -> Any:
        return self.get(name, EntityKind.BUCKET)

    def thread(self, name: str) -> Any:
        return self.get(name, EntityKind.THREAD)

    def topology_description(self, name: str) -> Any:
        return self.get(name, EntityKind.TOPOLOGY_DESCRIPTION)

    def cursor(self, name: str) -> Any:
        return self.get(name, *CURSOR_KINDS)

    def bson_value(self, name: str) -> Any:
        """The BSON value named ``name`` (for ``$$matchesEntity``)."""
        return self.get(name, EntityKind.BSON)

    def session_lsid(self, name: str) -> Any:
        """The lsid document recorded for session ``name`` (for ``$$sessionLsid``)."""
        entity = self.entity(name, EntityKind.SESSION)
        if "lsid" not in entity.extras:
            raise EntityError(f"session {name!r} was stored without its lsid")
        return entity.extras["lsid"]

    def client_events(self, name: str) -> ClientEventStore:
        """The event store kept with client ``name`` (stored as its ``events`` extra)."""
        store = self.entity(name, EntityKind.CLIENT).extras.get("events")
        if store is None:
            raise EntityError(f"client {name!r} observes no events")
        return cast("ClientEventStore", store)

    def client_logs(self, name: str) -> ClientLogStore:
        """The log message store kept with client ``name`` (stored as its ``logs`` extra)."""
        store = self.entity(name, EntityKind.CLIENT).extras.get("logs")
        if store is None:
            raise EntityError(f"client {name!r} observes no log messages")
        return cast("ClientLogStore", store)

    def of_kind(self, *kinds: EntityKind) -> list[Entity]:
        """The entities of the given kinds, in the order they were stored (for the end-of-test cleanup)."""
        return [e for e in self._entities.values() if e.kind in kinds]

    def snapshot(self) -> dict[str, Any]:
        """Name to value, for whoever inspects the entities before the map is cleared."""
        return {name: e.value for name, e in self._entities.items()}

    def clear(self) -> None:
        self._entities.clear()
