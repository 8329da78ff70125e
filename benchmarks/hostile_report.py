"""What a hostile server costs a client: for each case, the time to the error, the error, and the growth of the
client process's peak resident memory.

    PYTHONPATH=src .venv/bin/python benchmarks/hostile_report.py [--case NAME ...] [--list]

The hostile server (``tests/support/hostile_server.py``) runs in this process; each case's client runs in a
fresh Python process of its own, so that its peak RSS is the case's alone. The client connects, pings (sane),
then, right before the hostile operation, resets its RSS high-water mark (``/proc/self/clear_refs``; where
that is refused, the mark before the operation is the baseline) and reads its RSS. Afterwards the growth is
``VmHWM`` (``/proc/self/status``) minus that baseline.

The time is until the operation ended: in an error for a find (the error is shown; a find that succeeds did
not see the problem), for ``close()`` until it returned (without raising, it should), and for the finds in
flight at ``close()``, from ``close()`` returning to the last of them ending. The targets are an error within
1 s and a growth under 64 MB; "targets met" says whether a case ended as it should and met both.

The bombs are real: each inflates to 1 GiB; a client that trusts them holds that much (or twice as much),
so the cases run one at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
ROOT = SCRIPT.parent.parent
if __package__ in (None, ""):  # run as a script: the hostile server lives in the repository's tests package
    sys.path.insert(0, str(ROOT))

from tests.support.hostile_server import (  # noqa: E402
    MIB,
    AllAtOnce,
    BadLength,
    Behaviour,
    Bomb,
    DeepNesting,
    ForeignCompressor,
    ForgedLength,
    Handshake,
    HostileServer,
    InvalidUtf8,
    Stall,
    Trickle,
    Truncated,
    WrongResponseTo,
)

from mongio import MongoClient  # noqa: E402
from mongio.events.command import CommandListener, CommandStartedEvent  # noqa: E402

GIB = 1024 * MIB
TARGET_SECONDS = 1.0
TARGET_GROWTH = 64_000_000
# How long a client waits for what never comes (a stalled find after close()) before the case reports it.
PATIENCE = 10.0
CLIENT_TIMEOUT = 120.0  # for a whole client process, in case one hangs
FINDS_IN_FLIGHT = 100
POOLED_CONNECTIONS = 10
ALL_COMPRESSORS = ("zlib", "snappy", "zstd")


# -- the cases ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One hostile case: what the server says and does (made in the report's process), what the client is
    configured with and the operation it meets it with (run in the client's process)."""

    name: str
    script: Callable[[], Mapping[str, Behaviour]]
    operation: str
    handshake: Handshake = field(default_factory=lambda: Handshake(compressors=ALL_COMPRESSORS))
    options: Mapping[str, Any] = field(default_factory=dict)

    def server(self) -> HostileServer:
        return HostileServer(self.handshake, self.script())


def finds(behaviour: Callable[[], Behaviour]) -> Callable[[], Mapping[str, Behaviour]]:
    return lambda: {"find": behaviour()}


def bomb_case(compressor: str, inflated: int) -> Case:
    return Case(
        f"{compressor} bomb ({inflated // MIB} MiB, declares 200 bytes)",
        finds(lambda: Bomb(compressor, inflated=inflated, declared=200)),
        "find",
        options={"compressors": compressor},
    )


CASES = [
    bomb_case("zlib", GIB),
    # snappy inflates at most about 21 times (a 3-byte copy makes 64 bytes): 900 MiB takes 44 MB on the
    # wire, under the default 48 MB message limit (1 GiB would be refused at its header).
    bomb_case("snappy", 900 * MIB),
    bomb_case("zstd", GIB),
    Case(
        "zlib reply, no compression negotiated",
        finds(lambda: ForeignCompressor("zlib")),
        "find",
    ),
    Case(
        "zstd reply, zlib negotiated",
        finds(lambda: ForeignCompressor("zstd")),
        "find",
        options={"compressors": "zlib"},
    ),
    Case("header length 5", finds(lambda: BadLength(5)), "find"),
    Case("header length -1", finds(lambda: BadLength(-1)), "find"),
    Case(
        "2 GB header, then 64 MiB, one connection",
        finds(lambda: ForgedLength(2**31 - 1, send=64 * MIB)),
        "find",
    ),
    Case(
        "2 GB header, then 64 MiB, pool of 10",
        finds(lambda: AllAtOnce(ForgedLength(2**31 - 1, send=64 * MIB), POOLED_CONNECTIONS)),
        "concurrent finds",
    ),
    Case(
        "48 MB header (the default limit), 1 MiB over 0.2 s, pool of 10",
        finds(
            lambda: AllAtOnce(
                ForgedLength(48_000_000, send=MIB, chunk=64 * 1024, interval=0.0125), POOLED_CONNECTIONS
            )
        ),
        "concurrent finds",
    ),
    Case(
        "hello maxMessageSizeBytes 1 TB, 2 GB header, then 64 MiB",
        finds(lambda: ForgedLength(2**31 - 1, send=64 * MIB)),
        "find",
        handshake=Handshake(max_message_size=10**12),
    ),
    Case("10,000-level nesting", finds(lambda: DeepNesting(10_000)), "find"),
    Case("invalid UTF-8", finds(lambda: InvalidUtf8()), "find"),
    Case("wrong responseTo", finds(lambda: WrongResponseTo()), "find"),
    Case("truncated (20 bytes, then hang-up)", finds(lambda: Truncated(keep=20)), "find"),
    Case(
        "trickle (1 byte / 50 ms), timeoutMS=500",
        finds(lambda: Trickle(chunk=1, interval=0.05)),
        "find",
        options={"timeoutMS": 500},
    ),
    Case(
        "close(), endSessions reply with invalid UTF-8",
        lambda: {"endSessions": InvalidUtf8()},
        "close after a find",
    ),
    Case(
        f"close(), {FINDS_IN_FLIGHT} finds in flight on a stalled server",
        finds(lambda: Stall()),
        "close with finds in flight",
    ),
]
CASES_BY_NAME = {case.name: case for case in CASES}


