"""Options that control how documents are encoded and decoded, and the custom type registry."""

from __future__ import annotations

import abc
import datetime
import sys
import typing
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import Any, Final

from mongio.bson._type_marker import type_marker
from mongio.bson.binary import ALL_UUID_REPRESENTATIONS, UUID_REPRESENTATION_NAMES, UuidRepresentation
from mongio.bson.datetime_ms import DatetimeConversion
from mongio.bson.objectid import ObjectId

__all__ = [
    "ALL_UUID_REPRESENTATIONS",
    "DEFAULT_CODEC_OPTIONS",
    "UUID_REPRESENTATION_NAMES",
    "CodecOptions",
    "TypeCodec",
    "TypeDecoder",
    "TypeEncoder",
    "TypeRegistry",
    "as_codec_options",
]


class TypeEncoder(abc.ABC):
    """Teaches the encoder one Python type: ``python_type`` and ``transform_python(value)`` returning a value
    the encoder already knows. The type must match exactly (subclasses are not covered) and cannot be one
    the encoder already handles."""

    @property
    @abc.abstractmethod
    def python_type(self) -> Any:
        """The Python type this encoder transforms."""

    @abc.abstractmethod
    def transform_python(self, value: Any) -> Any:
        """Convert ``value`` into something BSON can encode."""


class TypeDecoder(abc.ABC):
    """Teaches the decoder to post-process one decoded type: ``bson_type`` (the Python type the decoder
    produces, e.g. :class:`~mongio.bson.decimal128.Decimal128`) and ``transform_bson(value)``."""

    @property
    @abc.abstractmethod
    def bson_type(self) -> Any:
        """The decoded Python type this decoder transforms."""

    @abc.abstractmethod
    def transform_bson(self, value: Any) -> Any:
        """Convert a decoded value into the application's type."""


class TypeCodec(TypeEncoder, TypeDecoder):
    """Both a :class:`TypeEncoder` and a :class:`TypeDecoder`."""


Codec = TypeEncoder | TypeDecoder
Fallback = Callable[[Any], Any]


def _built_in_encodable_types() -> tuple[type, ...]:
    # Imported late: the codec imports this module.
    from mongio.bson._encoder import BUILT_IN_TYPES

    built_in: tuple[type, ...] = BUILT_IN_TYPES
    return built_in


def _is_encoder(codec: Any) -> bool:
    # PyMongo's codecs subclass PyMongo's abstract classes, not these: they are recognised by what they define.
    return isinstance(codec, TypeEncoder) or (
        hasattr(codec, "python_type") and callable(getattr(codec, "transform_python", None))
    )


def _is_decoder(codec: Any) -> bool:
    return isinstance(codec, TypeDecoder) or (
        hasattr(codec, "bson_type") and callable(getattr(codec, "transform_bson", None))
    )


def _encoded_by_marker(python_type: Any) -> int | None:
    """The ``_type_marker`` by which the encoder writes ``python_type`` itself (PyMongo's bson types carry
    one), or None."""
    from mongio.bson._encoder import KNOWN_TYPE_MARKERS

    marker = type_marker(python_type) if isinstance(python_type, type) else None
    return marker if marker in KNOWN_TYPE_MARKERS else None


