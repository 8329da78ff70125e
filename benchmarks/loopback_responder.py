"""A loopback responder for the driver benchmarks: answers every command at once with a prepared reply.

    .venv/bin/python -m benchmarks.driver_bench --server loopback [--tasks ...]

The test server costs more per operation than a client does, and its cost per operation grows with the
number of requests it holds at once, so against it the 200-task workload measures the server more than the
driver. This responder answers in a few microseconds whatever it is asked: the workloads then measure how
many operations each client can drive. It runs in its own process (under uvloop when installed) and
replies to ``hello`` / ``isMaster`` as a standalone without a ``topologyVersion`` (so monitors poll rather
than stream), to ``find`` with one batch holding the benchmark's tweet document (its ``_id`` the one the
filter asks for, so the workloads can check each answer), to ``insert`` with
``n: 1``, to ``listCollections`` with no collections, and to everything else with ``ok: 1``. It never stores anything: it is for timing clients only.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

from mongio.bson import encode

OP_REPLY = 1
OP_QUERY = 2004
OP_MSG = 2013
_HEADER = struct.Struct("<iiii")
_MORE_TO_COME = 1 << 1
_INT32 = struct.Struct("<i")
_INT32_ID = b"\x10_id\x00"  # an int32 element named _id


def hello_reply(connection_id: int) -> dict[str, Any]:
    return {
        "helloOk": True,
        "isWritablePrimary": True,
        "ismaster": True,
        "maxBsonObjectSize": 16 * 1024 * 1024,
        "maxMessageSizeBytes": 48_000_000,
        "maxWriteBatchSize": 100_000,
        "localTime": datetime.datetime.now(datetime.UTC),
        "logicalSessionTimeoutMinutes": 30,
        "connectionId": connection_id,
        "minWireVersion": 0,
        "maxWireVersion": 21,
        "readOnly": False,
        "ok": 1.0,
    }


class Replies:
    """The prepared OP_MSG bodies (flags, section kind 0, document), by command name."""

    def __init__(self, find_document: dict[str, Any]) -> None:
        self.find = self._body({"cursor": {"firstBatch": [find_document], "id": 0, "ns": "perftest.corpus"}, "ok": 1.0})
        # Where the document's int32 _id is, to answer each find with the _id its filter asks for.
        self._find_id = self.find.index(_INT32_ID + _INT32.pack(find_document["_id"])) + len(_INT32_ID)
        self.insert = self._body({"n": 1, "ok": 1.0})
        self.list_collections = self._body(
            {"cursor": {"firstBatch": [], "id": 0, "ns": "perftest.$cmd.listCollections"}, "ok": 1.0}
        )
        self.ok = self._body({"ok": 1.0})

    @staticmethod
    def _body(document: dict[str, Any]) -> bytes:
        return b"\x00\x00\x00\x00\x00" + encode(document)

    def find_reply(self, message: bytes) -> bytes:
        """The tweet, with the ``_id`` of the request's filter when that is an int32 (``{"_id": n}``)."""
        found = message.find(_INT32_ID)
        if found < 0:
            return self.find
        start = found + len(_INT32_ID)
        return self.find[: self._find_id] + message[start : start + 4] + self.find[self._find_id + 4 :]

    def for_command(self, name: bytes, connection_id: int, message: bytes) -> bytes:
        if name == b"find":
            return self.find_reply(message)
        if name == b"insert":
            return self.insert
        if name == b"listCollections":
            return self.list_collections
        if name in (b"hello", b"isMaster", b"ismaster"):
            return self._body(hello_reply(connection_id))
        return self.ok


class _Responder(asyncio.BufferedProtocol):
    connections = 0

    def __init__(self, replies: Replies) -> None:
        _Responder.connections += 1
        self.connection_id = _Responder.connections
        self.replies = replies
        self.buffer = bytearray(1 << 16)
        self.filled = 0
        self.transport: Any = None
        self.reply_id = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # uvloop's transports are not asyncio.Transport subclasses

    def get_buffer(self, sizehint: int) -> memoryview:
        # The transport may still hold the last view while we parse, so the buffer is never resized in place.
        if len(self.buffer) - self.filled < 1 << 14:
            bigger = bytearray(len(self.buffer) * 2)
            bigger[: self.filled] = self.buffer[: self.filled]
            self.buffer = bigger
        return memoryview(self.buffer)[self.filled :]

    def buffer_updated(self, nbytes: int) -> None:
        self.filled += nbytes
        start = 0
        while self.filled - start >= 16:
            length, request_id, _, op_code = _HEADER.unpack_from(self.buffer, start)
            if self.filled - start < length:
                break
            self._answer(bytes(self.buffer[start : start + length]), request_id, op_code)
            start += length
        if start:
            remaining = self.filled - start
            self.buffer[:remaining] = self.buffer[start : self.filled]
            self.filled = remaining

    def _answer(self, message: bytes, request_id: int, op_code: int) -> None:
        assert self.transport is not None
        self.reply_id += 1
        if op_code == OP_MSG:
            flags = int.from_bytes(message[16:20], "little")
            # The first section is the command body (kind 0): its first key names the command.
            name_start = 16 + 4 + 1 + 4 + 1
            name = message[name_start : message.index(b"\x00", name_start)]
            if flags & _MORE_TO_COME:
                return
            body = self.replies.for_command(name, self.connection_id, message)
            self.transport.write(_HEADER.pack(16 + len(body), self.reply_id, request_id, OP_MSG) + body)
        elif op_code == OP_QUERY:
            # The legacy handshake: reply with OP_REPLY holding the hello document.
            document = encode(hello_reply(self.connection_id))
            body = struct.pack("<iqii", 0, 0, 0, 1) + document
            self.transport.write(_HEADER.pack(16 + len(body), self.reply_id, request_id, OP_REPLY) + body)
        else:
            self.transport.close()


async def serve(host: str, port: int, find_document: dict[str, Any]) -> None:
    replies = Replies(find_document)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Responder(replies), host, port)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


class LoopbackResponderProcess:
    """The responder in a child process, shaped like the test server for the benchmark harness."""

    def __init__(self, find_document_path: Path, host: str = "127.0.0.1") -> None:
        from spec_runner.server import free_port

        self.host = host
        self.port = free_port(host)
        self.find_document_path = find_document_path
        self.process: subprocess.Popen[str] | None = None

    @property
    def uri(self) -> str:
        return f"mongodb://{self.host}:{self.port}/"

    def start(self) -> LoopbackResponderProcess:
        root = Path(__file__).resolve().parent.parent
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
        argv = [sys.executable, "-m", "benchmarks.loopback_responder", "--host", self.host, "--port", str(self.port),
                "--find-document", str(self.find_document_path)]  # fmt: skip
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=root, env=environment)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line.strip() != "ready":
            self.stop()
            raise RuntimeError(f"the loopback responder did not start (it printed {line!r})")
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=15)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--find-document", type=Path, required=True, help="JSON file of the document find returns")
    args = parser.parse_args(argv)
    if not args.host.startswith("127.") and args.host not in ("::1", "localhost"):
        raise SystemExit("the loopback responder listens on loopback addresses only")
    document = json.loads(args.find_document.read_text("utf-8"))
    document["_id"] = 1
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(args.host, args.port, document))
    else:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(serve(args.host, args.port, document))


if __name__ == "__main__":
    main()