# -- the client's side --------------------------------------------------------------------------------------


def proc_status_bytes(field_name: str) -> int:
    """A ``kB`` field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``), in bytes."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field_name}")


class RssMeter:
    """The growth of this process's RSS high-water mark from :meth:`start` on."""

    def __init__(self) -> None:
        self.baseline = 0
        self.reset = False

    def start(self) -> None:
        gc.collect()
        try:
            with open("/proc/self/clear_refs", "w", encoding="ascii") as clear_refs:
                clear_refs.write("5")  # resets VmHWM to the current RSS
            self.reset = True
            self.baseline = proc_status_bytes("VmRSS")
        except OSError:
            self.baseline = proc_status_bytes("VmHWM")

    def growth(self) -> int:
        return proc_status_bytes("VmHWM") - self.baseline


class FindsStarted(CommandListener):
    """Sets ``all_started`` once ``count`` finds were started (each is on the wire right after)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.all_started = asyncio.Event()

    def started(self, event: CommandStartedEvent) -> None:
        if event.command_name == "find":
            self.count -= 1
            if self.count == 0:
                self.all_started.set()


def describe(error: BaseException | None) -> str:
    if error is None:
        return "(no error)"
    return f"{type(error).__name__}: {str(error)[:100]}"


@dataclass
class Outcome:
    """How the operation ended: ``ended_as_it_should`` (in an error for a find, without one for close()),
    after ``seconds``, with ``text`` saying how."""

    ended_as_it_should: bool
    seconds: float
    text: str


async def one_find(client: MongoClient, meter: RssMeter) -> Outcome:
    meter.start()
    started = time.perf_counter()
    try:
        await asyncio.wait_for(client.db.coll.find_one({}), PATIENCE)
    except Exception as exc:
        return Outcome(True, time.perf_counter() - started, describe(exc))
    return Outcome(False, time.perf_counter() - started, describe(None))


async def concurrent_finds(client: MongoClient, meter: RssMeter) -> Outcome:
    meter.start()
    started = time.perf_counter()
    operations = (client.db.coll.find_one({}) for _ in range(POOLED_CONNECTIONS))
    results = await asyncio.wait_for(asyncio.gather(*operations, return_exceptions=True), PATIENCE)
    errors = [result for result in results if isinstance(result, BaseException)]
    text = f"{len(errors)}/{len(results)} failed; {describe(errors[0] if errors else None)}"
    return Outcome(len(errors) == len(results), time.perf_counter() - started, text)


async def close_after_find(client: MongoClient, meter: RssMeter) -> Outcome:
    await client.db.coll.find_one({})  # leaves a server session for close() to end
    meter.start()
    started = time.perf_counter()
    try:
        await asyncio.wait_for(client.close(), PATIENCE)
    except Exception as exc:
        return Outcome(False, time.perf_counter() - started, "close() raised " + describe(exc))
    return Outcome(True, time.perf_counter() - started, "close() returned")


async def find_ending(client: MongoClient) -> tuple[float, BaseException | None]:
    """When a find ended, and its error."""
    try:
        await client.db.coll.find_one({})
    except Exception as exc:
        return time.perf_counter(), exc
    return time.perf_counter(), None


async def close_with_finds_in_flight(
    client: MongoClient, meter: RssMeter, started_finds: FindsStarted
) -> Outcome:
    """Time from close() returning to the last of the finds in flight ending."""
    tasks = [asyncio.create_task(find_ending(client)) for _ in range(FINDS_IN_FLIGHT)]
    await asyncio.wait_for(started_finds.all_started.wait(), PATIENCE)
    meter.start()
    await asyncio.wait_for(client.close(), PATIENCE)
    closed = time.perf_counter()
    done, pending = await asyncio.wait(tasks, timeout=PATIENCE)
    for task in pending:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if pending:
        text = f"{len(pending)}/{FINDS_IN_FLIGHT} finds still running {PATIENCE:.0f} s after close() returned"
        return Outcome(False, time.perf_counter() - closed, text)
    endings = [task.result() for task in done]
    last = max(ended for ended, _error in endings)
    errors = [error for _ended, error in endings if error is not None]
    text = f"{len(errors)}/{FINDS_IN_FLIGHT} failed; {describe(errors[0] if errors else None)}"
    return Outcome(len(errors) == FINDS_IN_FLIGHT, max(last - closed, 0.0), text)


async def run_client(case: Case, uri: str) -> dict[str, Any]:
    """The case's operation against the server at ``uri``: its outcome and the RSS it cost."""
    meter = RssMeter()
    started_finds = FindsStarted(FINDS_IN_FLIGHT)
    client = MongoClient(
        uri, directConnection=True, retryReads=False, event_listeners=[started_finds], **case.options
    )
    operations: dict[str, Callable[[], Awaitable[Outcome]]] = {
        "find": lambda: one_find(client, meter),
        "concurrent finds": lambda: concurrent_finds(client, meter),
        "close after a find": lambda: close_after_find(client, meter),
        "close with finds in flight": lambda: close_with_finds_in_flight(client, meter, started_finds),
    }
    try:
        await client.admin.command("ping")
        outcome = await operations[case.operation]()
        growth = meter.growth()
    finally:
        try:
            await asyncio.wait_for(client.close(), PATIENCE)
        except Exception as exc:  # the close() cases report it; here it only must not hide the outcome
            print(f"close() after the case raised {describe(exc)}", file=sys.stderr)
    return {
        "ok": outcome.ended_as_it_should,
        "seconds": outcome.seconds,
        "text": outcome.text,
        "growth": growth,
        "reset": meter.reset,
    }


