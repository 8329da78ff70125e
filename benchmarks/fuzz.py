"""Fuzz the compiled BSON codec and the wire, URI and Extended JSON parsers with generated and mutated inputs.

    .venv/bin/python -m benchmarks.fuzz [--inputs 100000] [--seconds N] [--target NAME ...] [--seed 1]
    .venv/bin/python -m benchmarks.fuzz --sanitize [--inputs 1000000]

Each target feeds its entry points inputs made from a seed corpus: valid values, their encodings mutated
(bytes flipped, set, inserted, deleted, spliced, and length fields set to boundary values), and values
generated from scratch. An input passes when it gives a result or raises one of the target's expected
errors (InvalidBSON and its kin); any other exception is a finding, printed with the input that caused it,
and the run exits non-zero.

``--sanitize`` builds the C extension again with AddressSanitizer and UndefinedBehaviorSanitizer into a
scratch directory (``benchmarks/.fuzz-build``), runs the same targets in a child interpreter that loads that
build (libasan preloaded, ``PYTHONMALLOC=malloc`` so every object allocation is checked), and reads the
sanitizer logs afterwards: any AddressSanitizer or UndefinedBehaviorSanitizer report fails the run, and so
does any leak whose allocation stack passes through the extension (the interpreter's own allocations that
live until exit are not the extension's and are not counted).

Targets:
  bson-decode   decode / decode_all / decode_iter (the compiled element loops) under varied codec options,
                and RawBSONDocument element access
  bson-encode   encode of generated documents with every BSON type, bad keys, unencodable values, tampered
                values and custom type encoders (the compiled encoder loops)
  bson-entry    the extension's functions called directly with hostile arguments (bounds, contexts, buffers),
                and the scan of a batch's framing held to its Python reference
  wire          parse_message on mutated OP_MSG, OP_REPLY, OP_QUERY and OP_COMPRESSED messages
  reply         the compiled parse of the usual reply (usual_reply) on mutated replies, under varied codec
                options and request ids, held to the connection's Python parser: the same reply and flags, or
                the same error
  request       the compiled encoding of the usual request (encode_request) of generated commands and
                document sequences, under varied limits, held to encode_command_parts: the same bytes, or
                the same refusal
  framing       the compiled framing of a connection (get_buffer, buffer_updated, wait_message, ReplyWaiter)
                fed mutated streams of messages in reads of random sizes, waiters set now and then, parsers
                that fail; every outcome held to the Python framing's
  decompress-zlib, decompress-snappy, decompress-zstd
                decompress_message on honest, mutated and bomb OP_COMPRESSED data declaring true, forged and
                limit-sized sizes: the exact declared size or ProtocolError, and Python allocations bounded by
                the declared size, never by what the data inflates to
  uri           the connection string parser on mutated URIs
  ejson         Extended JSON loads (canonical and relaxed) on mutated text, and dumps of what it gives
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import importlib
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import time
import traceback
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_MiB = 1 << 20
BUILD = ROOT / "benchmarks" / ".fuzz-build"

_INTERESTING_INT32 = [
    0,
    1,
    4,
    5,
    6,
    7,
    12,
    16,
    17,
    127,
    128,
    255,
    256,
    -1,
    -2,
    -5,
    2**31 - 1,
    -(2**31),
    2**16,
]


class Mutator:
    """Byte-level mutations of a seed, several stacked per input."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def mutate(self, data: bytes, seeds: list[bytes]) -> bytes:
        buf = bytearray(data)
        for _ in range(self.rng.choice((1, 1, 2, 3, 4, 8))):
            self._one(buf, seeds)
        return bytes(buf)

    def _one(self, buf: bytearray, seeds: list[bytes]) -> None:
        rng = self.rng
        choice = rng.randrange(8)
        position = rng.randrange(len(buf) + 1)
        if choice == 0 and buf:  # flip a bit
            index = min(position, len(buf) - 1)
            buf[index] ^= 1 << rng.randrange(8)
        elif choice == 1 and buf:  # set a byte
            buf[min(position, len(buf) - 1)] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        elif choice == 2:  # insert bytes
            buf[position:position] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
        elif choice == 3 and buf:  # delete bytes
            del buf[position : position + rng.randrange(1, 9)]
        elif choice == 4 and len(buf) >= 4:  # a length field set to a boundary value
            index = rng.randrange(len(buf) - 3)
            value = rng.choice([*_INTERESTING_INT32, len(buf) - index, len(buf), rng.randrange(-64, 64)])
            buf[index : index + 4] = struct.pack("<i", value)
        elif choice == 5 and seeds:  # splice in part of another seed
            other = rng.choice(seeds)
            start = rng.randrange(len(other) + 1)
            buf[position:position] = other[start : start + rng.randrange(1, 32)]
        elif choice == 6 and buf:  # duplicate a chunk
            start = rng.randrange(len(buf))
            buf[position:position] = buf[start : start + rng.randrange(1, 16)]
        elif choice == 7:  # truncate
            del buf[position:]


class Target:
    """One fuzz target: its inputs and how one input is run."""

    name = ""
    expected: tuple[type[BaseException], ...] = ()

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.mutator = Mutator(rng)

    def inputs(self) -> Iterator[Any]:
        raise NotImplementedError

    def run(self, item: Any) -> None:
        raise NotImplementedError