class TypeRegistry:
    """Custom type encoders/decoders and a ``fallback_encoder`` called (once) for values nothing else can
    encode; it must return something encodable."""

    __slots__ = ("_decoder_map", "_encoder_map", "_fallback_encoder", "_type_codecs")

    def __init__(
        self, type_codecs: Iterable[Codec] | None = None, fallback_encoder: Fallback | None = None
    ) -> None:
        self._type_codecs: list[Codec] = list(type_codecs or [])
        if fallback_encoder is not None and not callable(fallback_encoder):
            raise TypeError("fallback_encoder must be callable")
        self._fallback_encoder = fallback_encoder
        self._encoder_map: dict[Any, Callable[[Any], Any]] = {}
        self._decoder_map: dict[Any, Callable[[Any], Any]] = {}
        codec: Any  # mongio's codec classes, or any object defining their methods (PyMongo's)
        for codec in self._type_codecs:
            known = False
            if _is_encoder(codec):
                known = True
                for built_in in _built_in_encodable_types():
                    if isinstance(codec.python_type, type) and issubclass(codec.python_type, built_in):
                        raise TypeError(
                            f"TypeEncoders cannot change how built-in types are encoded "
                            f"({codec!r} transforms {codec.python_type.__name__})"
                        )
                marker = _encoded_by_marker(codec.python_type)
                if marker is not None:
                    raise TypeError(
                        f"TypeEncoders cannot change how built-in types are encoded ({codec!r} transforms "
                        f"{codec.python_type.__name__}, whose _type_marker {marker} the encoder writes itself)"
                    )
                self._encoder_map[codec.python_type] = codec.transform_python
            if _is_decoder(codec):
                known = True
                self._decoder_map[codec.bson_type] = codec.transform_bson
            if not known:
                raise TypeError(f"{codec!r} is neither a TypeEncoder nor a TypeDecoder")

    @property
    def codecs(self) -> list[Codec]:
        """The registered codecs, in order."""
        return list(self._type_codecs)

    @property
    def fallback_encoder(self) -> Fallback | None:
        """The fallback encoder, or None."""
        return self._fallback_encoder

    def __eq__(self, other: object) -> bool:
        # PyMongo's TypeRegistry too, by the same codecs: its own __eq__ answers NotImplemented for ours, so
        # Python asks this one and the two compare equal both ways.
        if _is_pymongo_type_registry(other):
            other = _from_pymongo_registry(other)
        if not isinstance(other, TypeRegistry):
            return NotImplemented
        return (
            self._decoder_map == other._decoder_map
            and self._encoder_map == other._encoder_map
            and self._fallback_encoder == other._fallback_encoder
        )

    def __hash__(self) -> int:
        return hash((tuple(map(id, self._type_codecs)), self._fallback_encoder))

    def __repr__(self) -> str:
        return f"TypeRegistry(type_codecs={self._type_codecs!r}, fallback_encoder={self._fallback_encoder!r})"


_EMPTY_REGISTRY: Final = TypeRegistry()


def _is_pymongo_type_registry(value: object) -> bool:
    """Whether ``value`` is PyMongo's ``bson.codec_options.TypeRegistry``, without importing PyMongo: one of its
    objects exists only once its module was imported, so an unloaded module answers False."""
    module = sys.modules.get("bson.codec_options")
    cls = vars(module).get("TypeRegistry") if module is not None else None
    return isinstance(cls, type) and isinstance(value, cls)


def _from_pymongo_registry(registry: Any) -> TypeRegistry:
    """PyMongo's ``TypeRegistry`` as mongio's: the same codecs (PyMongo's codec classes define the methods
    mongio's registry calls) and fallback encoder."""
    return TypeRegistry(registry.codecs, registry.fallback_encoder)


