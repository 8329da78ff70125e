"""Closing a client while operations are in flight against a server that stalls.

    PYTHONPATH=src .venv/bin/python -m benchmarks.close_inflight [--rounds 5] [--finds 100] [--json FILE]

Each round runs in a fresh process started with ``-X dev -W error`` (asyncio debug mode, every warning an
error). The process starts a stalled peer on loopback: it answers the handshake (a standalone that supports
sessions) and ``ping``, then never answers anything else. A client starts ``--finds`` tasks that each run
``find_one``, waits until the peer has received every one of them, and awaits ``client.close()``. It records
how long ``close()`` took, when each find ended relative to ``close()`` returning, how each one ended, and,
once every find has ended (or ``--limit`` seconds passed) and the peer has stopped, the tasks still left on
the loop. Two variants: ``cold`` (no server session pooled: ``close()`` sends nothing) and ``pooled`` (a
``ping`` in as many explicit sessions as there are finds, and one more, pools more server sessions than the
finds take, so ``close()`` sends ``endSessions``, which waits for a connection, or for the peer that stalls it,
at most 5 s).

The report gives, per variant, over the rounds: ``close()``'s duration (median, max), the latest any find
ended after ``close()`` returned (median and max over rounds; a negative figure: every find had ended before
``close()`` returned), finds not ended within the limit, tasks left, the distinct error texts (connection
numbers and ports replaced by ``N``), and whatever the process wrote to stderr (warnings under ``-X dev``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.loopback_responder import hello_reply
from mongio.bson import decode, encode
from mongio.wire import OpMsg, OpQuery, encode_op_msg, encode_op_reply, next_request_id, parse_message

VARIANTS = ("cold", "pooled")
_HEADER_SIZE = 16
_REPO = Path(__file__).resolve().parents[1]


class StalledPeer:
    """Answers the handshake and ``ping``; holds every other request unanswered, reading on."""

    def __init__(self) -> None:
        self.finds = 0
        self._found = asyncio.Event()
        self._wanted = 0
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[Any]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def wait_for_finds(self, count: int) -> None:
        self._wanted = count
        if self.finds < count:
            await self._found.wait()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            while True:
                header = await reader.readexactly(_HEADER_SIZE)
                length = int.from_bytes(header[:4], "little", signed=True)
                message = header + await reader.readexactly(length - _HEADER_SIZE)
                reply = self._answer(message)
                if reply is not None:
                    writer.write(reply)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            self._handlers.discard(task)

    def _answer(self, message: bytes) -> bytes | None:
        parsed = parse_message(message)
        content = parsed.content
        request_id = parsed.header.request_id
        if isinstance(content, OpQuery):  # the first handshake's legacy isMaster
            return bytes(encode_op_reply(next_request_id(), request_id, [encode(hello_reply(0))]))
        assert isinstance(content, OpMsg)
        name = next(iter(decode(content.body)), "")
        if name.lower() in ("hello", "ismaster"):
            return bytes(encode_op_msg(next_request_id(), encode(hello_reply(0)), response_to=request_id))
        if name == "ping":
            return bytes(encode_op_msg(next_request_id(), encode({"ok": 1}), response_to=request_id))
        if name == "find":
            self.finds += 1
            if self.finds >= self._wanted > 0:
                self._found.set()
        return None


async def probe(finds: int, variant: str, limit: float) -> dict[str, Any]:
    """One measurement (run in the child process): see the module docstring."""
    from mongio import MongoClient

    loop = asyncio.get_running_loop()
    peer = StalledPeer()
    await peer.start()
    client = MongoClient(f"mongodb://127.0.0.1:{peer.port}/?directConnection=true")
    if variant == "pooled":
        # A session per find and one more, each used once, then ended: their server sessions are pooled, and
        # one is still there while the finds hold theirs.
        sessions = [client.start_session() for _ in range(finds + 1)]
        for session in sessions:
            await client.admin.command("ping", session=session)
        for session in sessions:
            await session.end_session()
    else:
        await client.aconnect()
    ended: dict[asyncio.Task[Any], float] = {}

    def record_end(task: asyncio.Task[Any]) -> None:
        ended[task] = loop.time()

    tasks = [asyncio.create_task(client.db.coll.find_one({"i": i})) for i in range(finds)]
    for task in tasks:
        task.add_done_callback(record_end)
    async with asyncio.timeout(limit):
        await peer.wait_for_finds(finds)
    started = loop.time()
    await client.close()
    returned = loop.time()
    _, unended = await asyncio.wait(tasks, timeout=limit)
    errors: dict[str, int] = {}
    for task in tasks:
        if task.done():
            outcome = "cancelled" if task.cancelled() else _describe(task.exception())
            errors[outcome] = errors.get(outcome, 0) + 1
    for task in unended:
        task.cancel()
    await asyncio.gather(*unended, return_exceptions=True)
    await peer.stop()
    await asyncio.sleep(0)  # let the last callbacks of the closed connections run
    left = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    return {
        "close_seconds": returned - started,
        "latest_end_after_close": max(ended.values()) - returned if ended else None,
        "unended": len(unended),
        "tasks_left": [repr(task) for task in left],
        "errors": errors,
    }


def _describe(error: BaseException | None) -> str:
    if error is None:
        return "no error"
    text = re.sub(r"\d+", "N", str(error))
    return f"{type(error).__name__}: {text}"


def run_once(finds: int, variant: str, limit: float = 30.0) -> dict[str, Any]:
    """One round in a fresh ``-X dev -W error`` process (importing the same mongio as this one); its
    measurement plus what it wrote to stderr."""
    import mongio

    paths = [str(Path(mongio.__file__).resolve().parents[1]), str(_REPO)]
    inherited = os.environ.get("PYTHONPATH")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, *([inherited] if inherited else [])])}
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "dev",
            "-W",
            "error",
            "-m",
            "benchmarks.close_inflight",
            "--probe",
            "--finds",
            str(finds),
            "--variant",
            variant,
            "--limit",
            str(limit),
        ],
        capture_output=True,
        text=True,
        timeout=limit * 3 + 60,
        check=False,
        cwd=_REPO,
        env=environment,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"{variant}: exit {done.returncode}: {done.stderr.strip()[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["stderr"] = done.stderr
    return result


def report(results: dict[str, list[dict[str, Any]]]) -> str:
    lines = []
    for variant, runs in results.items():
        closes = [run["close_seconds"] * 1000 for run in runs]
        latest = [run["latest_end_after_close"] * 1000 for run in runs if run["latest_end_after_close"] is not None]
        errors: dict[str, int] = {}
        for run in runs:
            for text, count in run["errors"].items():
                errors[text] = errors.get(text, 0) + count
        stderr = [line for run in runs for line in run["stderr"].splitlines() if line.strip()]
        lines.append(f"{variant} ({len(runs)} rounds):")
        lines.append(f"  close() took: median {statistics.median(closes):.1f} ms, max {max(closes):.1f} ms")
        if latest:
            lines.append(
                f"  latest find end after close() returned: median {statistics.median(latest):.1f} ms, "
                f"max {max(latest):.1f} ms"
            )
        lines.append(f"  finds not ended within the limit: {sum(run['unended'] for run in runs)}")
        lines.append(f"  tasks left on the loop: {sum(len(run['tasks_left']) for run in runs)}")
        lines.append("  how the finds ended (over all rounds):")
        lines.extend(f"    {count:5d} x {text}" for text, count in sorted(errors.items(), key=lambda kv: -kv[1]))
        lines.append(f"  stderr under -X dev -W error: {len(stderr)} line(s)")
        lines.extend(f"    {line}" for line in stderr[:20])
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--finds", type=int, default=100)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--limit", type=float, default=30.0, help="seconds to wait for the finds to end")
    parser.add_argument("--json", help="also write every round's measurement to this file")
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--variant", default="cold", help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.probe:
        print(json.dumps(asyncio.run(probe(arguments.finds, arguments.variant, arguments.limit))), flush=True)
        return
    results: dict[str, list[dict[str, Any]]] = {}
    for round_index in range(arguments.rounds):
        for variant in [name for name in arguments.variants.split(",") if name]:
            started = time.perf_counter()
            result = run_once(arguments.finds, variant, arguments.limit)
            results.setdefault(variant, []).append(result)
            print(
                f"round {round_index + 1} {variant}: {time.perf_counter() - started:.1f} s",
                file=sys.stderr,
            )
    if arguments.json:
        with open(arguments.json, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=1)
    print(report(results))


if __name__ == "__main__":
    main()