def _every_type_documents() -> list[dict[str, Any]]:
    from mongio.bson import (
        SON,
        Binary,
        Code,
        DatetimeMS,
        DBRef,
        Decimal128,
        Int64,
        MaxKey,
        MinKey,
        ObjectId,
        Regex,
        Timestamp,
    )
    from mongio.bson.deprecated import DBPointer, Symbol, Undefined

    oid = ObjectId(b"\x01" * 12)
    return [
        {},
        {"s": "text", "i": 1, "l": Int64(2**40), "d": 1.5, "b": True, "n": None, "o": oid},
        {"nested": {"a": [1, "two", {"three": 3.0}, [4]]}, "empty": {}, "list": []},
        {"bin": Binary(b"\x00\x01", 0x80), "old": Binary(b"abc", 2), "bytes": b"xyz"},
        {"u4": Binary(uuid.UUID(int=7).bytes, 4), "u3": Binary(uuid.UUID(int=9).bytes, 3)},
        {
            "when": datetime.datetime(2020, 1, 2, 3, 4, 5, 6000),
            "far": DatetimeMS(2**62),
            "min": DatetimeMS(-(2**62)),
        },
        {"re": Regex("^a.*b$", "imx"), "code": Code("f()"), "scope": Code("g()", {"x": 1, "y": {"z": [1]}})},
        {"sym": Symbol("s"), "ptr": DBPointer("db.c", oid), "undef": Undefined()},
        {"dec": Decimal128("-1.5E-300"), "nan": Decimal128("NaN"), "ts": Timestamp(1, 2)},
        {"min": MinKey(), "max": MaxKey(), "ref": DBRef("c", 1, "d", {"x": 2})},
        {"refshape": {"$ref": "c", "$id": oid, "$db": "d", "extra": [1]}, "son": SON([("b", 1), ("a", 2)])},
        {"unicode": "naïve ☃ 𝄞", "key é": "v", "deep": {"a": {"b": {"c": {"d": [[[]]]}}}}},
    ]


class BsonDecode(Target):
    name = "bson-decode"

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        from mongio.bson import (
            SON,
            CodecOptions,
            DatetimeConversion,
            InvalidBSON,
            RawBSONDocument,
            TypeDecoder,
            TypeRegistry,
            UuidRepresentation,
            decode,
            decode_all,
            decode_iter,
            encode,
        )

        class _FloatAsText(TypeDecoder):
            bson_type = float

            def transform_bson(self, value: Any) -> Any:
                return repr(value)

        self.expected = (InvalidBSON,)
        self.decode, self.decode_all, self.decode_iter = decode, decode_all, decode_iter
        self.raw_type = RawBSONDocument
        self.seeds = [encode(document) for document in _every_type_documents()]
        self.options = [
            CodecOptions(),
            CodecOptions(
                document_class=SON, tz_aware=True, tzinfo=datetime.timezone(datetime.timedelta(hours=5))
            ),
            CodecOptions(document_class=RawBSONDocument),
            CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_AUTO, tz_aware=True),
            CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_CLAMP),
            CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_MS),
            CodecOptions(uuid_representation=UuidRepresentation.STANDARD),
            CodecOptions(uuid_representation=UuidRepresentation.JAVA_LEGACY),
            CodecOptions(uuid_representation=UuidRepresentation.CSHARP_LEGACY),
            CodecOptions(unicode_decode_error_handler="replace"),
            CodecOptions(type_registry=TypeRegistry([_FloatAsText()])),
        ]

    def inputs(self) -> Iterator[Any]:
        rng = self.rng
        while True:
            seed = rng.choice(self.seeds)
            if rng.random() < 0.1:
                data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
            elif rng.random() < 0.1:
                data = seed + self.mutator.mutate(rng.choice(self.seeds), self.seeds)
            else:
                data = self.mutator.mutate(seed, self.seeds)
                if len(data) >= 5 and rng.random() < 0.7:  # an honest outer length: the damage is inside
                    data = struct.pack("<i", len(data)) + data[4:]
            yield data, rng.choice(self.options), rng.randrange(4)

    def run(self, item: Any) -> None:
        data, options, how = item
        if how == 0:
            _touch(self.decode(data, options))
        elif how == 1:
            _touch(self.decode_all(data, options))
        elif how == 2:
            for document in self.decode_iter(data, options):
                _touch(document)
        else:
            raw = self.raw_type(data) if len(data) >= 5 else None
            if raw is not None:
                _touch(dict(raw.items()))


def _touch(value: Any) -> None:
    """Use every part of a decoded value (so a lazily decoded one is decoded, and a broken object shows)."""
    if isinstance(value, dict) or hasattr(value, "items"):
        for key, item in value.items():
            hash(key)
            _touch(item)
    elif isinstance(value, list):
        for item in value:
            _touch(item)
    else:
        repr(value)


class BsonEncode(Target):
    name = "bson-encode"

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        from mongio.bson import (
            Code,
            CodecOptions,
            DatetimeConversion,
            Decimal128,
            InvalidDocument,
            RawBSONDocument,
            Regex,
            Timestamp,
            TypeEncoder,
            TypeRegistry,
            UuidRepresentation,
            decode,
            encode,
        )

        class _Opaque:
            pass

        class _OpaqueEncoder(TypeEncoder):
            python_type = _Opaque

            def transform_python(self, value: Any) -> Any:
                return {"opaque": True}

        self.expected = (InvalidDocument,)
        self.encode, self.decode = encode, decode
        self.check_options = CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_MS)
        self.opaque = _Opaque
        self.documents = _every_type_documents()
        self.tampered: list[Callable[[], Any]] = [
            lambda: _tamper(Decimal128, _bid=b"short"),
            lambda: _tamper(Regex, pattern="a\x00b", flags="i"),
            lambda: _tamper(Regex, pattern="p", flags="z\u00e9"),
            lambda: _tamper(Timestamp, _Timestamp__time=2**40, _Timestamp__inc=0),
            lambda: Code("c", {"bad\x00key": 1}),
            lambda: RawBSONDocument(encode({"r": 1})),
        ]
        self.options = [
            CodecOptions(),
            CodecOptions(uuid_representation=UuidRepresentation.STANDARD),
            CodecOptions(uuid_representation=UuidRepresentation.PYTHON_LEGACY),
            CodecOptions(type_registry=TypeRegistry([_OpaqueEncoder()])),
        ]

    def _value(self, depth: int) -> Any:
        rng = self.rng
        pick = rng.randrange(16 if depth < 6 else 12)
        if pick == 0:
            return rng.choice((0, -1, 2**31 - 1, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63), 2**64, -(2**70)))
        if pick == 1:
            return rng.choice((0.0, -0.0, 1e308, float("inf"), float("nan"), rng.random()))
        if pick == 2:
            return "".join(
                chr(rng.choice((0x41, 0xE9, 0x2603, 0x1D11E, 0xD800, 0, 0x7F)))
                for _ in range(rng.randrange(8))
            )
        if pick == 3:
            return bytes(rng.randrange(256) for _ in range(rng.randrange(20)))
        if pick == 4:
            return uuid.UUID(int=rng.getrandbits(128))
        if pick == 5:
            return datetime.datetime(
                rng.randrange(1, 10000), rng.randrange(1, 13), rng.randrange(1, 29), rng.randrange(24),
                microsecond=rng.randrange(1_000_000),
                tzinfo=rng.choice((None, datetime.UTC, datetime.timezone(datetime.timedelta(minutes=rng.randrange(-1439, 1440))))),
            )  # fmt: skip
        if pick == 6:
            return rng.choice((None, True, False, object(), {1, 2}, self.opaque(), re.compile("a+", re.I)))
        if pick == 7:
            return rng.choice(self.tampered)()
        if pick in (8, 9, 10, 11):
            document = rng.choice(self.documents)
            return rng.choice(list(document.values())) if document else {}
        if pick in (12, 13):
            return [self._value(depth + 1) for _ in range(rng.randrange(4))]
        if pick == 14:
            return tuple(self._value(depth + 1) for _ in range(rng.randrange(3)))
        return {self._key(): self._value(depth + 1) for _ in range(rng.randrange(5))}

    def _key(self) -> Any:
        rng = self.rng
        if rng.random() < 0.03:
            return rng.choice((1, b"bytes", "nul\x00key", "$dollar", "dot.ted", "\ud800"))
        return rng.choice(("a", "b", "_id", "key", "é", "long" * 10, str(rng.randrange(100))))

    def inputs(self) -> Iterator[Any]:
        rng = self.rng
        while True:
            document = {self._key(): self._value(0) for _ in range(rng.randrange(1, 6))}
            yield document, rng.choice(self.options), rng.random() < 0.2

    def run(self, item: Any) -> None:
        document, options, check_keys = item
        data = self.encode(document, check_keys, options)
        self.decode(data, self.check_options)  # what the encoder writes must be valid BSON


