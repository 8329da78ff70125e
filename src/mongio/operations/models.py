"""Write models for ``bulk_write`` (collection and client level), ``IndexModel``, ``SearchIndexModel``,
``ReturnDocument`` and the index direction constants, with PyMongo's names and arguments.

Every model checks its arguments when it is made, so a bad one fails at the call that made it, before anything
is sent, and the checks are never repeated on a retry.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = [
    "ASCENDING",
    "DESCENDING",
    "GEO2D",
    "GEOSPHERE",
    "HASHED",
    "TEXT",
    "DeleteMany",
    "DeleteOne",
    "IndexModel",
    "InsertOne",
    "ReplaceOne",
    "ReturnDocument",
    "SearchIndexModel",
    "UpdateMany",
    "UpdateOne",
    "WriteModel",
    "gen_index_name",
    "index_document",
    "validate_array_filters",
    "validate_let",
]

ASCENDING = 1
"""Ascending index key (and sort) direction."""
DESCENDING = -1
"""Descending index key (and sort) direction."""
GEO2D = "2d"
"""A legacy 2d geospatial index."""
GEOSPHERE = "2dsphere"
"""A 2dsphere geospatial index."""
HASHED = "hashed"
"""A hashed index."""
TEXT = "text"
"""A text index."""

KIND_INSERT = 0
KIND_UPDATE = 1
KIND_DELETE = 2


class ReturnDocument(enum.IntEnum):
    """Which document ``find_one_and_update``/``find_one_and_replace`` return: the one before the write, or
    the one after it (``new`` in the ``findAndModify`` command)."""

    BEFORE = 0
    AFTER = 1


def index_document(keys: Any, what: str = "index keys") -> dict[str, Any]:
    """Normalize keys given as a name, a list of ``(name, direction)`` pairs or a mapping into a key document.

    ``"a"`` -> ``{"a": 1}``; ``[("a", 1), ("b", -1)]`` -> ``{"a": 1, "b": -1}``.
    """
    if isinstance(keys, str):
        return {keys: ASCENDING}
    if isinstance(keys, Mapping):
        if not keys:
            raise ValueError(f"{what} cannot be empty")
        return dict(keys)
    if isinstance(keys, Sequence):
        document: dict[str, Any] = {}
        for item in keys:
            if isinstance(item, str):
                document[item] = ASCENDING
                continue
            if not isinstance(item, Sequence) or len(item) != 2 or not isinstance(item[0], str):
                raise TypeError(f"{what} must be (name, direction) pairs, not {item!r}")
            name, direction = item
            if isinstance(direction, bool) or not isinstance(direction, int | float | str | Mapping):
                raise TypeError(
                    f"the direction of {name!r} must be 1, -1, a string such as 'text' or a mapping, "
                    f"not {direction!r}"
                )
            document[name] = direction
        if not document:
            raise ValueError(f"{what} cannot be empty")
        return document
    raise TypeError(f"{what} must be a str, a list of (name, direction) pairs or a mapping, not {keys!r}")


def gen_index_name(keys: Mapping[str, Any]) -> str:
    """The server's default index name: ``{"a": 1, "b": -1}`` -> ``"a_1_b_-1"``."""
    return "_".join(f"{name}_{direction}" for name, direction in keys.items())


def _filter(value: Any) -> Mapping[str, Any]:
    # The exact-type test spares the common dict the slower ABC check.
    if type(value) is not dict and not isinstance(value, Mapping):
        raise TypeError(f"filter must be a mapping (e.g. a dict), not {type(value).__name__}")
    return value


def _hint(value: Any) -> str | dict[str, Any] | None:
    if value is None or isinstance(value, str):
        return value
    return index_document(value, "hint")


def _collation(value: Any) -> Mapping[str, Any] | None:
    if value is None or isinstance(value, Mapping):
        return value
    document = getattr(value, "document", None)
    if isinstance(document, Mapping):
        return document
    raise TypeError(f"collation must be a mapping or a Collation, not {type(value).__name__}")


def _sort(value: Any) -> Mapping[str, Any] | None:
    if value is None:
        return None
    return index_document(value, "sort")


def validate_let(value: Any) -> Mapping[str, Any] | None:
    """A command's ``let`` (its variables): None, or a mapping; anything else is refused before sending."""
    if value is not None and type(value) is not dict and not isinstance(value, Mapping):
        raise TypeError(f"let must be an instance of dict or another Mapping, not {type(value).__name__}")
    return value


def _optional_bool(value: Any, name: str) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"{name} must be True, False or None, not {value!r}")
    return value


