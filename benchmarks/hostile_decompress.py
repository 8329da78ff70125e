"""Decompression bombs and forged sizes against the client's OP_COMPRESSED parser, one fresh process per case.

    .venv/bin/python -m benchmarks.hostile_decompress [--rounds 3] [--case NAME ...]

Each case is an OP_COMPRESSED reply as a hostile server would send it: a small message declaring a small
``uncompressedSize`` whose data inflates to far more (a bomb), or a size that is forged. The controller builds
the message and writes it to a scratch file; a child interpreter reads it, notes its RSS high-water mark
(``VmHWM``), parses the message as a connection does (``parse_message`` with the connection's message limit
and the compressors its handshake agreed to) and reports the time to the error, the error's text and how far
the high-water mark rose. The table shows, per case, the median time over rounds and the largest growth.

Targets: every case ends in a ``ProtocolError`` within 1 s, with RSS growth under 64 MiB.

The builders (``zlib_bomb``, ``snappy_bomb``, ``zstd_bomb``, ``op_compressed``) are also what the unit tests
and the fuzz targets of the decompressors feed the parser.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20
GiB = 1 << 30
DEFAULT_LIMIT = 48_000_000  # a server's usual maxMessageSizeBytes
_HEADER = struct.Struct("<iiii")
_COMPRESSED_PREFIX = struct.Struct("<iiB")
_OP_COMPRESSED, _OP_MSG = 2012, 2013
_ADLER_BASE = 65521


def op_compressed(
    compressor_id: int, declared: int, data: bytes, *, opcode: int = _OP_MSG, response_to: int = 0
) -> bytes:
    """An OP_COMPRESSED message (header included) wrapping ``data`` and declaring ``declared`` bytes."""
    body = _COMPRESSED_PREFIX.pack(opcode, declared, compressor_id) + data
    return _HEADER.pack(_HEADER.size + len(body), 1, response_to, _OP_COMPRESSED) + body


def zlib_bomb(inflated: int) -> bytes:
    """A valid zlib stream of ``inflated`` zero bytes (a multiple of 1 MiB), about a thousandth of that long.

    Made without holding the output: 1 MiB of zeros deflated and flushed to a byte boundary makes the same
    bytes every time, so the stream is that piece repeated, an empty final block and the zeros' checksum.
    """
    if inflated <= 0 or inflated % MiB:
        raise ValueError("a zlib bomb inflates to a positive multiple of 1 MiB")
    deflater = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate: the zlib wrapper is written here
    piece = deflater.compress(bytes(MiB)) + deflater.flush(zlib.Z_FULL_FLUSH)
    empty_final_block = b"\x03\x00"
    # Adler-32 of n zeros: its first sum stays 1, its second adds 1 per byte.
    checksum = ((inflated % _ADLER_BASE) << 16) | 1
    return b"\x78\xda" + piece * (inflated // MiB) + empty_final_block + struct.pack(">I", checksum)


def snappy_preamble(length: int) -> bytes:
    """The varint that opens raw snappy data, stating its uncompressed length."""
    out = bytearray()
    while length >= 0x80:
        out.append(length & 0x7F | 0x80)
        length >>= 7
    out.append(length)
    return bytes(out)


def snappy_bomb(inflated: int, stated: int | None = None) -> bytes:
    """Raw snappy data making ``inflated`` zero bytes (3 bytes per 64), its preamble stating ``stated`` (by
    default the truth).

    One literal zero, then copies of 64 bytes from 1 byte back, which snappy allows to overlap.
    """
    if inflated < 2:
        raise ValueError("a snappy bomb inflates to at least 2 bytes")
    copies, rest = divmod(inflated - 1, 64)
    data = snappy_preamble(inflated if stated is None else stated) + b"\x00\x00" + b"\xfe\x01\x00" * copies
    if rest:
        data += bytes(((rest - 1) << 2 | 2, 1, 0))
    return data


def zstd_bomb(inflated: int, *, states_size: bool, window_log: int = 0) -> bytes:
    """One zstd frame of ``inflated`` zero bytes, its header stating that size or no size at all, and the
    window ``window_log`` asks for (0: the compression level's)."""
    import zstandard

    params = zstandard.ZstdCompressionParameters.from_level(
        3, window_log=window_log, write_content_size=states_size
    )
    compressor = zstandard.ZstdCompressor(compression_params=params).compressobj(
        size=inflated if states_size else -1
    )
    chunk = bytes(min(inflated, 4 * MiB))
    parts = []
    left = inflated
    while left:
        step = min(left, len(chunk))
        parts.append(compressor.compress(chunk[:step]))
        left -= step
    parts.append(compressor.flush())
    return b"".join(parts)


# -- the cases --------------------------------------------------------------------------------------------

SNAPPY, ZLIB, ZSTD = 1, 2, 3


class Case(NamedTuple):
    name: str
    what: str
    build: Callable[[], bytes]
    accepted: tuple[int, ...]  # the compressor ids the connection's handshake agreed to
    limit: int = DEFAULT_LIMIT


CASES = [
    Case(
        "zlib-bomb",
        "zlib, declares 200 B, inflates to 1 GiB",
        lambda: op_compressed(ZLIB, 200, zlib_bomb(GiB)),
        (ZLIB,),
    ),
    Case(
        "zlib-bomb-at-limit",
        "zlib, declares the limit, inflates to 1 GiB",
        lambda: op_compressed(ZLIB, DEFAULT_LIMIT - 16, zlib_bomb(GiB)),
        (ZLIB,),
    ),
    Case(
        "snappy-bomb",
        "snappy, declares 200 B, inflates to 900 MiB",
        lambda: op_compressed(SNAPPY, 200, snappy_bomb(900 * MiB)),
        (SNAPPY,),
    ),
    Case(
        "snappy-preamble-at-limit",
        "snappy, header and preamble say the limit, data makes 900 MiB",
        lambda: op_compressed(SNAPPY, DEFAULT_LIMIT - 16, snappy_bomb(900 * MiB, stated=DEFAULT_LIMIT - 16)),
        (SNAPPY,),
    ),
    Case(
        "zstd-bomb",
        "zstd, declares 200 B, frame states 1 GiB",
        lambda: op_compressed(ZSTD, 200, zstd_bomb(GiB, states_size=True)),
        (ZSTD,),
    ),
    Case(
        "zstd-bomb-no-size",
        "zstd, declares 200 B, frame states no size, inflates to 1 GiB",
        lambda: op_compressed(ZSTD, 200, zstd_bomb(GiB, states_size=False)),
        (ZSTD,),
    ),
    Case(
        "zstd-bomb-at-limit",
        "zstd, declares the limit, frame states no size, inflates to 1 GiB",
        lambda: op_compressed(ZSTD, DEFAULT_LIMIT - 16, zstd_bomb(GiB, states_size=False)),
        (ZSTD,),
    ),
    Case(
        "zstd-bomb-at-limit-8-mib-window",
        "zstd, declares the limit, frame states no size and an 8 MiB window, inflates to 1 GiB",
        lambda: op_compressed(ZSTD, DEFAULT_LIMIT - 16, zstd_bomb(GiB, states_size=False, window_log=23)),
        (ZSTD,),
    ),
    Case(
        "zstd-bomb-at-limit-128-mib-window",
        "zstd, declares the limit, frame states no size and a 128 MiB window, inflates to 1 GiB",
        lambda: op_compressed(ZSTD, DEFAULT_LIMIT - 16, zstd_bomb(GiB, states_size=False, window_log=27)),
        (ZSTD,),
    ),
    Case(
        "zstd-unnegotiated",
        "zstd bomb to a connection that agreed to zlib only",
        lambda: op_compressed(ZSTD, 200, zstd_bomb(GiB, states_size=True)),
        (ZLIB,),
    ),
    Case(
        "snappy-uncompressed-connection",
        "snappy bomb to a connection that agreed to no compressor",
        lambda: op_compressed(SNAPPY, 200, snappy_bomb(900 * MiB)),
        (),
    ),
    Case(
        "declared-over-limit",
        "zlib, declares 2 GiB - 1",
        lambda: op_compressed(ZLIB, 2**31 - 1, zlib_bomb(MiB)),
        (ZLIB,),
    ),
    Case("declared-negative", "zlib, declares -1", lambda: op_compressed(ZLIB, -1, zlib_bomb(MiB)), (ZLIB,)),
]


# -- measuring ---------------------------------------------------------------------------------------------


def peak_rss_bytes() -> int:
    """This process's RSS high-water mark (``VmHWM``, Linux)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def child(path: str, accepted: list[int], limit: int) -> dict[str, object]:
    """Parse the message in ``path`` as a connection would; the time to the error and the RSS it cost."""
    from mongio.errors import ProtocolError
    from mongio.wire.message import parse_message

    for module in ("snappy", "zstandard"):  # imported before measuring: the bombs are what is measured
        __import__(module)
    message = Path(path).read_bytes()
    gc.collect()
    before = peak_rss_bytes()
    start = time.perf_counter()
    try:
        parse_message(message, limit, frozenset(accepted))
    except ProtocolError as error:
        outcome = f"ProtocolError: {error}"
    else:
        outcome = "accepted"
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "error": outcome, "rss_growth": peak_rss_bytes() - before}


def run_case(case: Case, scratch: Path) -> dict[str, object]:
    message = case.build()
    path = scratch / f"{case.name}.bin"
    path.write_bytes(message)
    command = [
        sys.executable,
        "-m",
        "benchmarks.hostile_decompress",
        "--child",
        str(path),
        "--accept",
        ",".join(map(str, case.accepted)),
        "--limit",
        str(case.limit),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    result: dict[str, object] = json.loads(done.stdout)
    result["wire_bytes"] = len(message)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--case", action="append", choices=[case.name for case in CASES])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--accept", default="", help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        accepted = [int(item) for item in args.accept.split(",") if item]
        print(json.dumps(child(args.child, accepted, args.limit)))
        return 0
    cases = [case for case in CASES if not args.case or case.name in args.case]
    failed = False
    print(
        f"| case | message | wire bytes | time to error (median of {args.rounds}) | peak RSS growth (max) | error |"
    )
    print("|---|---|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for case in cases:
            runs = [run_case(case, Path(scratch)) for _ in range(args.rounds)]
            seconds = statistics.median(float(str(run["seconds"])) for run in runs)
            growth = max(int(str(run["rss_growth"])) for run in runs)
            errors = {str(run["error"]) for run in runs}
            error = " / ".join(sorted(errors))
            ok = (
                seconds < 1 and growth < 64 * MiB and all(text.startswith("ProtocolError") for text in errors)
            )
            failed |= not ok
            print(
                f"| {case.name} | {case.what} | {runs[0]['wire_bytes']:,} | {seconds * 1000:.1f} ms "
                f"| {growth / MiB:.1f} MiB | {error}{'' if ok else ' **(over target)**'} |"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
