"""OP_COMPRESSED: the compressors (snappy, zlib, zstd), their negotiation, and wrapping/unwrapping messages.

snappy and zstd come from the optional ``python-snappy`` and ``zstandard`` packages (the ``compression`` extra);
zlib is always available. A compressor whose package is missing raises ``ConfigurationError`` when asked for.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Sequence
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
            self._zstd_decompressor = zstandard.ZstdDecompressor()

    def __repr__(self) -> str:
        level = f", zlib_level={self.zlib_level}" if self.name == "zlib" else ""
        return f"Compressor({self.name!r}{level})"

    def compress(self, data: bytes | bytearray | memoryview) -> bytes:
        if self.id == ZLIB_ID:
            return zlib.compress(data, self.zlib_level)
        if self.id == SNAPPY_ID:
            return bytes(_import_snappy().compress(bytes(data)))
        return bytes(self._zstd_compressor.compress(data))

    def decompress(self, data: bytes | bytearray | memoryview, uncompressed_size: int) -> bytes:
        return _decompress(self.id, data, uncompressed_size, self._zstd_decompressor)


def get_compressor(name: str, zlib_level: int = -1) -> Compressor:
    """The compressor for a handshake name (``"snappy"``, ``"zlib"`` or ``"zstd"``)."""
    return Compressor(name, zlib_level)


def negotiate_compressor(client: Iterable[str], server: Sequence[str] | None) -> str | None:
    """The first of the client's compressors that the server's hello ``compression`` array also names."""
    if not server:
        return None
    offered = set(server)
    for name in client:
        if name in offered:
            return name
    return None


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
    message: bytes | bytearray | memoryview, max_message_size: int
) -> tuple[int, int, bytes]:
    """Unwrap an OP_COMPRESSED message (header included).

    Returns ``(original opcode, compressor id, the original message without its header)``. A message that
    claims more than ``max_message_size`` bytes, names an unknown compressor, or does not decompress to its
    stated size raises ``ProtocolError``.
    """
    view = memoryview(message)
    if len(view) < HEADER_SIZE + _COMPRESSED_PREFIX.size:
        raise ProtocolError(f"OP_COMPRESSED message of {len(view)} bytes is too short for its fields")
    opcode, size, compressor_id = _COMPRESSED_PREFIX.unpack_from(view, HEADER_SIZE)
    if size < 0 or size + HEADER_SIZE > max_message_size:
        raise ProtocolError(
            f"OP_COMPRESSED message claims {size} uncompressed bytes; the maximum message size is {max_message_size}"
        )
    data = view[HEADER_SIZE + _COMPRESSED_PREFIX.size :]
    return opcode, compressor_id, _decompress(compressor_id, data, size, None)


def _decompress(
    compressor_id: int, data: bytes | bytearray | memoryview, size: int, zstd_context: Any
) -> bytes:
    try:
        if compressor_id == NOOP_ID:
            result = bytes(data)
        elif compressor_id == ZLIB_ID:
            inflater = zlib.decompressobj()
            # Bound the output so a lying size cannot make us inflate without limit.
            result = inflater.decompress(data, size + 1)
        elif compressor_id == SNAPPY_ID:
            result = bytes(_import_snappy().uncompress(bytes(data)))
        elif compressor_id == ZSTD_ID:
            if zstd_context is None:
                zstd_context = _import_zstandard().ZstdDecompressor()
            result = zstd_context.decompress(data, max_output_size=size)
        else:
            raise ProtocolError(f"OP_COMPRESSED message uses unknown compressor id {compressor_id}")
    except ProtocolError:
        raise
    except ConfigurationError as exc:
        raise ProtocolError(f"the server sent a message compressed with a compressor we lack: {exc}") from exc
    except Exception as exc:  # each library raises its own error type for corrupt input
        raise ProtocolError(
            f"OP_COMPRESSED message (compressor id {compressor_id}) does not decompress: {exc}"
        ) from exc
    if len(result) != size:
        raise ProtocolError(
            f"OP_COMPRESSED message decompressed to {len(result)} bytes, its header says {size}"
        )
    return result


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
