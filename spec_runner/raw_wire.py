"""A deliberately minimal OP_MSG client over a blocking socket, for the test harness only.

It proves the test server answers using nothing but mongio's BSON codec, and lets the harness wait for a
freshly started server without depending on the driver's own connection layer.
"""

from __future__ import annotations

import itertools
import socket
import struct
from typing import Any

OP_MSG = 2013
_HEADER = struct.Struct("<iiii")
_request_ids = itertools.count(1)


def encode_op_msg(command: dict[str, Any], request_id: int) -> bytes:
    from mongio.bson import encode

    document: bytes = encode(command)
    body = struct.pack("<I", 0) + b"\x00" + document  # flagBits, then one kind-0 section
    return _HEADER.pack(_HEADER.size + len(body), request_id, 0, OP_MSG) + body


def decode_op_msg(message: bytes) -> tuple[int, dict[str, Any]]:
    """Returns (responseTo, the kind-0 document) of a complete OP_MSG reply."""
    from mongio.bson import decode

    length, _request_id, response_to, opcode = _HEADER.unpack_from(message)
    if opcode != OP_MSG or length != len(message):
        raise ValueError(f"not a complete OP_MSG reply: opcode {opcode}, length {length}/{len(message)}")
    if message[20] != 0:
        raise ValueError(f"expected a kind-0 section, got kind {message[20]}")
    return response_to, decode(message[21:])


def _receive_exactly(sock: socket.socket, count: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < count:
        chunk = sock.recv(count - len(chunks))
        if not chunk:
            raise ConnectionError("server closed the connection")
        chunks += chunk
    return bytes(chunks)


def run_command(sock: socket.socket, command: dict[str, Any]) -> dict[str, Any]:
    request_id = next(_request_ids)
    sock.sendall(encode_op_msg(command, request_id))
    header = _receive_exactly(sock, 4)
    (length,) = struct.unpack("<i", header)
    message = header + _receive_exactly(sock, length - 4)
    response_to, reply = decode_op_msg(message)
    if response_to != request_id:
        raise ValueError(f"reply answers request {response_to}, expected {request_id}")
    return reply


def command_once(host: str, port: int, command: dict[str, Any], timeout: float = 5.0) -> dict[str, Any]:
    with socket.create_connection((host, port), timeout=timeout) as sock:
        return run_command(sock, command)