class InsertPack(BsonEncode):
    """The compiled one-pass encoding of an insert's documents (``write_inserts``, and ``write_insert`` one
    document at a time between other bytes, as the client bulk write does, or alone, as ``insert_one``
    does), ``_id``s generated."""

    name = "insert-pack"

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        from mongio.bson._encoder import (
            encode_insert_document,
            insert_appender,
            pack_inserts,
            refusals_as_invalid_document,
        )
        from mongio.operations.base import encode_insert

        self.pack_inserts, self.encode_insert = pack_inserts, encode_insert
        self.insert_appender, self.refusals = insert_appender, refusals_as_invalid_document
        self.encode_insert_document = encode_insert_document

    def inputs(self) -> Iterator[Any]:
        documents = super().inputs()
        rng = self.rng
        while True:
            batch = [next(documents)[0] for _ in range(rng.randrange(1, 5))]
            yield batch, rng.choice(self.options), rng.choice(("list", "one at a time", "alone"))

    def run(self, item: Any) -> None:
        batch, options, mode = item
        encode_one = lambda doc: self.encode_insert(doc, options)  # noqa: E731
        if mode == "alone":
            data, _id = self.encode_insert_document(batch[0], options, encode_one)
            self.decode(bytes(data), self.check_options)
            return
        if mode == "one at a time":
            append = self.insert_appender(options, encode_one)
            buf = bytearray(b"\xff" * self.rng.randrange(0, 9))  # other bytes before each document
            with self.refusals():
                for document in batch:
                    start = len(buf)
                    append(buf, document)
                    self.decode(bytes(buf[start:]), self.check_options)
                    buf += b"\xff" * self.rng.randrange(0, 9)
            return
        data, ends, _ids = self.pack_inserts(batch, options, encode_one)
        start = 0
        for end in ends:  # each document the pass wrote must be valid BSON on its own
            self.decode(bytes(data[start:end]), self.check_options)
            start = end
        if start != len(data):
            raise AssertionError("the packed documents do not fill the buffer")


def _tamper(cls: type, **slots: Any) -> Any:
    value: Any = object.__new__(cls)
    for name, item in slots.items():
        object.__setattr__(value, name, item)
    return value


class BsonEntry(Target):
    """The extension's functions with arguments no caller in the package passes."""

    name = "bson-entry"

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        from mongio.bson import CodecOptions, InvalidBSON, _decoder, _encoder, encode
        from mongio.bson.lazy_batch import _python_document_array_offsets

        speedups = _decoder._SPEEDUPS
        if speedups is None:
            raise SystemExit("the C extension is not built or MONGIO_NO_SPEEDUPS is set")
        self.speedups = speedups
        self.expected = (InvalidBSON, TypeError, ValueError, OverflowError, RecursionError, _encoder._Refused)
        self.contexts: list[Any] = [
            _decoder._context(CodecOptions()),
            _decoder._context(CodecOptions(tz_aware=True)),
            (),
            (None,) * 6,
            (CodecOptions(), dict, True, False, bytes.decode, {}, 0, False, None, 1, 0, None),
            (CodecOptions(), dict, True, False, bytes.decode, None, 0, False, None, 1, 0, (1, 2)),
            (CodecOptions(), dict, True, False, bytes.decode, None),
            "not a tuple",
        ]
        self.encode_contexts: list[Any] = [_encoder._context(CodecOptions()), None, 5]
        self.seeds = [encode(document) for document in _every_type_documents()]
        # Arrays of documents for the batch scan (a document keyed "0", "1", ... is framed as the array is),
        # held to the Python reference on every input.
        documents = list(_every_type_documents())
        self.arrays = [
            encode({str(index): document for index, document in enumerate(documents[first:])})
            for first in range(len(documents))
        ]
        self.python_offsets = _python_document_array_offsets

    def inputs(self) -> Iterator[Any]:
        rng = self.rng
        while True:
            how = rng.randrange(5)
            if how == 4:
                yield how, self.mutator.mutate(rng.choice(self.arrays), self.arrays), 0, 0, None, None, ()
                continue
            data: Any = self.mutator.mutate(rng.choice(self.seeds), self.seeds)
            pos = rng.choice((-1, 0, 4, rng.randrange(-8, len(data) + 8)))
            # The decoder reads other buffers in place too: a view with bytes on either side of the data
            # (as a receive buffer holds a reply), or a bytearray.
            shape = rng.randrange(4)
            if shape == 1:
                data = memoryview(b"\xaa" * 3 + data + b"\xbb" * 3)[3:-3]
            elif shape == 2:
                data = bytearray(data)
            end = rng.choice((len(data) - 1, len(data), pos, rng.randrange(-8, len(data) + 8)))
            # The nesting depth the Python loops pass on (MAX_NESTING is 256 unless changed), now and then.
            depth = rng.choice(((), (), (), (0,), (255,), (256,), (257,), (-1,), (2**40,), ("x",)))
            yield (
                how,
                data,
                pos,
                end,
                rng.choice(self.contexts),
                rng.choice(self.encode_contexts),
                depth,
            )

    def run(self, item: Any) -> None:
        how, data, pos, end, ctx, encode_ctx, depth = item
        if how == 4:
            offsets = self.speedups.document_array_offsets(data)
            if offsets != self.python_offsets(data):
                raise AssertionError("document_array_offsets differs from the Python scan")
            return
        if how >= 2:
            data = bytes(data)  # the writers take it as a value: bytes is the BSON binary they know
        if how == 0:
            self.speedups.read_document(data, pos, end, ctx, *depth)
        elif how == 1:
            self.speedups.read_array(data, pos, end, ctx, *depth)
        elif how == 2:
            buf = bytearray() if len(data) % 5 else b""
            self.speedups.write_document(buf, {"a": [1, data, {"b": pos}]}, encode_ctx, False, *depth)
        else:
            self.speedups.write_array(bytearray(), (data, pos, [end]), encode_ctx, bool(pos & 1), *depth)