def validate_array_filters(value: Any) -> list[Mapping[str, Any]] | None:
    """An update's ``array_filters``: None, or a list (or tuple) of mappings, as a list."""
    if value is None:
        return None
    if not isinstance(value, list | tuple) or not all(isinstance(item, Mapping) for item in value):
        raise TypeError(f"array_filters must be a list of mappings, not {value!r}")
    return list(value)


def _namespace(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or "." not in value):
        raise ValueError(f"namespace must be 'database.collection', not {value!r}")
    return value


def validate_update(update: Any) -> Mapping[str, Any] | list[Any]:
    """An update is a document of ``$`` operators or an aggregation pipeline (a list)."""
    # The exact-type test spares the common dict the slower checks.
    if type(update) is not dict:
        if isinstance(update, list):
            if not update:
                raise ValueError("update cannot be an empty pipeline")
            return update
        if not isinstance(update, Mapping):
            raise TypeError(f"update must be a mapping or a pipeline (list), not {type(update).__name__}")
    document: Mapping[str, Any] = update
    if not document:
        raise ValueError("update cannot be empty")
    # The CRUD spec checks the first key only; the server refuses a document that mixes the two.
    if not next(iter(document)).startswith("$"):
        raise ValueError("update only works with $ operators (use replace_one to replace a document)")
    return document


def validate_replacement(replacement: Any) -> Mapping[str, Any]:
    """A replacement is a whole document: its first key is not a ``$`` operator."""
    if type(replacement) is not dict and not isinstance(replacement, Mapping):
        raise TypeError(f"replacement must be a mapping, not {type(replacement).__name__}")
    if replacement and next(iter(replacement)).startswith("$"):
        raise ValueError("replacement can not include $ operators (use update_one to update a document)")
    return replacement


def update_statement(
    filter: Any,
    update: Mapping[str, Any] | list[Any],
    upsert: bool | None,
    collation: Any,
    array_filters: Any,
    hint: Any,
    sort: Any,
    *,
    multi: bool | None,
) -> dict[str, Any]:
    """The statement of an ``update`` command sent alone (``update_one``, ``update_many``, ``replace_one``),
    made straight from the arguments with no model: each checked by the validator the models use, in their
    order, after ``update`` (checked by the caller with :func:`validate_update` or
    :func:`validate_replacement`, as the model would first)."""
    filter, collation, hint = _checked_filter_fields(filter, collation, hint)
    upsert, array_filters, sort = _checked_update_fields(upsert, array_filters, sort)
    return _update_document(filter, update, multi, upsert, collation, array_filters, hint, sort)


def _checked_filter_fields(
    filter: Any, collation: Any, hint: Any
) -> tuple[Mapping[str, Any], Mapping[str, Any] | None, str | dict[str, Any] | None]:
    """The filter, collation and hint of an update or delete, each checked by its validator, in the order
    the write models and the single writes both check them (the first bad one is the error raised)."""
    # The validators pass None through: they are called only for what was given.
    return (
        _filter(filter),
        None if collation is None else _collation(collation),
        None if hint is None else _hint(hint),
    )


def _checked_update_fields(
    upsert: Any, array_filters: Any, sort: Any
) -> tuple[bool | None, list[Mapping[str, Any]] | None, Mapping[str, Any] | None]:
    """The options an update adds to :func:`_checked_filter_fields`'s, checked after those, in this order."""
    return (
        None if upsert is None else _optional_bool(upsert, "upsert"),
        None if array_filters is None else validate_array_filters(array_filters),
        None if sort is None else _sort(sort),
    )


