"""The PyMongo-typed mode: ``MongoClient(..., pymongo_types=True)``, or ``pymongoTypes=true`` in the URI.

For applications and libraries typed against PyMongo's classes (pydantic models declared on
``bson.ObjectId``, ODMs such as Beanie): in this mode

- the documents a client decodes hold PyMongo's ``bson`` values (``bson.ObjectId``, ``bson.Int64``,
  ``bson.Timestamp``, ``bson.Binary``, ``bson.Decimal128``, ``bson.Regex``, ``bson.Code``, ``bson.DBRef``,
  ``bson.MinKey``/``MaxKey``, ``bson.DatetimeMS``), and the deprecated BSON types decode as PyMongo decodes
  them (symbol as ``str``, undefined as ``None``, DBPointer as ``bson.DBRef``);
- the errors mongio raises are also instances of the PyMongo class of the same name
  (``except pymongo.errors.DuplicateKeyError`` catches mongio's ``DuplicateKeyError``, ``except
  gridfs.errors.NoFile`` mongio's GridFS ``NoFile``).

Values PyMongo's ``bson`` made are written exactly whether or not the mode is on (the encoder knows them by
their ``_type_marker``), and PyMongo's ``CodecOptions`` are accepted wherever mongio's are.

This is the only module of mongio that imports PyMongo, and only when a client turns the mode on; without
PyMongo installed that client raises :class:`~mongio.errors.ConfigurationError`. Decoding stays in the
compiled element loops: the conversions ride on the codec's per-type decoder table, so a value of a type
that needs no conversion (``str``, ``int``, ``float``, documents, arrays) costs one table lookup.

The error classes are changed once for the whole process, the first time any client turns the mode on:
each of mongio's error classes that has a PyMongo namesake gains it as an extra base class. mongio's own
attributes and methods still come first, so an error behaves as before; it is only caught by more
``except`` clauses.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from mongio.bson._type_marker import type_marker
from mongio.bson.code import Code
from mongio.bson.codec_options import CodecOptions, as_codec_options
from mongio.bson.datetime_ms import DatetimeMS
from mongio.bson.dbref import DBRef
from mongio.bson.decimal128 import Decimal128
from mongio.bson.deprecated import DBPointer, Symbol, Undefined
from mongio.bson.int64 import Int64
from mongio.bson.minmax import MaxKey, MinKey
from mongio.bson.objectid import ObjectId
from mongio.bson.raw import RawBSONDocument
from mongio.bson.regex import Regex
from mongio.bson.timestamp import Timestamp

__all__ = ["PyMongoTypedCodecOptions", "enable", "typed_codec_options"]

Transform = Callable[[Any], Any]


@functools.cache
def _pymongo() -> tuple[Any, Any, Any]:
    """PyMongo's ``bson``, ``bson.errors`` and ``pymongo.errors`` modules, imported on first use."""
    try:
        import bson
        import bson.errors
        import pymongo.errors
    except ImportError as exc:
        from mongio.errors import ConfigurationError

        raise ConfigurationError(
            "pymongo_types=True (pymongoTypes=true) decodes to PyMongo's bson classes, so it needs PyMongo "
            f"installed: {exc}"
        ) from exc
    return bson, bson.errors, pymongo.errors


@functools.cache
def _conversions() -> dict[type, Transform]:
    """mongio's decoded type -> the function making PyMongo's value of it."""
    bson = _pymongo()[0]
    p_objectid, p_int64, p_timestamp = bson.ObjectId, bson.Int64, bson.Timestamp
    p_binary, p_code, p_regex, p_dbref = bson.Binary, bson.Code, bson.Regex, bson.DBRef
    p_decimal128, p_datetime_ms = bson.Decimal128, bson.DatetimeMS
    p_min_key, p_max_key = bson.MinKey(), bson.MaxKey()
    str_flags_to_int = bson.regex.str_flags_to_int
    from mongio.bson.binary import Binary

    def dbref(value: DBRef) -> Any:
        return p_dbref(value.collection, value.id, value.database, value.extra)

    return {
        ObjectId: lambda value: p_objectid(value.binary),
        Int64: p_int64,
        Timestamp: lambda value: p_timestamp(value.time, value.inc),
        Binary: lambda value: p_binary(bytes(value), value.subtype),
        Code: lambda value: p_code(str(value), value.scope),
        # PyMongo's decoder gives a Regex its flags as a plain int (its constructor would keep a RegexFlag).
        Regex: lambda value: p_regex(value.pattern, int(str_flags_to_int(value.flags))),
        Decimal128: lambda value: p_decimal128.from_bid(value.bid),
        DBRef: dbref,
        DatetimeMS: lambda value: p_datetime_ms(int(value)),
        MinKey: lambda value: p_min_key,
        MaxKey: lambda value: p_max_key,
        Symbol: str,
        Undefined: lambda value: None,
        DBPointer: lambda value: p_dbref(value.namespace, p_objectid(value.id.binary)),
    }