class Wire(Target):
    name = "wire"

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        from mongio.bson import InvalidBSON, decode, encode
        from mongio.errors import ProtocolError
        from mongio.wire.compression import compress_message, get_compressor
        from mongio.wire.header import HEADER
        from mongio.wire.legacy import encode_op_query, encode_op_reply
        from mongio.wire.message import parse_message
        from mongio.wire.op_msg import encode_op_msg

        self.expected = (ProtocolError, InvalidBSON)
        self.parse, self.decode = parse_message, decode
        documents = [encode(document) for document in _every_type_documents()]
        seeds: list[bytes] = []
        for flags, checksum in ((0, False), (2, False), (0, True)):
            sequences = [("documents", documents[:3]), ("updates", documents[3:5])] if not flags else []
            seeds.append(_as_bytes(encode_op_msg(7, documents[1], sequences, flags, checksum=checksum)))
        seeds.append(_as_bytes(encode_op_reply(9, 7, documents[:2])))
        seeds.append(_as_bytes(encode_op_query(11, "admin.$cmd", documents[1])))
        zlib = get_compressor("zlib")
        seeds.append(_as_bytes(compress_message(seeds[0], zlib)))
        self.seeds = seeds
        self.header = HEADER

    def inputs(self) -> Iterator[Any]:
        rng = self.rng
        while True:
            data = bytearray(self.mutator.mutate(rng.choice(self.seeds), self.seeds))
            if len(data) >= 4 and rng.random() < 0.7:  # keep the length honest so the parsers go deeper
                data[0:4] = struct.pack("<i", len(data))
            yield bytes(data)

    def run(self, item: Any) -> None:
        parsed = self.parse(item)
        content = parsed.content
        for document in _wire_documents(content):
            _touch(self.decode(document))


def _as_bytes(message: Any) -> bytes:
    if isinstance(message, (bytes, bytearray, memoryview)):
        return bytes(message)
    return b"".join(bytes(part) for part in message)


def _wire_documents(content: Any) -> Iterator[Any]:
    body = getattr(content, "body", None)
    if body is not None:
        yield bytes(body)
        for documents in content.sequences.values():
            yield from (bytes(document) for document in documents)
    for name in ("documents", "query"):
        found = getattr(content, name, None)
        if isinstance(found, (list, tuple)):
            yield from (bytes(document) for document in found)
        elif found is not None:
            yield bytes(found)


class Uri(Target):
    name = "uri"

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        from mongio.errors import ConfigurationError
        from mongio.options.secrets import Secrets
        from mongio.options.uri_parser import parse_uri

        self.expected = (ConfigurationError,)
        self.parse = parse_uri
        self.secrets_of = Secrets.of_uri
        self.seeds = [
            text.encode()
            for text in (
                "mongodb://localhost",
                "mongodb://user:p%40ss@h1:27017,h2:27018/db?replicaSet=rs&w=majority&readPreference=secondary",
                "mongodb://[::1]:27017/?tls=true&tlsCAFile=/tmp/ca.pem&authMechanism=SCRAM-SHA-256",
                "mongodb://%2Ftmp%2Fmongodb-27017.sock/?compressors=zlib,zstd&zlibCompressionLevel=5",
                "mongodb://a/?readPreferenceTags=dc:ny,rack:1&readPreferenceTags=&maxStalenessSeconds=120",
                "mongodb://u@a/?authMechanism=MONGODB-X509&authSource=$external&appname=x&timeoutMS=0",
                "mongodb+srv://cluster.example.com/db?retryWrites=false&srvMaxHosts=2",
                "mongodb://a/?authMechanism=GSSAPI&authMechanismProperties=SERVICE_NAME:m,CANONICALIZE_HOST_NAME:true",
                "mongodb://alice:s3cr3tPW%21@h1,h2/db?proxyHost=p&proxyUsername=u&proxyPassword=pr0xyPW",
                "mongodb://alice:s3cr3t/PW0rd@h/?tlsCertificateKeyFilePassword=k3yPW&w=1",
            )
        ]

    def inputs(self) -> Iterator[Any]:
        rng = self.rng
        while True:
            data = self.mutator.mutate(rng.choice(self.seeds), self.seeds)
            yield data.decode("utf-8", "replace"), rng.random() < 0.5

    def run(self, item: Any) -> None:
        text, strict = item
        try:
            parsed = self.parse(text, strict=strict, warn=False)
        except self.expected as error:
            self.check_hidden(text, [str(error)])
            raise
        self.check_hidden(text, list(parsed.warnings))

    def check_hidden(self, text: str, shown: list[str]) -> None:
        """What the parser says must not show what mongio.options.secrets takes for the string's password or
        secret option values (those of four characters or more: a shorter one may recur anywhere)."""
        found = self.secrets_of(text)
        secrets = type(found)(frozenset(secret for secret in found.texts if len(secret) >= 4))
        for message in shown:
            if secrets.shows_any(message):
                raise AssertionError(f"a password shows in {message!r}")