def _update_document(
    filter: Mapping[str, Any],
    update: Any,
    multi: bool | None,
    upsert: bool | None,
    collation: Mapping[str, Any] | None,
    array_filters: list[Mapping[str, Any]] | None,
    hint: str | dict[str, Any] | None,
    sort: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """An ``update`` statement from checked values, the options left out when None (``multi`` is None for a
    replacement, whose statement has none, as PyMongo's has none: a write error reports the same ``op``)."""
    statement: dict[str, Any] = {"q": filter, "u": update}
    if multi is not None:
        statement["multi"] = multi
    if upsert is not None:
        statement["upsert"] = upsert
    if collation is not None:
        statement["collation"] = collation
    if array_filters is not None:
        statement["arrayFilters"] = array_filters
    if hint is not None:
        statement["hint"] = hint
    if sort is not None:
        statement["sort"] = sort
    return statement


def delete_statement(filter: Any, collation: Any, hint: Any, *, multi: bool) -> dict[str, Any]:
    """The statement of a ``delete`` command sent alone (``delete_one``, ``delete_many``), made straight from
    the arguments with no model, each checked by the validator the models use, in their order."""
    filter, collation, hint = _checked_filter_fields(filter, collation, hint)
    return _delete_document(filter, multi, collation, hint)


def _delete_document(
    filter: Mapping[str, Any],
    multi: bool,
    collation: Mapping[str, Any] | None,
    hint: str | dict[str, Any] | None,
) -> dict[str, Any]:
    """A ``delete`` statement from checked values, the options left out when None."""
    statement: dict[str, Any] = {"q": filter, "limit": 0 if multi else 1}
    if collation is not None:
        statement["collation"] = collation
    if hint is not None:
        statement["hint"] = hint
    return statement


class WriteModel:
    """Base of the write models. ``namespace`` ("db.collection") is required by ``MongoClient.bulk_write`` and
    ignored by ``Collection.bulk_write``."""

    __slots__ = ("_namespace",)

    def __init__(self, namespace: str | None) -> None:
        self._namespace = _namespace(namespace)

    @property
    def namespace(self) -> str | None:
        """The ``"db.collection"`` namespace of the model in a client bulk write, else ``None``."""
        return self._namespace

    @property
    def has_hint(self) -> bool:
        """Whether the model carries an index hint."""
        return False


class InsertOne(WriteModel):
    """Insert ``document`` (an ``_id`` is generated and stored in it when it has none)."""

    __slots__ = ("_document",)

    def __init__(self, document: Any, namespace: str | None = None) -> None:
        super().__init__(namespace)
        if type(document) is not dict and not isinstance(document, Mapping):
            raise TypeError(f"document must be a mapping, not {type(document).__name__}")
        self._document = document

    @property
    def document(self) -> Any:
        """The document to insert."""
        return self._document

    def __repr__(self) -> str:
        return f"InsertOne({self._document!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._document == self._document

    __hash__ = None  # type: ignore[assignment]


class _FilteredModel(WriteModel):
    __slots__ = ("_collation", "_filter", "_hint")

    def __init__(self, filter: Any, collation: Any, hint: Any, namespace: str | None) -> None:
        super().__init__(namespace)
        self._filter, self._collation, self._hint = _checked_filter_fields(filter, collation, hint)

    @property
    def filter(self) -> Mapping[str, Any]:
        """The query filter selecting the documents."""
        return self._filter

    @property
    def collation(self) -> Mapping[str, Any] | None:
        """The collation the filter is matched with, or ``None``."""
        return self._collation

    @property
    def hint(self) -> str | dict[str, Any] | None:
        """The index hint (a name or a key document), or ``None``."""
        return self._hint

    @property
    def has_hint(self) -> bool:
        """Whether the model carries an index hint."""
        return self._hint is not None

    def _key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields())

    def _fields(self) -> tuple[str, ...]:
        return ("_filter", "_collation", "_hint", "_namespace")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._key() == self._key()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{name.lstrip('_')}={getattr(self, name)!r}" for name in self._fields())
        return f"{type(self).__name__}({inner})"


class _DeleteModel(_FilteredModel):
    __slots__ = ()

    def __init__(
        self, filter: Any, collation: Any = None, hint: Any = None, namespace: str | None = None
    ) -> None:
        super().__init__(filter, collation, hint, namespace)


class DeleteOne(_DeleteModel):
    """Delete at most one document matching ``filter``."""

    __slots__ = ()


class DeleteMany(_DeleteModel):
    """Delete every document matching ``filter``."""

    __slots__ = ()


class _UpdateModel(_FilteredModel):
    __slots__ = ("_array_filters", "_sort", "_update", "_upsert")

    def __init__(
        self,
        filter: Any,
        update: Any,
        upsert: bool | None,
        collation: Any,
        array_filters: Any,
        hint: Any,
        namespace: str | None,
        sort: Any,
    ) -> None:
        super().__init__(filter, collation, hint, namespace)
        self._update = update
        self._upsert, self._array_filters, self._sort = _checked_update_fields(upsert, array_filters, sort)

    @property
    def upsert(self) -> bool | None:
        """Whether to insert a document when none matches (``None``: the server's default, no)."""
        return self._upsert

    @property
    def array_filters(self) -> list[Mapping[str, Any]] | None:
        """The ``arrayFilters`` of the update, or ``None``."""
        return self._array_filters

    @property
    def sort(self) -> Mapping[str, Any] | None:
        """The sort choosing which matching document is written, or ``None``."""
        return self._sort

    def _fields(self) -> tuple[str, ...]:
        return (
            "_filter",
            "_update",
            "_upsert",
            "_collation",
            "_array_filters",
            "_hint",
            "_sort",
            "_namespace",
        )


