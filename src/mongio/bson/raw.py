"""RawBSONDocument: a read-only mapping over BSON bytes, decoding each field only when it is read.

Useful to pass documents through untouched (re-encoding copies the bytes as they are) or to read a few
fields of large documents. Decode with ``CodecOptions(document_class=RawBSONDocument)`` to get every
document (and every embedded document) as a :class:`RawBSONDocument`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

from mongio.bson._type_marker import type_marker
from mongio.bson.errors import InvalidBSON

if TYPE_CHECKING:
    from mongio.bson.codec_options import CodecOptions

__all__ = ["DEFAULT_RAW_BSON_OPTIONS", "RawBSONDocument"]

_RAW_TYPE_MARKER: Final = 101


class RawBSONDocument(Mapping[str, Any]):
    """A BSON document kept as bytes.

    The outer length and terminator are checked when it is made; the field names and value positions are
    indexed on first access, and each value is decoded (and cached) when it is first read, so malformed
    content inside raises :class:`~mongio.bson.errors.InvalidBSON` at that point. Embedded documents are
    themselves :class:`RawBSONDocument` instances.
    """

    __slots__ = ("__codec_options", "__index", "__raw", "__values")

    _type_marker = _RAW_TYPE_MARKER

    def __init__(
        self, bson_bytes: bytes | bytearray | memoryview, codec_options: CodecOptions | None = None
    ) -> None:
        data = bytes(bson_bytes)
        if len(data) < 5:
            raise InvalidBSON(f"a BSON document needs at least 5 bytes, got {len(data)}")
        size = int.from_bytes(data[:4], "little", signed=True)
        if size != len(data):
            raise InvalidBSON(
                f"the BSON document's length field says {size} bytes but {len(data)} were given"
            )
        if data[-1] != 0:
            raise InvalidBSON("the BSON document does not end with a NUL byte")
        if codec_options is None:
            codec_options = DEFAULT_RAW_BSON_OPTIONS
        elif getattr(codec_options.document_class, "_type_marker", None) != _RAW_TYPE_MARKER:
            raise TypeError(
                "RawBSONDocument needs codec options whose document_class is RawBSONDocument, "
                f"not {codec_options.document_class!r}"
            )
        self.__raw = data
        self.__codec_options = codec_options
        self.__index: dict[str, tuple[int, int]] | None = None
        self.__values: dict[str, Any] = {}

    @property
    def raw(self) -> bytes:
        """The document's BSON bytes."""
        return self.__raw

    @property
    def codec_options(self) -> CodecOptions:
        """The options fields are decoded with."""
        return self.__codec_options

    def _element_index(self) -> dict[str, tuple[int, int]]:
        index = self.__index
        if index is None:
            from mongio.bson._decoder import index_elements

            index = self.__index = index_elements(self.__raw, self.__codec_options)
        return index

    def __getitem__(self, key: str) -> Any:
        values = self.__values
        if key in values:
            return values[key]
        start, stop = self._element_index()[key]
        from mongio.bson._decoder import decode_element

        value = values[key] = decode_element(self.__raw, start, stop, self.__codec_options)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._element_index())

    def __len__(self) -> int:
        return len(self._element_index())

    def __contains__(self, key: object) -> bool:
        return key in self._element_index()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RawBSONDocument):
            return self.__raw == other.raw
        if type_marker(other) == _RAW_TYPE_MARKER:
            # Another library's raw document (PyMongo's): the same bytes are the same document.
            return self.__raw == getattr(other, "raw", None)
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.__raw, self.__codec_options))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__raw!r}, codec_options={self.__codec_options!r})"


def _default_raw_options() -> CodecOptions:
    from mongio.bson.codec_options import CodecOptions

    return CodecOptions(document_class=RawBSONDocument)


DEFAULT_RAW_BSON_OPTIONS: Final = _default_raw_options()