class ExtendedJson(Target):
    name = "ejson"

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        from mongio.bson import InvalidBSON, InvalidDocument, json_util

        self.expected = (ValueError, InvalidBSON, InvalidDocument)
        self.json_util = json_util
        self.options = [
            json_util.CANONICAL_JSON_OPTIONS,
            json_util.RELAXED_JSON_OPTIONS,
            json_util.LEGACY_JSON_OPTIONS,
        ]
        self.seeds = [
            json_util.dumps(document, json_options=options).encode()
            for document in _every_type_documents()
            for options in self.options
        ]

    def inputs(self) -> Iterator[Any]:
        rng = self.rng
        while True:
            data = self.mutator.mutate(rng.choice(self.seeds), self.seeds)
            yield data.decode("utf-8", "replace"), rng.choice(self.options)

    def run(self, item: Any) -> None:
        text, options = item
        value = self.json_util.loads(text, json_options=options)
        self.json_util.dumps(value, json_options=options)


class Request(Target):
    """The compiled encoding of the usual request against ``encode_command_parts``, on the same arguments."""

    name = "request"

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        from mongio.bson import CodecOptions, encode
        from mongio.bson._encoder import _invalid_document, _Refused
        from mongio.connection import connection
        from mongio.errors import DocumentTooLarge, InvalidDocument
        from mongio.wire.op_msg import PackedDocuments, encode_command_parts

        if connection._encode_request is None:
            raise SystemExit("the C extensions are not built or MONGIO_NO_SPEEDUPS is set")
        self.encode_request = connection._encode_request
        self.encode_command_parts = encode_command_parts
        self.refusals = (_Refused, RecursionError)
        self.invalid_document = _invalid_document
        self.expected = (DocumentTooLarge, InvalidDocument)
        self.packed = PackedDocuments
        self.documents = list(_every_type_documents())
        self.encoded = [encode(document) for document in self.documents]
        self.options = [CodecOptions(), CodecOptions(tz_aware=True)]
        for options in self.options:  # the encoding context the compiled path reads, made as a first encode makes it
            encode({}, codec_options=options)
        self.seen: dict[str, int] = dict.fromkeys(("compiled", "python", "refused"), 0)

    def inputs(self) -> Iterator[Any]:
        rng = self.rng
        while True:
            command: dict[Any, Any] = {rng.choice(("insert", "find", "ping")): "corpus"}
            command.update(rng.choice(self.documents))
            if rng.random() < 0.9:
                command["$db"] = "db"
            if rng.random() < 0.05:
                command[rng.choice(("bad\x00key", 7))] = 1  # refused by the encoder
            sequences: Any = None
            if rng.random() < 0.6:
                documents: list[Any] = []
                for _ in range(rng.randrange(0, 4)):
                    kind = rng.randrange(4)
                    data = b"".join(rng.choice(self.encoded) for _ in range(rng.randrange(1, 3)))
                    if kind == 0:
                        documents.append(self.packed(data))
                    elif kind == 1:
                        documents.append(self.packed(bytearray(data)))
                    elif kind == 2:
                        documents.append(data)
                    else:
                        documents.append(rng.choice(self.documents))  # a mapping: left to the reference
                identifier = rng.choice(("documents", "updates", "deletes", "n\x00ul", "é"))
                sequences = {identifier: documents} if rng.random() < 0.9 else {identifier: documents, "x": []}
            limits = rng.choice(((16 * 1024 * 1024, 48_000_000), (1000, 48_000_000), (16 * 1024 * 1024, 2000)))
            yield command, sequences, rng.choice((0, 0, 2, 1 << 16)), rng.choice(self.options), limits

    def _encode(self, item: Any, compiled: bool) -> tuple[Any, ...]:
        command, sequences, flags, options, (max_bson, max_message) = item
        parts: Any
        try:
            if compiled:
                try:
                    parts = self.encode_request(7, command, sequences, flags, options, max_bson, max_message)
                except self.refusals as refused:
                    raise self.invalid_document(refused) from None
                if parts is None:
                    return ("declined",)
            else:
                parts = self.encode_command_parts(
                    7, "db", command, document_sequences=sequences, flags=flags, codec_options=options,
                    max_bson_size=max_bson, max_message_size=max_message,
                )  # fmt: skip
            return ("message", b"".join(bytes(part) for part in parts))
        except Exception as error:
            return ("error", type(error).__name__, str(error))

    def run(self, item: Any) -> None:
        compiled, python = self._encode(item, True), self._encode(item, False)
        if compiled[0] == "declined":
            self.seen["python"] += 1
            return
        self.seen["refused" if compiled[0] == "error" else "compiled"] += 1
        if compiled != python:
            raise AssertionError(f"compiled {compiled!r:.600} != python {python!r:.600}")


