"""BSON encode/decode throughput: mongio against PyMongo's bson (C extension and pure Python).

Uses the benchmarking specification's flat, deep and full documents (``extended_bson.tgz``). Each
measurement is the median of several rounds, each round encoding (or decoding) the document many times;
throughput is in MB/s of BSON.

    .venv/bin/python -m benchmarks.bson_bench [--rounds 7] [--seconds 0.3] [--no-pure]

PyMongo's pure-Python bson is built on demand into ``benchmarks/.peers/pymongo-pure`` and measured in a
subprocess with that directory first on ``sys.path`` (so it cannot pick up the C extension).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SPECS = Path(os.environ.get("MONGIO_SPECS", ROOT.parent / "shared" / "specifications" / "source"))
ARCHIVE = SPECS / "benchmarking" / "data" / "extended_bson.tgz"
PURE_PEER = ROOT / "benchmarks" / ".peers" / "pymongo-pure"
PYMONGO_VERSION = "4.20.0"
DATASETS = ("flat", "deep", "full")


def load_bson_documents() -> dict[str, bytes]:
    """Each dataset's Extended JSON, parsed with PyMongo's json_util and encoded once to BSON bytes."""
    from bson import encode as pymongo_encode
    from bson import json_util

    documents: dict[str, bytes] = {}
    with tarfile.open(ARCHIVE) as archive:
        for member in archive.getmembers():
            name = Path(member.name).name
            for dataset in DATASETS:
                if name == f"{dataset}_bson.json":
                    handle = archive.extractfile(member)
                    assert handle is not None
                    document = json_util.loads(handle.read().decode("utf-8"))
                    documents[dataset] = pymongo_encode(document)
    missing = set(DATASETS) - set(documents)
    if missing:
        raise SystemExit(f"{ARCHIVE} lacks {sorted(missing)}")
    return documents


_SLICES = 10

Codec = tuple[Callable[[Any], bytes], Callable[[bytes], Any]]


def _repeat_for(operation: Callable[[], Any], seconds: float) -> int:
    """How many calls of ``operation`` take about ``seconds`` (after a warm-up)."""
    start = time.perf_counter()
    calls = 0
    while time.perf_counter() - start < seconds / 4:
        operation()
        calls += 1
    per_call = (time.perf_counter() - start) / calls
    return max(1, int(seconds / per_call))


def measure(
    codecs: dict[str, Codec], documents: dict[str, bytes], rounds: int, seconds: float
) -> dict[str, Any]:
    """MB/s per codec, dataset and operation: the median of ``rounds`` rounds of about ``seconds`` each.

    The codecs' rounds are interleaved, so a busy machine slows them alike and their ratios stay fair.
    """
    results: dict[str, Any] = {name: {} for name in codecs}
    for dataset, data in documents.items():
        operations: dict[tuple[str, str], Callable[[], Any]] = {}
        for name, (encode, decode) in codecs.items():
            document = decode(data)
            if encode(document) != data:
                raise SystemExit(f"{name} does not round-trip the {dataset} document byte for byte")
            operations[name, "encode"] = functools.partial(encode, document)
            operations[name, "decode"] = functools.partial(decode, data)
            results[name][dataset] = {}
        for op in ("encode", "decode"):
            # Each round is cut into slices that alternate between the codecs, so a burst of load on a
            # shared machine lands on all of them rather than on whichever happened to be running.
            repeats = {name: max(1, _repeat_for(operations[name, op], seconds) // _SLICES) for name in codecs}
            samples: dict[str, list[float]] = {name: [] for name in codecs}
            for _ in range(rounds):
                elapsed = dict.fromkeys(codecs, 0.0)
                for _ in range(_SLICES):
                    for name in codecs:
                        operation, repeat = operations[name, op], repeats[name]
                        begin = time.perf_counter()
                        for _ in range(repeat):
                            operation()
                        elapsed[name] += time.perf_counter() - begin
                for name in codecs:
                    samples[name].append(len(data) * repeats[name] * _SLICES / elapsed[name] / 1e6)
            for name in codecs:
                results[name][dataset][op] = statistics.median(samples[name])
    return results


def ensure_pure_peer() -> None:
    if (PURE_PEER / "bson" / "__init__.py").exists():
        return
    PURE_PEER.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--no-binary", "pymongo",
            f"pymongo=={PYMONGO_VERSION}", "--no-deps", "--target", str(PURE_PEER),
        ],
        check=True,
        env={**os.environ, "NO_EXT": "1"},
    )  # fmt: skip


def run_pure_peer(documents: dict[str, bytes], rounds: int, seconds: float) -> dict[str, Any]:
    ensure_pure_peer()
    payload = json.dumps({k: v.hex() for k, v in documents.items()})
    completed = subprocess.run(
        [sys.executable, __file__, "--as-pure-peer", "--rounds", str(rounds), "--seconds", str(seconds)],
        input=payload,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(completed.stdout)
    return result


def pure_peer_main(rounds: int, seconds: float) -> None:
    sys.path.insert(0, str(PURE_PEER))
    import bson

    if bson.has_c():
        raise SystemExit(f"{PURE_PEER} holds a compiled bson; rebuild it with NO_EXT=1")
    sys.path.insert(1, str(ROOT / "src"))
    from mongio import bson as mongio_bson

    documents = {k: bytes.fromhex(v) for k, v in json.loads(sys.stdin.read()).items()}
    codecs: dict[str, Codec] = {
        "mongio": (mongio_bson.encode, mongio_bson.decode),
        "pymongo pure": (bson.encode, bson.decode),
    }
    print(json.dumps(measure(codecs, documents, rounds, seconds)))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=0.3, help="length of one round")
    parser.add_argument("--no-pure", action="store_true", help="skip PyMongo's pure-Python bson")
    parser.add_argument(
        "--pymongo-types",
        action="store_true",
        help="also measure mongio decoding to PyMongo's bson classes (the PyMongo-typed mode)",
    )
    parser.add_argument("--as-pure-peer", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rounds < 5:
        parser.error("use at least 5 rounds")
    if args.as_pure_peer:
        pure_peer_main(args.rounds, args.seconds)
        return

    sys.path.insert(0, str(ROOT / "src"))
    import bson as pymongo_bson

    from mongio import bson as mongio_bson

    if not pymongo_bson.has_c():
        raise SystemExit("the installed pymongo has no C extension to compare with")
    documents = load_bson_documents()
    codecs: dict[str, Codec] = {
        "mongio": (mongio_bson.encode, mongio_bson.decode),
        "pymongo C": (pymongo_bson.encode, pymongo_bson.decode),
    }
    if args.pymongo_types:
        from mongio.pymongo_types import typed_codec_options

        typed = typed_codec_options(mongio_bson.DEFAULT_CODEC_OPTIONS)
        codecs["mongio typed"] = (mongio_bson.encode, lambda data: mongio_bson.decode(data, typed))
    results = measure(codecs, documents, args.rounds, args.seconds)
    # mongio/pure comes from the peer process, where the two were measured side by side.
    pure_ratio: dict[str, dict[str, float]] | None = None
    if not args.no_pure:
        peer = run_pure_peer(documents, args.rounds, args.seconds)
        results["pymongo pure"] = peer["pymongo pure"]
        pure_ratio = {
            dataset: {
                op: peer["mongio"][dataset][op] / peer["pymongo pure"][dataset][op]
                for op in ("encode", "decode")
            }
            for dataset in DATASETS
        }

    print(f"BSON throughput, MB/s (median of {args.rounds} rounds; mongio codec: "
          f"{'compiled' if mongio_bson.has_c() else 'pure Python'})")  # fmt: skip
    header = f"{'dataset':<8} {'op':<7} {'bytes':>6} " + "".join(f"{name:>14}" for name in results)
    if pure_ratio is not None:
        header += f"{'mongio/pure':>13}"
    header += f"{'mongio/C':>10}"
    if "mongio typed" in results:
        header += f"{'typed/C':>9}"
    print(header)
    for dataset in DATASETS:
        for op in ("encode", "decode"):
            row = f"{dataset:<8} {op:<7} {len(documents[dataset]):>6} "
            row += "".join(f"{results[name][dataset][op]:>14.1f}" for name in results)
            mine = results["mongio"][dataset][op]
            if pure_ratio is not None:
                row += f"{pure_ratio[dataset][op]:>13.2f}"
            row += f"{mine / results['pymongo C'][dataset][op]:>10.2f}"
            if "mongio typed" in results:
                row += f"{results['mongio typed'][dataset][op] / results['pymongo C'][dataset][op]:>9.2f}"
            print(row)
    # The pure-Python peer cannot share a process with the C extension, so it runs in its own process
    # beside a second copy of mongio; its column and mongio's were taken at different moments.
    print("mongio and pymongo C: interleaved in this process; mongio/C from those columns.")
    if pure_ratio is not None:
        print("pymongo pure: a separate process, interleaved there with mongio; mongio/pure is that pair's ratio.")


if __name__ == "__main__":
    main()