class UpdateOne(_UpdateModel):
    """Update at most one document matching ``filter`` with ``update`` (``$`` operators or a pipeline);
    ``sort`` picks which one when several match."""

    __slots__ = ()

    def __init__(
        self,
        filter: Any,
        update: Any,
        upsert: bool | None = None,
        collation: Any = None,
        array_filters: Any = None,
        hint: Any = None,
        namespace: str | None = None,
        sort: Any = None,
    ) -> None:
        super().__init__(
            filter, validate_update(update), upsert, collation, array_filters, hint, namespace, sort
        )

    @property
    def update(self) -> Mapping[str, Any] | list[Any]:
        """The update document or pipeline."""
        return self._update  # type: ignore[no-any-return]


class UpdateMany(_UpdateModel):
    """Update every document matching ``filter`` with ``update`` (``$`` operators or a pipeline)."""

    __slots__ = ()

    def __init__(
        self,
        filter: Any,
        update: Any,
        upsert: bool | None = None,
        collation: Any = None,
        array_filters: Any = None,
        hint: Any = None,
        namespace: str | None = None,
    ) -> None:
        super().__init__(
            filter, validate_update(update), upsert, collation, array_filters, hint, namespace, None
        )

    @property
    def update(self) -> Mapping[str, Any] | list[Any]:
        """The update document or pipeline."""
        return self._update  # type: ignore[no-any-return]


class ReplaceOne(_UpdateModel):
    """Replace at most one document matching ``filter`` with ``replacement``; ``sort`` picks which one."""

    __slots__ = ()

    def __init__(
        self,
        filter: Any,
        replacement: Any,
        upsert: bool | None = None,
        collation: Any = None,
        hint: Any = None,
        namespace: str | None = None,
        sort: Any = None,
    ) -> None:
        super().__init__(
            filter, validate_replacement(replacement), upsert, collation, None, hint, namespace, sort
        )

    @property
    def replacement(self) -> Mapping[str, Any]:
        """The replacement document."""
        return self._update  # type: ignore[no-any-return]


# What the bulk writes (mongio.operations.bulk, mongio.operations.client_bulk) and the single writes
# (mongio.operations.crud) send for a model, made from the model's public fields: the models stay values with
# PyMongo's surface, and each wire form is written once, here.

def write_kind(model: WriteModel) -> int:
    """The command a model's write goes in: ``KIND_INSERT``, ``KIND_UPDATE`` or ``KIND_DELETE``."""
    if isinstance(model, _UpdateModel):
        return KIND_UPDATE
    if isinstance(model, _DeleteModel):
        return KIND_DELETE
    return KIND_INSERT


def is_multi(model: WriteModel) -> bool:
    """Whether the model's write may touch several documents (``UpdateMany``, ``DeleteMany``)."""
    return isinstance(model, UpdateMany | DeleteMany)


def _update_of(model: _UpdateModel) -> Mapping[str, Any] | list[Any]:
    """The update document or pipeline of an update model, the replacement of a ``ReplaceOne``."""
    if isinstance(model, ReplaceOne):
        return model.replacement
    if isinstance(model, UpdateOne | UpdateMany):
        return model.update
    raise TypeError(f"{type(model).__name__} is not an update model mongio knows")


def _not_a_statement(model: WriteModel) -> TypeError:
    return TypeError(f"{type(model).__name__} has no update or delete statement")


def model_statement(model: WriteModel) -> dict[str, Any]:
    """The statement of a collection-level ``update`` or ``delete`` command for an update or delete model."""
    if isinstance(model, _UpdateModel):
        return _update_document(
            model.filter,
            _update_of(model),
            None if isinstance(model, ReplaceOne) else is_multi(model),
            model.upsert,
            model.collation,
            model.array_filters,
            model.hint,
            model.sort,
        )
    if isinstance(model, _DeleteModel):
        return _delete_document(model.filter, is_multi(model), model.collation, model.hint)
    raise _not_a_statement(model)


def client_bulk_op(model: WriteModel, ns_index: int) -> dict[str, Any]:
    """The entry of a client-level ``bulkWrite`` command's ``ops`` for an update or delete model, naming its
    namespace by ``ns_index`` (its place in the command's ``nsInfo``)."""
    if isinstance(model, _UpdateModel):
        op: dict[str, Any] = {
            "update": ns_index,
            "filter": model.filter,
            "updateMods": _update_of(model),
            "multi": is_multi(model),
        }
        if model.upsert is not None:
            op["upsert"] = model.upsert
        if model.array_filters is not None:
            op["arrayFilters"] = model.array_filters
        _add_filter_options(op, model)
        if model.sort is not None:
            op["sort"] = model.sort
        return op
    if isinstance(model, _DeleteModel):
        op = {"delete": ns_index, "filter": model.filter, "multi": is_multi(model)}
        _add_filter_options(op, model)
        return op
    raise _not_a_statement(model)