def _pymongo_class(converted_from: type) -> type | None:
    # The PyMongo class a conversion makes, so an application's decoder keyed by it still applies.
    return getattr(_pymongo()[0], converted_from.__name__, None)


def _compose(first: Transform, then: Transform) -> Transform:
    return lambda value: then(first(value))


def typed_transforms(registry_transforms: dict[Any, Transform]) -> dict[Any, Transform]:
    """The decoder table of a PyMongo-typed codec: every conversion, composed with the application's decoder
    for the PyMongo class it makes; an application decoder keyed by a mongio class takes the place of the
    conversion."""
    table = dict(registry_transforms)
    for mongio_type, convert in _conversions().items():
        if mongio_type in registry_transforms:
            continue
        pymongo_type = _pymongo_class(mongio_type)
        then = registry_transforms.get(pymongo_type) if pymongo_type is not None else None
        table[mongio_type] = convert if then is None else _compose(convert, then)
    return table


class PyMongoTypedCodecOptions(CodecOptions):
    """:class:`CodecOptions` whose decoded documents hold PyMongo's ``bson`` values; the databases,
    collections and cursors derived from an object with these options keep them, whatever
    ``codec_options`` the application passes."""

    __slots__ = ()

    def _decoder_transforms(self) -> dict[Any, Transform]:
        return typed_transforms(super()._decoder_transforms())

    def _hot_type_factories(self) -> tuple[Any, Any, Any]:
        bson = _pymongo()[0]
        return (bson.ObjectId, bson.Timestamp, bson.Int64)

    def _decoding_tzinfo(self) -> Any:
        # PyMongo decodes aware datetimes with bson.tz_util.utc, which datetime.UTC does not compare equal to.
        if self.tz_aware and self.tzinfo is None:
            return _pymongo()[0].tz_util.utc
        return self.tzinfo

    def new_object_id(self) -> Any:
        return _pymongo()[0].ObjectId()

    def _packs_inserts(self) -> bool:
        return False

    def _raw_document_options(self) -> Any:
        # PyMongo's RawBSONDocument decodes itself lazily with PyMongo's codec: it is given PyMongo's options.
        if self.document_class is RawBSONDocument or type_marker(self.document_class) != RawBSONDocument._type_marker:
            return self
        codec_options = _pymongo()[0].codec_options
        fields = {name: getattr(self, name) for name in CodecOptions._FIELDS}
        registry = fields["type_registry"]
        fields["type_registry"] = codec_options.TypeRegistry(registry.codecs, registry.fallback_encoder)
        return codec_options.CodecOptions(**fields)

    def resolve(self, given: Any) -> CodecOptions:
        if given is None or isinstance(given, PyMongoTypedCodecOptions):
            return self if given is None else given
        return typed_codec_options(as_codec_options(given))


def typed_codec_options(options: CodecOptions) -> PyMongoTypedCodecOptions:
    """``options`` in the PyMongo-typed mode."""
    if isinstance(options, PyMongoTypedCodecOptions):
        return options
    fields = {name: getattr(options, name) for name in CodecOptions._FIELDS}
    return PyMongoTypedCodecOptions(**fields)


@functools.cache
def _graft_error_classes() -> None:
    import gridfs.errors

    import mongio.bson.errors
    import mongio.errors
    import mongio.gridfs.errors

    _bson, bson_errors, pymongo_errors = _pymongo()
    # The roots (MongioError, BSONError) keep Exception as their only base: Python refuses to give them
    # PyMongo's roots, whose instance layout differs, so each class below them gains its namesake instead
    # (and through it PyMongo's root). Bases first, so each new base follows the bases a class already has.
    roots = (mongio.errors.MongioError, mongio.bson.errors.BSONError)
    grafts = (
        (mongio.errors, pymongo_errors),
        (mongio.bson.errors, bson_errors),
        (mongio.gridfs.errors, gridfs.errors),
    )
    for module, namesakes in grafts:
        classes = [
            value
            for value in vars(module).values()
            if inspect.isclass(value)
            and issubclass(value, Exception)
            and value.__module__ == module.__name__
            and value not in roots
        ]
        for error_class in sorted(classes, key=lambda cls: len(cls.__mro__)):
            namesake = getattr(namesakes, error_class.__name__, None)
            if isinstance(namesake, type) and not issubclass(error_class, namesake):
                error_class.__bases__ = (*error_class.__bases__, namesake)


def enable() -> None:
    """Check that PyMongo can be imported and make mongio's errors PyMongo's too (once per process)."""
    _conversions()
    _graft_error_classes()