class Reply(Target):
    """The compiled parse of the usual reply against ``Connection._parse_any_reply``, on the same message."""

    name = "reply"

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        from mongio.bson import CodecOptions, RawBSONDocument, encode
        from mongio.connection import connection
        from mongio.wire.compression import compress_message, get_compressor
        from mongio.wire.op_msg import encode_op_msg

        if connection._usual_reply is None:
            raise SystemExit("the C extensions are not built or MONGIO_NO_SPEEDUPS is set")
        self.module = connection
        # A mutated compressor id may name snappy or zstd: their modules are imported on first use, which the
        # check for memory held after the run would take for a leak.
        for compression_module in ("snappy", "zstandard"):
            with contextlib.suppress(ImportError):
                importlib.import_module(compression_module)
        documents = [encode(document) for document in _every_type_documents()]
        seeds: list[bytes] = []
        for body in documents[:6]:
            seeds.append(_as_bytes(encode_op_msg(9, body, [], 0, checksum=False)))
        seeds.append(_as_bytes(encode_op_msg(9, documents[1], [("documents", documents[:2])], 0, checksum=False)))
        seeds.append(_as_bytes(encode_op_msg(9, documents[1], [], 2, checksum=False)))  # moreToCome
        seeds.append(_as_bytes(encode_op_msg(9, documents[1], [], 0, checksum=True)))
        seeds.append(_as_bytes(compress_message(seeds[0], get_compressor("zlib"))))
        self.seeds = [self._answering(seed, 7) for seed in seeds]
        self.options = [CodecOptions(), CodecOptions(tz_aware=True), CodecOptions(document_class=RawBSONDocument)]
        # What the inputs made happen, on the compiled side: a short run checks that each one did.
        self.seen: dict[str, int] = dict.fromkeys(("compiled", "python", "error"), 0)

    @staticmethod
    def _answering(message: bytes, response_to: int) -> bytes:
        return message[:8] + struct.pack("<i", response_to) + message[12:]

    def inputs(self) -> Iterator[Any]:
        rng = self.rng
        while True:
            seed = rng.choice(self.seeds)
            # A third as they are (the usual reply, which the compiled parse takes), the rest mutated.
            data = bytearray(seed if rng.random() < 0.3 else self.mutator.mutate(seed, self.seeds))
            if len(data) >= 4 and rng.random() < 0.7:  # keep the length honest so the parsers go deeper
                data[0:4] = struct.pack("<i", len(data))
            yield bytes(data), rng.choice((7, 7, 7, 8)), rng.choice(self.options), rng.random() < 0.1

    def _parse(self, item: Any, compiled: bool) -> tuple[Any, ...]:
        message, expected, options, lazy = item
        conn: Any = self.module.Connection.__new__(self.module.Connection)
        conn.name, conn._max_message_size = "fuzz.example:27017", 48_000_000
        conn._expected_response_to, conn._request_id = expected, expected
        conn._codec_options, conn._lazy_batch = options, lazy
        conn._more_to_come, conn._awaiting_reply = False, True
        conn._accepted_compressors = frozenset({2})  # zlib, the compressor of the compressed seed
        usual_reply = self.module._usual_reply
        if not compiled:
            self.module._usual_reply = None
        try:
            reply = conn._parse_reply(memoryview(message))
            # repr: a NaN decodes unequal to itself; a raw document compares by its bytes
            return ("reply", repr(dict(reply)), conn._more_to_come, conn._awaiting_reply)
        except Exception as error:
            return ("error", type(error).__name__, str(error))
        finally:
            self.module._usual_reply = usual_reply

    def run(self, item: Any) -> None:
        compiled, python = self._parse(item, True), self._parse(item, False)
        message, expected, options, lazy = item
        usual_reply: Any = self.module._usual_reply
        if compiled[0] == "error":
            self.seen["error"] += 1
        elif not lazy and usual_reply(memoryview(message), expected, expected, options) is not None:
            self.seen["compiled"] += 1
        else:
            self.seen["python"] += 1
        if compiled != python:
            raise AssertionError(f"compiled {compiled!r:.600} != python {python!r:.600}")


class Decompress(Target):
    """``decompress_message`` on OP_COMPRESSED messages of one compressor: honest ones, their data mutated, and
    bombs (a few hundred KB that inflate to 16-64 MiB), each declaring its true size, one off, zero, a
    negative size, a small size, or the limit and past it, under varied message limits, now and then on a
    connection that did not agree to the compressor. The exact declared size comes back or ``ProtocolError``
    is raised, nothing else; and the Python allocations while it runs stay within the declared size (or the
    limit, the smaller) twice over plus 2 MiB: never what a bomb inflates to."""

    compressor = ""

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        from benchmarks import hostile_decompress as hostile
        from mongio.bson import encode
        from mongio.errors import ConfigurationError, ProtocolError
        from mongio.wire.compression import decompress_message, get_compressor

        try:
            compressor = get_compressor(self.compressor)
        except ConfigurationError as missing:
            raise SystemExit(str(missing)) from None
        self.expected = (ProtocolError,)
        self.decompress, self.op_compressed, self.preamble = (
            decompress_message, hostile.op_compressed, hostile.snappy_preamble
        )
        self.id = compressor.id
        documents = b"".join(encode(document) for document in _every_type_documents())
        payloads = [b"", b"\x00", bytes(range(256)) * 8, documents, rng.randbytes(5000), b"ab" * 40_000]
        # (compressed data, the size it inflates to, whether that may be copied for mutation)
        self.seeds: list[tuple[bytes, int, bool]] = [
            (compressor.compress(payload), len(payload), True) for payload in payloads
        ]
        if self.compressor == "zlib":
            self.seeds.append((hostile.zlib_bomb(16 * _MiB), 16 * _MiB, False))
        elif self.compressor == "snappy":
            self.seeds.append((hostile.snappy_bomb(16 * _MiB), 16 * _MiB, False))
        else:
            self.seeds.append((hostile.zstd_bomb(64 * _MiB, states_size=True), 64 * _MiB, False))
            self.seeds.append((hostile.zstd_bomb(64 * _MiB, states_size=False), 64 * _MiB, False))
        self.datas = [data for data, _, small in self.seeds if small]
        self.seen: dict[str, int] = dict.fromkeys(("exact", "refused", "not negotiated"), 0)

    def inputs(self) -> Iterator[Any]:
        rng = self.rng
        while True:
            data, size, small = rng.choice(self.seeds)
            if small and rng.random() < 0.4:
                data = self.mutator.mutate(data, self.datas)
            if self.compressor == "snappy" and rng.random() < 0.2:  # a preamble saying something else
                stated = rng.choice((0, 1, size + 1, size * 64, 2**32 - 1))
                data = self.preamble(stated) + data[len(self.preamble(size)) :]
            limit = rng.choice((4096, 65_536, _MiB, 48_000_000))
            declared = rng.choice(
                (size, size, size, size, size - 1, size + 1, 0, -1, -(2**31), 2**31 - 1,
                 rng.randrange(300), limit - 16, limit - 15)
            )  # fmt: skip
            accepted = {self.id} if rng.random() < 0.9 else {rng.choice([i for i in (0, 1, 2, 3) if i != self.id])}
            yield data, declared, limit, accepted

    def run(self, item: Any) -> None:
        data, declared, limit, accepted = item
        message = self.op_compressed(self.id, declared, data)
        bound = 2 * max(0, min(declared, limit)) + 2 * _MiB
        tracemalloc.start()
        try:
            _, compressor_id, payload = self.decompress(message, limit, accepted)
        except self.expected as refused:
            self.seen["not negotiated" if "did not negotiate" in str(refused) else "refused"] += 1
            raise
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            if peak > bound:
                raise AssertionError(f"{peak} bytes allocated for a message declaring {declared} (limit {limit})")
        self.seen["exact"] += 1
        if self.id not in accepted:
            raise AssertionError(f"compressor {self.id} accepted by a connection that agreed to {accepted} only")
        if len(payload) != declared or compressor_id != self.id:
            raise AssertionError(f"{len(payload)} bytes with compressor {compressor_id} for {declared} declared")


