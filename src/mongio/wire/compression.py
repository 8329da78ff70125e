"""OP_COMPRESSED: the compressors (snappy, zlib, zstd), their negotiation, and wrapping/unwrapping messages.

snappy and zstd come from the optional ``python-snappy`` and ``zstandard`` packages (the ``compression`` extra);
zlib is always available. A compressor whose package is missing raises ``ConfigurationError`` when asked for.

What a peer sends is not trusted: an OP_COMPRESSED message must use a compressor the connection's handshake
agreed to, may declare no more than the message limit, and is inflated to at most its declared size plus one
byte whatever its data would make (snappy's length preamble and a zstd frame's stated size must agree with the
header before anything is inflated; a zstd frame that states no size may ask for a window of at most 8 MiB).
Anything else is a ``ProtocolError``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Collection, Iterable, Sequence
from typing import Any, Final

from mongio.errors import ConfigurationError, ProtocolError
from mongio.wire.header import HEADER, HEADER_SIZE, OP_COMPRESSED

__all__ = [
    "COMPRESSOR_IDS",
    "NEVER_COMPRESSED",
    "NOOP_ID",
    "SNAPPY_ID",
    "SUPPORTED_COMPRESSORS",
    "ZLIB_ID",
    "ZSTD_ID",
    "Compressor",
    "agreed_compressors",
    "compress_message",
    "decompress_message",
    "get_compressor",
    "may_compress",
    "negotiate_compressor",
]

NOOP_ID: Final = 0
SNAPPY_ID: Final = 1
ZLIB_ID: Final = 2
ZSTD_ID: Final = 3
COMPRESSOR_IDS: Final = {"noop": NOOP_ID, "snappy": SNAPPY_ID, "zlib": ZLIB_ID, "zstd": ZSTD_ID}
SUPPORTED_COMPRESSORS: Final = ("snappy", "zlib", "zstd")

# Commands whose messages must never be compressed (the compression specification's list). Kept lowercase:
# the legacy hello is spelled both isMaster and ismaster.
NEVER_COMPRESSED: Final = frozenset(
    name.lower()
    for name in (
        "hello",
        "isMaster",
        "saslStart",
        "saslContinue",
        "getnonce",
        "authenticate",
        "createUser",
        "updateUser",
        "copydbSaslStart",
        "copydbgetnonce",
        "copydb",
    )
)

# originalOpcode, uncompressedSize, compressorId
_COMPRESSED_PREFIX = struct.Struct("<iiB")


def may_compress(command_name: str) -> bool:
    """False for the commands the specification forbids compressing (hello, the auth conversation, ...)."""
    return command_name.lower() not in NEVER_COMPRESSED


class Compressor:
    """One compression algorithm as used on the wire: its handshake name, its id, and both directions.

    Instances hold reusable (de)compression contexts, so use one per event loop rather than per message.
    """

    __slots__ = ("_zstd_compressor", "_zstd_decompressor", "id", "name", "zlib_level")

    def __init__(self, name: str, zlib_level: int = -1) -> None:
        if name not in SUPPORTED_COMPRESSORS:
            raise ConfigurationError(
                f"unknown compressor {name!r}; supported: {', '.join(SUPPORTED_COMPRESSORS)}"
            )
        if not -1 <= zlib_level <= 9:
            raise ConfigurationError(f"zlibCompressionLevel must be between -1 and 9, got {zlib_level}")
        self.name = name
        self.id: int = COMPRESSOR_IDS[name]
        self.zlib_level = zlib_level
        self._zstd_compressor: Any = None
        self._zstd_decompressor: Any = None
        if name == "snappy":
            _import_snappy()
        elif name == "zstd":
            zstandard = _import_zstandard()
            self._zstd_compressor = zstandard.ZstdCompressor()
            self._zstd_decompressor = _zstd_decompressor(zstandard)

    def __repr__(self) -> str:
        level = f", zlib_level={self.zlib_level}" if self.name == "zlib" else ""
        return f"Compressor({self.name!r}{level})"

    def compress(self, data: bytes | bytearray | memoryview) -> bytes:
        if self.id == ZLIB_ID:
            return zlib.compress(data, self.zlib_level)
        if self.id == SNAPPY_ID:
            return bytes(_import_snappy().compress(bytes(data)))
        return bytes(self._zstd_compressor.compress(data))

    def decompress(self, data: bytes | bytearray | memoryview, uncompressed_size: int) -> bytes | bytearray:
        return _decompress(self.id, data, uncompressed_size, self._zstd_decompressor)


def get_compressor(name: str, zlib_level: int = -1) -> Compressor:
    """The compressor for a handshake name (``"snappy"``, ``"zlib"`` or ``"zstd"``)."""
    return Compressor(name, zlib_level)


def agreed_compressors(client: Iterable[str], server: Sequence[str] | None) -> tuple[str, ...]:
    """The client's compressors that the server's hello ``compression`` array also names, in the client's
    order: those either side may compress with on that connection."""
    offered = set(server or ())
    return tuple(name for name in client if name in offered)


def negotiate_compressor(client: Iterable[str], server: Sequence[str] | None) -> str | None:
    """The first of the client's compressors that the server's hello ``compression`` array also names."""
    agreed = agreed_compressors(client, server)
    return agreed[0] if agreed else None


def compress_message(message: bytes | bytearray | memoryview, compressor: Compressor) -> bytearray:
    """Wrap a complete message (header included) in OP_COMPRESSED, keeping its request id and responseTo."""
    view = memoryview(message)
    _length, request_id, response_to, opcode = HEADER.unpack_from(view)
    body = view[HEADER_SIZE:]
    compressed = compressor.compress(body)
    out = bytearray(HEADER_SIZE + _COMPRESSED_PREFIX.size)
    HEADER.pack_into(out, 0, len(out) + len(compressed), request_id, response_to, OP_COMPRESSED)
    _COMPRESSED_PREFIX.pack_into(out, HEADER_SIZE, opcode, len(body), compressor.id)
    out += compressed
    return out


def decompress_message(
    message: bytes | bytearray | memoryview,
    max_message_size: int,
    accepted_compressors: Collection[int] | None = None,
) -> tuple[int, int, bytes | bytearray]:
    """Unwrap an OP_COMPRESSED message (header included).

    Returns ``(original opcode, compressor id, the original message without its header)``. Raises
    ``ProtocolError`` for a message that names a compressor outside ``accepted_compressors`` (ids; None accepts
    every compressor this module knows, as a server reading requests does), claims more than
    ``max_message_size`` bytes uncompressed, or does not decompress to exactly the size it claims. No more than
    the claimed size (plus one byte) is ever inflated, whatever the compressed data says.
    """
    view = memoryview(message)
    if len(view) < HEADER_SIZE + _COMPRESSED_PREFIX.size:
        raise ProtocolError(f"OP_COMPRESSED message of {len(view)} bytes is too short for its fields")
    opcode, size, compressor_id = _COMPRESSED_PREFIX.unpack_from(view, HEADER_SIZE)
    if accepted_compressors is not None and compressor_id not in accepted_compressors:
        raise ProtocolError(_not_negotiated(compressor_id, accepted_compressors))
    if size < 0 or size + HEADER_SIZE > max_message_size:
        raise ProtocolError(
            f"OP_COMPRESSED message claims {size} uncompressed bytes; the maximum message size is {max_message_size}"
        )
    data = view[HEADER_SIZE + _COMPRESSED_PREFIX.size :]
    return opcode, compressor_id, _decompress(compressor_id, data, size, None)


def _compressor_name(compressor_id: int) -> str:
    for name, known_id in COMPRESSOR_IDS.items():
        if known_id == compressor_id:
            return name
    return f"unknown id {compressor_id}"


def _not_negotiated(compressor_id: int, accepted: Collection[int]) -> str:
    agreed = ", ".join(_compressor_name(known) for known in sorted(accepted)) or "none"
    return (
        f"OP_COMPRESSED message uses compressor {_compressor_name(compressor_id)} (id {compressor_id}), which "
        f"the handshake did not negotiate (negotiated: {agreed})"
    )


def _decompress(
    compressor_id: int, data: bytes | bytearray | memoryview, size: int, zstd_context: Any
) -> bytes | bytearray:
    """Decompress ``data`` to the ``size`` bytes it must make, inflating at most ``size + 1`` bytes."""
    result: bytes | bytearray
    try:
        if compressor_id == NOOP_ID:
            result = bytes(data)
        elif compressor_id == ZLIB_ID:
            result = _inflate_zlib(data, size)
        elif compressor_id == SNAPPY_ID:
            result = _inflate_snappy(data, size)
        elif compressor_id == ZSTD_ID:
            result = _inflate_zstd(data, size, zstd_context)
        else:
            raise ProtocolError(f"OP_COMPRESSED message uses unknown compressor id {compressor_id}")
    except ProtocolError:
        raise
    except ConfigurationError as exc:
        raise ProtocolError(f"the server sent a message compressed with a compressor we lack: {exc}") from exc
    except Exception as exc:  # each library raises its own error type for corrupt input
        raise ProtocolError(
            f"OP_COMPRESSED message ({_compressor_name(compressor_id)}) does not decompress: {_reason(exc)}"
        ) from exc
    if len(result) > size:
        raise ProtocolError(
            f"OP_COMPRESSED message ({_compressor_name(compressor_id)}) decompresses to more than the {size} "
            "bytes its header says"
        )
    if len(result) != size:
        raise ProtocolError(
            f"OP_COMPRESSED message decompressed to {len(result)} bytes, its header says {size}"
        )
    return result


def _reason(error: BaseException) -> str:
    """An error's text, or its cause's when it has none (python-snappy raises an empty error over the one
    that names the problem)."""
    for candidate in (error, error.__cause__):
        if candidate is not None and str(candidate):
            return str(candidate)
    return type(error).__name__


# zlib is handed the compressed data a slice at a time, and asked for at most a step of output per call:
# what it leaves of its input is copied out at every call, and what it returns is copied into the result,
# so both copies stay small and the result is one buffer growing to at most the declared size plus one.
_ZLIB_INPUT_STEP: Final = 1 << 18
_ZLIB_OUTPUT_STEP: Final = 1 << 20


def _inflate_zlib(data: bytes | bytearray | memoryview, size: int) -> bytearray:
    inflater = zlib.decompressobj()
    # One byte past the size is enough to tell a longer stream (a limit of 0 would mean none at all).
    limit = size + 1
    view = memoryview(data)
    position = 0
    result = bytearray()
    while not inflater.eof and len(result) < limit:
        pending: bytes | memoryview = inflater.unconsumed_tail
        if not pending:
            pending = view[position : position + _ZLIB_INPUT_STEP]
            position += len(pending)
        piece = inflater.decompress(pending, min(limit - len(result), _ZLIB_OUTPUT_STEP))
        if not piece and not pending:
            break  # all the data is in and nothing more comes out: the stream stops short
        result += piece
    if len(result) > size:
        return result  # longer than its header says, which _decompress refuses
    if not inflater.eof:
        raise ProtocolError(f"OP_COMPRESSED message's zlib stream ends early, after {len(result)} bytes")
    if inflater.unused_data or position < len(view):
        unused = len(inflater.unused_data) + len(view) - position
        raise ProtocolError(f"OP_COMPRESSED message has {unused} bytes after the end of its zlib stream")
    return result


def _inflate_snappy(data: bytes | bytearray | memoryview, size: int) -> bytes:
    # snappy allocates the length its preamble states and fails unless the data makes exactly that many
    # bytes: the preamble must agree with the header before anything is inflated.
    stated = _snappy_stated_length(memoryview(data))
    if stated != size:
        raise ProtocolError(
            f"OP_COMPRESSED message's snappy data states {stated} uncompressed bytes, its header says {size}"
        )
    return bytes(_import_snappy().uncompress(data))


def _snappy_stated_length(data: memoryview) -> int:
    """The varint that opens raw snappy data: the uncompressed length, at most 32 bits (5 bytes)."""
    value = 0
    for index in range(min(len(data), 5)):
        byte = data[index]
        value |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            return value
    raise ProtocolError("OP_COMPRESSED message's snappy data does not start with a valid length")


_ZSTD_FRAME_MAGIC: Final = b"\x28\xb5\x2f\xfd"
_ZSTD_UNKNOWN_SIZE: Final = -1  # what frame_content_size gives for a frame that does not state its size


def _inflate_zstd(data: bytes | bytearray | memoryview, size: int, context: Any) -> bytes:
    zstandard = _import_zstandard()
    if bytes(data[:4]) != _ZSTD_FRAME_MAGIC:
        # A skippable frame, or not zstd at all; the library would take a skippable frame's length as the
        # size to allocate.
        raise ProtocolError("OP_COMPRESSED message's zstd data does not start with a zstd frame")
    # python-zstandard allocates a frame's stated content size and ignores max_output_size when there is
    # one: the stated size must agree with the header before anything is inflated.
    stated = zstandard.frame_content_size(data)
    if stated != _ZSTD_UNKNOWN_SIZE and stated != size:
        raise ProtocolError(
            f"OP_COMPRESSED message's zstd frame states {stated} uncompressed bytes, its header says {size}"
        )
    if context is None:
        context = _zstd_decompressor(zstandard)
    # Without a stated size, max_output_size is what gets allocated (0 would mean no limit).
    return bytes(context.decompress(data, max_output_size=size + 1, allow_extra_data=False))


# The largest window a frame that states no size may use: what zstd's levels up to 19 use. A frame that
# states its size is decompressed in one pass straight into the result and needs no window; one that does
# not goes through a window buffer, which would otherwise be allowed 128 MiB on top of the result.
_ZSTD_MAX_WINDOW: Final = 1 << 23


def _zstd_decompressor(zstandard: Any) -> Any:
    return zstandard.ZstdDecompressor(max_window_size=_ZSTD_MAX_WINDOW)


def _import_snappy() -> Any:
    try:
        import snappy
    except ImportError as exc:
        raise ConfigurationError(
            "the snappy compressor needs the python-snappy package: pip install 'mongio[snappy]'"
        ) from exc
    return snappy


def _import_zstandard() -> Any:
    try:
        import zstandard
    except ImportError as exc:
        raise ConfigurationError(
            "the zstd compressor needs the zstandard package: pip install 'mongio[zstd]'"
        ) from exc
    return zstandard