def _add_filter_options(op: dict[str, Any], model: _FilteredModel) -> None:
    if model.hint is not None:
        op["hint"] = model.hint
    if model.collation is not None:
        op["collation"] = model.collation


# Another library's write model (PyMongo's) -> mongio's, by class name: the attributes PyMongo's models keep
# their arguments in, read once when the model is handed to a bulk write. They are private to PyMongo, which
# gives its write models no public accessor for any of them (not even InsertOne's document), so reading them
# is the only way to take its models; a model whose attributes are not there is refused with a TypeError.
_FOREIGN_MODELS: dict[str, Callable[[Any], WriteModel]] = {
    "InsertOne": lambda m: InsertOne(m._doc, m._namespace),
    "DeleteOne": lambda m: DeleteOne(m._filter, m._collation, m._hint, m._namespace),
    "DeleteMany": lambda m: DeleteMany(m._filter, m._collation, m._hint, m._namespace),
    "ReplaceOne": lambda m: ReplaceOne(m._filter, m._doc, m._upsert, m._collation, m._hint, m._namespace, m._sort),
    "UpdateOne": lambda m: UpdateOne(
        m._filter, m._doc, m._upsert, m._collation, m._array_filters, m._hint, m._namespace, m._sort
    ),
    "UpdateMany": lambda m: UpdateMany(
        m._filter, m._doc, m._upsert, m._collation, m._array_filters, m._hint, m._namespace
    ),
}


def as_write_model(model: Any) -> WriteModel:
    """``model`` as one of mongio's write models: itself, or the same write read from PyMongo's model of the
    same name. Anything else raises ``TypeError``."""
    if isinstance(model, WriteModel):
        return model
    adapt = _FOREIGN_MODELS.get(type(model).__name__)
    if adapt is not None and type(model).__module__.split(".")[0] == "pymongo":
        try:
            return adapt(model)
        except AttributeError:
            pass
    raise TypeError(f"{model!r} is not a valid write model (InsertOne, UpdateOne, DeleteMany, ...)")


class IndexModel:
    """One index for ``create_indexes``: its keys and options (``name``, ``unique``, ``sparse``,
    ``expireAfterSeconds``, ``partialFilterExpression``, ``collation``, ...). The name defaults to the one the
    server would give, e.g. ``a_1_b_-1``."""

    __slots__ = ("_document",)

    def __init__(self, keys: Any, **kwargs: Any) -> None:
        key = index_document(keys)
        document: dict[str, Any] = {"key": key}
        name = kwargs.pop("name", None)
        document["name"] = gen_index_name(key) if name is None else name
        collation = _collation(kwargs.pop("collation", None))
        if collation is not None:
            document["collation"] = collation
        document.update(kwargs)
        self._document = document

    @property
    def document(self) -> dict[str, Any]:
        """The index specification as ``createIndexes`` takes it."""
        return self._document

    def __repr__(self) -> str:
        return f"IndexModel({self._document!r})"


class SearchIndexModel:
    """One Atlas Search (or vector search) index for ``create_search_indexes``."""

    __slots__ = ("_document",)

    def __init__(
        self, definition: Mapping[str, Any], name: str | None = None, type: str | None = None, **kwargs: Any
    ) -> None:
        document: dict[str, Any] = {}
        if name is not None:
            document["name"] = name
        if type is not None:
            document["type"] = type
        document["definition"] = definition
        document.update(kwargs)
        self._document = document

    @property
    def document(self) -> dict[str, Any]:
        """The search index definition as sent to ``createSearchIndexes``."""
        return self._document

    def __repr__(self) -> str:
        return f"SearchIndexModel({self._document!r})"


def index_model_document(index: Any) -> dict[str, Any] | None:
    """The specification of an :class:`IndexModel`, or of another library's index model (PyMongo's, whose
    ``document`` holds the same ``createIndexes`` entry); None for anything else."""
    if isinstance(index, IndexModel):
        return index.document
    document = getattr(index, "document", None) if not isinstance(index, Mapping) else None
    if isinstance(document, Mapping) and "key" in document and "name" in document:
        return dict(document)
    return None