def client_main(name: str, uri: str) -> None:
    print(json.dumps(asyncio.run(run_client(CASES_BY_NAME[name], uri))))


# -- the report's side ----------------------------------------------------------------------------------------


async def measure(case: Case) -> dict[str, Any]:
    """Serve ``case`` here while a fresh client process meets it."""
    async with case.server() as server:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(SCRIPT),
            "--client",
            case.name,
            server.uri,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(), CLIENT_TIMEOUT)
        except TimeoutError:
            process.kill()
            await process.wait()
            return failed_client("the client process hung")
    if process.returncode != 0:
        last = err.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
        return failed_client(f"the client process failed: {last[0][:100]}")
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


def failed_client(text: str) -> dict[str, Any]:
    return {"ok": False, "seconds": float("nan"), "text": text, "growth": 0, "reset": True}


def row(case: Case, result: Mapping[str, Any]) -> str:
    seconds = result["seconds"]
    growth = result["growth"]
    met = result["ok"] and seconds <= TARGET_SECONDS and growth < TARGET_GROWTH
    return (
        f"| {case.name} | {seconds * 1000:.1f} ms | {growth / 1e6:.1f} MB | {'yes' if met else 'NO'} | "
        f"{result['text'].replace('|', '/')} |"
    )


async def report(cases: list[Case]) -> None:
    print(
        f"Targets: error within {TARGET_SECONDS:.0f} s, peak RSS growth under {TARGET_GROWTH / 1e6:.0f} MB."
    )
    print()
    print("| case | time to error | peak RSS growth | targets met | outcome |")
    print("|---|---|---|---|---|")
    resets = set()
    for case in cases:
        result = await measure(case)
        resets.add(result["reset"])
        print(row(case, result), flush=True)
    print()
    if resets == {True}:
        print("Peak RSS growth: VmHWM after the operation minus VmRSS before it, VmHWM reset just before it.")
    else:
        print(
            "Peak RSS growth: VmHWM after minus a baseline taken before the operation (VmHWM where it could"
        )
        print("not be reset, which under-counts a case whose peak stayed below the process's earlier peak).")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--case", action="append", choices=list(CASES_BY_NAME), help="run only these cases")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--client", nargs=2, metavar=("CASE", "URI"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client_main(*args.client)
        return
    if args.list:
        print("\n".join(CASES_BY_NAME))
        return
    asyncio.run(report([CASES_BY_NAME[name] for name in args.case] if args.case else CASES))


if __name__ == "__main__":
    main()