class CodecOptions:
    """Immutable encode/decode settings; derive variants with :meth:`with_options`.

    - ``document_class``: the mapping type decoded documents become (``dict``, ``SON``, any
      ``MutableMapping`` class, or :class:`~mongio.bson.raw.RawBSONDocument` for lazily decoded documents).
    - ``tz_aware``: decode datetimes as aware (UTC, or ``tzinfo`` when set) instead of naive UTC.
    - ``uuid_representation``: how ``uuid.UUID`` values are stored and which subtype decodes to them.
    - ``unicode_decode_error_handler``: the ``bytes.decode`` error handler for strings ("strict" raises
      :class:`~mongio.bson.errors.InvalidBSON` on bad UTF-8; "replace" and others substitute).
    - ``tzinfo``: the zone decoded datetimes are converted to (needs ``tz_aware``).
    - ``type_registry``: custom :class:`TypeEncoder`/:class:`TypeDecoder` codecs and the fallback encoder.
    - ``datetime_conversion``: see :class:`~mongio.bson.datetime_ms.DatetimeConversion`.

    Subclasses that add options extend ``_FIELDS``, declare matching ``__slots__`` and, after calling
    ``super().__init__``, set them with ``object.__setattr__``; :meth:`with_options`, equality, pickling and
    ``repr`` then cover the new options too.
    """

    __slots__ = (
        "_cache",
        "datetime_conversion",
        "document_class",
        "type_registry",
        "tz_aware",
        "tzinfo",
        "unicode_decode_error_handler",
        "uuid_representation",
    )

    _FIELDS: tuple[str, ...] = (
        "document_class",
        "tz_aware",
        "uuid_representation",
        "unicode_decode_error_handler",
        "tzinfo",
        "type_registry",
        "datetime_conversion",
    )

    document_class: type[MutableMapping[str, Any]] | Any
    tz_aware: bool
    uuid_representation: int
    unicode_decode_error_handler: str
    tzinfo: datetime.tzinfo | None
    type_registry: TypeRegistry
    datetime_conversion: DatetimeConversion
    _cache: dict[str, Any]

    def __init__(
        self,
        document_class: type[Mapping[str, Any]] | Any = dict,
        tz_aware: bool = False,
        uuid_representation: int = UuidRepresentation.UNSPECIFIED,
        unicode_decode_error_handler: str = "strict",
        tzinfo: datetime.tzinfo | None = None,
        type_registry: TypeRegistry | None = None,
        datetime_conversion: int | None = DatetimeConversion.DATETIME,
    ) -> None:
        origin = typing.get_origin(document_class)
        if isinstance(origin, type):
            # A parameterised class (SON[str, Any], dict[str, Any]) is an annotation of its class: documents
            # decode as that class.
            document_class = origin
        if not isinstance(document_class, type) or not (
            issubclass(document_class, MutableMapping) or getattr(document_class, "_type_marker", None) == 101
        ):
            raise TypeError(
                "document_class must be dict, SON, RawBSONDocument or another collections.abc.MutableMapping "
                f"subclass, not {document_class!r}"
            )
        if not isinstance(tz_aware, bool):
            raise TypeError(f"tz_aware must be True or False, not {tz_aware!r}")
        if uuid_representation not in set(UuidRepresentation):
            raise ValueError(
                f"uuid_representation must be a UuidRepresentation value, not {uuid_representation!r}"
            )
        if not isinstance(unicode_decode_error_handler, str):
            raise ValueError("unicode_decode_error_handler must be a str naming a codecs error handler")
        if tzinfo is not None:
            if not isinstance(tzinfo, datetime.tzinfo):
                raise TypeError(f"tzinfo must be a datetime.tzinfo, not {tzinfo!r}")
            if not tz_aware:
                raise ValueError("tzinfo can only be set together with tz_aware=True")
        if type_registry is None:
            type_registry = _EMPTY_REGISTRY
        elif _is_pymongo_type_registry(type_registry):
            type_registry = _from_pymongo_registry(type_registry)
        elif not isinstance(type_registry, TypeRegistry):
            raise TypeError(f"type_registry must be a TypeRegistry, not {type_registry!r}")
        if datetime_conversion is None:
            datetime_conversion = DatetimeConversion.DATETIME
        try:
            datetime_conversion = DatetimeConversion(datetime_conversion)
        except ValueError:
            raise ValueError(
                f"datetime_conversion must be a DatetimeConversion, not {datetime_conversion!r}"
            ) from None
        setter = object.__setattr__
        setter(self, "document_class", document_class)
        setter(self, "tz_aware", tz_aware)
        setter(self, "uuid_representation", UuidRepresentation(uuid_representation))
        setter(self, "unicode_decode_error_handler", unicode_decode_error_handler)
        setter(self, "tzinfo", tzinfo)
        setter(self, "type_registry", type_registry)
        setter(self, "datetime_conversion", datetime_conversion)
        # Per-options state the codec derives once (e.g. its decoding context), not part of the value.
        setter(self, "_cache", {})

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; use with_options()")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _arguments(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._FIELDS}

    def with_options(self, **kwargs: Any) -> CodecOptions:
        """A copy with the given options changed, of the same class."""
        unknown = set(kwargs) - set(self._FIELDS)
        if unknown:
            raise TypeError(f"unknown option(s) for {type(self).__name__}: {', '.join(sorted(unknown))}")
        arguments = self._arguments()
        arguments.update(kwargs)
        return type(self)(**arguments)

    def _decoder_transforms(self) -> dict[Any, Callable[[Any], Any]]:
        """Decoded type -> the function every decoded value of exactly that type is passed through: the type
        registry's decoders here; a subclass that decodes to other classes adds its conversions."""
        return dict(self.type_registry._decoder_map)

    def _hot_type_factories(self) -> tuple[Any, Any, Any] | None:
        """``(objectid_from_bytes, timestamp_from_time_and_inc, int64_from_int)`` for the compiled element loops
        to make those types with, or None for mongio's own. Only a speed-up: whatever they make must be what
        :meth:`_decoder_transforms` turns mongio's values into, since the Python loops take that way."""
        return None

    def _decoding_tzinfo(self) -> datetime.tzinfo | None:
        """The zone aware datetimes are decoded in: ``tzinfo`` (None: UTC as ``datetime.UTC``); a subclass
        that decodes to another library's values may name that library's UTC object instead."""
        return self.tzinfo

    def _raw_document_options(self) -> Any:
        """The codec options a raw ``document_class`` is constructed with (``document_class(bson, options)``):
        these; a subclass whose raw class is another library's passes options that library understands."""
        return self

    def new_object_id(self) -> Any:
        """Internal, not part of the API: a new ObjectId of the class these options decode ObjectIds to, for
        an ``_id`` the driver generates (an inserted document's, a GridFS file's). The PyMongo-typed mode's
        options (:mod:`mongio.pymongo_types`) make PyMongo's."""
        return ObjectId()

    def _packs_inserts(self) -> bool:
        """Whether an insert's documents may be encoded in one compiled pass, which makes the ids it generates
        as ``ObjectId()`` does; False when :meth:`new_object_id` makes ids of another class."""
        return True

    def resolve(self, given: Any) -> CodecOptions:
        """The options a child (database, collection, cursor) of an object with these options uses when the
        application passes ``given``: these when ``given`` is None, else ``given`` (PyMongo's
        ``CodecOptions`` accepted too). A subclass may keep its children in its own mode."""
        if given is None:
            return self
        return as_codec_options(given)

    def codec_options(self) -> CodecOptions:
        """These options as a plain :class:`CodecOptions` (dropping any options a subclass adds)."""
        return CodecOptions(**{name: getattr(self, name) for name in CodecOptions._FIELDS})

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CodecOptions):
            return type(self) is type(other) and self._arguments() == other._arguments()
        if _is_pymongo_codec_options(other):
            # PyMongo's (a named tuple, whose __eq__ answers NotImplemented for ours): equal, both ways, when
            # they decode and encode alike, whichever of mongio's classes (a PyMongo-typed mode's too) this is.
            return self._arguments() == as_codec_options(other)._arguments()
        return NotImplemented

    def __hash__(self) -> int:
        return hash((type(self), *self._arguments().values()))

    def __repr__(self) -> str:
        body = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._FIELDS)
        return f"{type(self).__name__}({body})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self._arguments()))


def _is_pymongo_codec_options(value: Any) -> bool:
    """Whether ``value`` is PyMongo's ``CodecOptions``, without importing PyMongo: one exists only once its
    module is loaded."""
    module = sys.modules.get("bson.codec_options")
    cls = vars(module).get("CodecOptions") if module is not None else None
    return isinstance(cls, type) and isinstance(value, cls)


def as_codec_options(given: Any) -> CodecOptions:
    """``given`` as mongio's :class:`CodecOptions`: itself, or the same settings read from PyMongo's
    ``CodecOptions`` (a named tuple of the same seven fields, recognised by its ``_asdict``)."""
    if isinstance(given, CodecOptions):
        return given
    as_dict = getattr(given, "_asdict", None)
    fields = as_dict() if callable(as_dict) else None
    if not isinstance(fields, dict) or set(fields) != set(CodecOptions._FIELDS):
        raise TypeError(f"codec_options must be a CodecOptions, not {type(given).__name__}")
    return CodecOptions(**fields)  # which takes PyMongo's TypeRegistry as its own


def _rebuild(cls: type[CodecOptions], arguments: dict[str, Any]) -> CodecOptions:
    return cls(**arguments)


DEFAULT_CODEC_OPTIONS: Final = CodecOptions()