class DecompressZlib(Decompress):
    name = "decompress-zlib"
    compressor = "zlib"


class DecompressSnappy(Decompress):
    name = "decompress-snappy"
    compressor = "snappy"


class DecompressZstd(Decompress):
    name = "decompress-zstd"
    compressor = "zstd"


class _Transport:
    """What the framing calls on its transport, recorded."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def pause_reading(self) -> None:
        self.calls.append("pause")

    def resume_reading(self) -> None:
        self.calls.append("resume")

    def abort(self) -> None:
        self.calls.append("abort")

    def write(self, data: Any) -> None:
        self.calls.append("write")


def _failing_parser(message: memoryview) -> bytes:
    """A parser that refuses some messages, as a reply parser refuses a malformed reply."""
    if len(message) > 16 and message[16] % 7 == 0:
        raise ValueError(f"refused a message of {len(message)} bytes")
    return bytes(message)


def _outcome(waiter: Any) -> tuple[Any, ...]:
    if not waiter.done():
        return ("pending",)
    try:
        return ("result", waiter.result())
    except Exception as error:
        return ("error", type(error).__name__, str(error))


class Framing(Target):
    """The compiled framing against the Python framing, on the same stream, reads and waits."""

    name = "framing"

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        import asyncio

        from mongio.connection import protocol
        from mongio.wire.header import HEADER

        if protocol._compiled is None:
            raise SystemExit("the C extension is not built or MONGIO_NO_SPEEDUPS is set")
        self.implementations = {
            "compiled": protocol.MessageProtocol,
            "python": type("PythonFraming", (protocol._FramingInPython, protocol.MessageProtocol), {}),
        }
        self.loop = asyncio.new_event_loop()
        # What the inputs made happen, counted on the compiled side: a short run checks that each one did.
        self.seen: dict[str, int] = dict.fromkeys(
            ("result", "error", "refused", "pause", "resume", "abort"), 0
        )
        self.seeds = [
            HEADER.pack(size, index, 7, 2013) + bytes((index * 31 + i) % 256 for i in range(size - 16))
            for index, size in enumerate((16, 17, 21, 60, 300, 4095, 4096, 5000, 9000, 40_000))
        ]

    def inputs(self) -> Iterator[Any]:
        rng = self.rng
        while True:
            parts = [rng.choice(self.seeds) for _ in range(rng.randrange(1, 6))]
            if rng.random() < 0.6:
                parts[rng.randrange(len(parts))] = self.mutator.mutate(rng.choice(parts), self.seeds)
            stream = b"".join(parts)
            reads = [rng.choice((1, 3, 15, 16, 17, 100, 4096, 70000)) for _ in range(40)]
            waits = [rng.random() < 0.5 for _ in range(40)]
            yield stream, reads, waits, rng.choice((100, 4096, 48_000_000)), rng.random() < 0.3

    def run(self, item: Any) -> None:
        outcomes = {
            name: self.loop.run_until_complete(self._drive(cls, *item))
            for name, cls in self.implementations.items()
        }
        for entry in outcomes["compiled"]:
            if entry and entry[0] in self.seen:
                self.seen[entry[0]] += 1
        for call in outcomes["compiled"][-1]:
            if call in self.seen:
                self.seen[call] += 1
        if outcomes["compiled"] != outcomes["python"]:
            raise AssertionError(
                f"compiled {outcomes['compiled']!r:.600} != python {outcomes['python']!r:.600}"
            )

    async def _drive(
        self, cls: Any, stream: bytes, reads: list[int], waits: list[bool], max_size: int, failing: bool
    ) -> list[Any]:
        protocol = cls("fuzz.example:27017", max_size)
        transport = _Transport()
        protocol.connection_made(transport)
        parser = _failing_parser if failing else bytes
        log: list[Any] = []
        waiter = None
        offset = 0
        for size, wait in zip(reads, waits, strict=True):
            if wait:
                if waiter is not None:
                    log.append(_outcome(waiter))
                try:
                    waiter = protocol.wait_message(parser)
                except Exception as error:  # a waiter still pending: refused
                    log.append(("refused", type(error).__name__))
            if offset < len(stream) and not protocol.lost:
                buffer = protocol.get_buffer(-1)
                count = min(size, len(buffer), len(stream) - offset)
                buffer[:count] = stream[offset : offset + count]
                offset += count
                protocol.buffer_updated(count)
            log.append(
                (
                    protocol._start,
                    protocol._end,
                    protocol._capacity,
                    protocol._held,
                    protocol._needed,
                    protocol.lost_reason,
                )
            )
        if waiter is not None:
            log.append(_outcome(waiter))
        log.append(transport.calls)
        protocol.connection_lost(None)
        return log


TARGETS: dict[str, type[Target]] = {
    target.name: target
    for target in (
        BsonDecode, BsonEncode, InsertPack, BsonEntry, Wire, Request, Reply, Framing, Uri, ExtendedJson,
        DecompressZlib, DecompressSnappy, DecompressZstd,
    )
}


def run_target(name: str, inputs: int, seconds: float | None, seed: int, show: int) -> dict[str, Any]:
    """Run one target; return its totals (inputs, expected errors, findings)."""
    target = TARGETS[name](random.Random(f"{name}:{seed}"))
    done = expected = 0
    findings: list[str] = []
    start = time.perf_counter()
    # Leaks the sanitizer cannot see (an object kept alive by a missing decref is still linked into the
    # collector's lists): the interpreter's allocated blocks after a warm-up, which fills the bounded caches,
    # against the end of the run. Meaningless under PYTHONMALLOC=malloc, where the count is always 0.
    warm_up = min(inputs // 10, 20_000)
    blocks_before = 0
    for item in target.inputs():
        if done >= inputs or (seconds is not None and time.perf_counter() - start > seconds):
            break
        if done == warm_up:
            gc.collect()
            blocks_before = sys.getallocatedblocks()
        done += 1
        try:
            target.run(item)
        except target.expected:
            expected += 1
        except Exception as error:  # a finding: anything the target does not expect
            if len(findings) < show:
                detail = "".join(traceback.format_exception(error)[-6:])
                findings.append(f"{type(error).__name__}: {error}\n  input: {item!r:.400}\n{detail}")
            else:
                findings.append(type(error).__name__)
    item = None
    gc.collect()
    grown = sys.getallocatedblocks() - blocks_before if done > warm_up else 0
    if grown > max(1000, (done - warm_up) // 100):  # more than one block per hundred inputs: a leak
        findings.append(f"memory: {grown} more allocated blocks after {done - warm_up} inputs")
    return {
        "target": name,
        "inputs": done,
        "expected_errors": expected,
        "blocks_grown": grown,
        "findings": len(findings),
        "examples": findings[:show],
        "seconds": round(time.perf_counter() - start, 1),
    }


def build_sanitized() -> Path:
    """The package with its C extension built under AddressSanitizer and UndefinedBehaviorSanitizer."""
    package = BUILD / "mongio"
    if package.exists():
        shutil.rmtree(package)
    shutil.copytree(ROOT / "src" / "mongio", package, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    flags = "-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
    env = {**os.environ, "CFLAGS": flags, "LDFLAGS": "-fsanitize=address,undefined"}
    subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(BUILD),
         "--build-temp", str(BUILD / "temp"), "--force"],
        cwd=ROOT, env=env, check=True, capture_output=True,
    )  # fmt: skip
    if not list(package.glob("bson/_speedups*.so")) or not list(package.glob("connection/_speedups*.so")):
        raise SystemExit("the sanitized build of the extensions failed")
    return BUILD


def _library(name: str) -> str:
    found = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True, check=True)
    path = found.stdout.strip()
    if not os.path.isabs(path):
        raise SystemExit(f"{name} not found: install the compiler's sanitizer runtime")
    return path


def run_sanitized(args: argparse.Namespace) -> int:
    build = build_sanitized()
    logs = build / "logs"
    if logs.exists():
        shutil.rmtree(logs)
    logs.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": f"{build}{os.pathsep}{ROOT}",
        "PYTHONMALLOC": "malloc",
        "LD_PRELOAD": _library("libasan.so"),
        "ASAN_OPTIONS": f"detect_leaks=1:log_path={logs}/asan:allocator_may_return_null=1",
        "UBSAN_OPTIONS": f"print_stacktrace=1:halt_on_error=1:log_path={logs}/ubsan",
        "LSAN_OPTIONS": "max_leaks=0",
    }
    command = [
        sys.executable,
        "-m",
        "benchmarks.fuzz",
        "--child",
        "--inputs",
        str(args.inputs),
        "--seed",
        str(args.seed),
    ]
    if args.seconds is not None:
        command += ["--seconds", str(args.seconds)]
    for name in args.target or []:
        command += ["--target", name]
    sys.stdout.flush()
    child = subprocess.run(
        command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True
    )  # results as they come
    reports = _sanitizer_reports(logs)
    print(json.dumps({"sanitizer_reports": len(reports["errors"]), "extension_leaks": len(reports["leaks"])}))
    for report in reports["errors"][:3] + reports["leaks"][:3]:
        print(report[:4000])
    if child.returncode != 0 and not reports["errors"]:
        print(child.stderr[-4000:])
    return 0 if child.returncode == 0 and not reports["errors"] and not reports["leaks"] else 1


def _sanitizer_reports(logs: Path) -> dict[str, list[str]]:
    """Sanitizer errors, and leak reports whose stack passes through the extension."""
    errors: list[str] = []
    leaks: list[str] = []
    for path in sorted(logs.iterdir()):
        text = path.read_text(errors="replace")
        for block in re.split(
            r"\n(?=Direct leak|Indirect leak|=+\d+=+ERROR|\S+:\d+:\d+: runtime error)", text
        ):
            if block.startswith(("Direct leak", "Indirect leak")):
                if "_speedups" in block:
                    leaks.append(block)
            elif "ERROR: AddressSanitizer" in block or "runtime error" in block:
                errors.append(block)
    return {"errors": errors, "leaks": leaks}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--inputs", type=int, default=100_000, help="inputs per target (default 100000)")
    parser.add_argument("--seconds", type=float, default=None, help="stop each target after this long")
    parser.add_argument(
        "--target", action="append", choices=sorted(TARGETS), help="only this target (repeatable)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sanitize", action="store_true", help="run under AddressSanitizer and UBSan")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sanitize:
        return run_sanitized(args)
    if args.child:
        import mongio.bson._decoder as decoder

        if decoder._SPEEDUPS is None or BUILD.name not in str(
            Path(decoder._SPEEDUPS.__file__).parent.parent.parent
        ):
            print(f"the sanitized extension was not loaded: {decoder._SPEEDUPS}", file=sys.stderr)
            return 2
    failed = False
    for name in args.target or list(TARGETS):
        result = run_target(name, args.inputs, args.seconds, args.seed, show=3)
        print(json.dumps({key: value for key, value in result.items() if key != "examples"}), flush=True)
        for example in result["examples"]:
            print(example, flush=True)
        failed = failed or result["findings"] > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
