"""The MongoDB wire protocol, sans I/O: message headers, OP_MSG, OP_COMPRESSED and the legacy handshake opcodes.

Everything here turns documents into bytes and bytes into views of documents; the asyncio side lives in
``mongio.connection``.
"""

from mongio.wire.compression import (
    COMPRESSOR_IDS,
    NEVER_COMPRESSED,
    NOOP_ID,
    SNAPPY_ID,
    SUPPORTED_COMPRESSORS,
    ZLIB_ID,
    ZSTD_ID,
    Compressor,
    agreed_compressors,
    compress_message,
    decompress_message,
    get_compressor,
    may_compress,
    negotiate_compressor,
)
from mongio.wire.header import (
    DEFAULT_MAX_BSON_SIZE,
    DEFAULT_MAX_MESSAGE_SIZE,
    HEADER,
    HEADER_SIZE,
    OP_COMPRESSED,
    OP_MSG,
    OP_QUERY,
    OP_REPLY,
    MessageHeader,
    next_request_id,
    parse_header,
)
from mongio.wire.legacy import (
    OpQuery,
    OpReply,
    encode_op_query,
    encode_op_reply,
    parse_op_query,
    parse_op_reply,
)
from mongio.wire.message import ParsedMessage, parse_message
from mongio.wire.op_msg import (
    COMMAND_OVERHEAD,
    OpMsg,
    OpMsgFlags,
    encode_command,
    encode_op_msg,
    parse_op_msg,
)

__all__ = [
    "COMMAND_OVERHEAD",
    "COMPRESSOR_IDS",
    "DEFAULT_MAX_BSON_SIZE",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "HEADER",
    "HEADER_SIZE",
    "NEVER_COMPRESSED",
    "NOOP_ID",
    "OP_COMPRESSED",
    "OP_MSG",
    "OP_QUERY",
    "OP_REPLY",
    "SNAPPY_ID",
    "SUPPORTED_COMPRESSORS",
    "ZLIB_ID",
    "ZSTD_ID",
    "Compressor",
    "MessageHeader",
    "OpMsg",
    "OpMsgFlags",
    "OpQuery",
    "OpReply",
    "ParsedMessage",
    "agreed_compressors",
    "compress_message",
    "decompress_message",
    "encode_command",
    "encode_op_msg",
    "encode_op_query",
    "encode_op_reply",
    "get_compressor",
    "may_compress",
    "negotiate_compressor",
    "next_request_id",
    "parse_header",
    "parse_message",
    "parse_op_msg",
    "parse_op_query",
    "parse_op_reply",
]
