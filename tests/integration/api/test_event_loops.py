"""One client on any event loop: successive loops, a loop per thread, and pytest-asyncio's function-scoped
loops sharing a module-scoped client; objects bound to one loop refuse another with a clear error.

Every test here fails on a loop error (a future's exception never retrieved, "attached to a different
loop"), on a ResourceWarning (an unclosed socket) and on a coroutine never awaited.
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from mongio import MongoClient
from mongio.errors import (
    ClientClosedError,
    EventLoopMismatchError,
    InvalidOperation,
    ServerSelectionTimeoutError,
)
from mongio.events.command import CommandStartedEvent, CommandSucceededEvent
from tests.support.loop_checks import LoopErrors, PoolEventCounts, collected_warnings, loop_problems
from tests.support.recorders import CommandRecorder

pytestmark = [
    pytest.mark.filterwarnings("error::ResourceWarning"),
    pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning"),
]

_ROOT = Path(__file__).resolve().parents[3]


def _assert_balanced(events: PoolEventCounts) -> None:
    assert events.count("ConnectionCreatedEvent") > 0
    assert events.count("ConnectionCreatedEvent") == events.count("ConnectionClosedEvent"), events.counts
    assert events.count("PoolCreatedEvent") == events.count("PoolClosedEvent"), events.counts
    assert events.count("ConnectionCheckedOutEvent") == events.count("ConnectionCheckedInEvent"), (
        events.counts
    )


# -- pytest-asyncio: a function-scoped loop per test, one client for the module ------------------------------

_MODULE_EVENTS = PoolEventCounts()
_MODULE_ERRORS = LoopErrors()


@pytest.fixture(scope="module")
def shared_client(server_uri: str) -> Iterator[MongoClient]:
    """Made outside any loop, used by several tests (each on its own loop), closed on one more."""
    client = MongoClient(server_uri, event_listeners=[_MODULE_EVENTS])
    yield client

    async def close() -> None:
        await client.close()

    with collected_warnings() as caught:
        _MODULE_ERRORS.run(close)
    assert loop_problems(_MODULE_ERRORS, caught) == []
    _assert_balanced(_MODULE_EVENTS)


@pytest.fixture
async def loop_guard() -> AsyncIterator[None]:
    _MODULE_ERRORS.install()
    yield


@pytest.mark.parametrize("round_", range(3))
async def test_module_client_on_each_test_loop(
    shared_client: MongoClient, loop_guard: None, round_: int
) -> None:
    collection = shared_client.loops_test.per_test
    await collection.insert_one({"round": round_})
    assert await collection.count_documents({"round": round_}) >= 1
    # Each test's loop opened its own pool: one per loop so far, the earlier ones closed with their loops.
    assert _MODULE_EVENTS.count("PoolCreatedEvent") == round_ + 1
    assert _MODULE_EVENTS.count("PoolClosedEvent") == round_
    assert _MODULE_ERRORS.messages == []


async def test_module_client_cursor_and_session_within_one_loop(
    shared_client: MongoClient, loop_guard: None
) -> None:
    collection = shared_client.loops_test.in_one_loop
    await collection.delete_many({})
    await collection.insert_many([{"n": n} for n in range(10)])
    async with shared_client.start_session() as session:
        found = await collection.find({}, session=session, batch_size=3).to_list()
    assert sorted(doc["n"] for doc in found) == list(range(10))


# -- successive asyncio.run() calls with a module-level client (own process) --------------------------------

_SUCCESSIVE_RUNS = """
import asyncio, gc, sys, warnings
warnings.simplefilter("error", ResourceWarning)
from mongio import MongoClient
from tests.support.loop_checks import LoopErrors, PoolEventCounts, collected_warnings, loop_problems

events = PoolEventCounts()
client = MongoClient(sys.argv[1], event_listeners=[events])   # module level: no loop runs yet
errors = LoopErrors()


async def use(run: int) -> int:
    await client.loops_test.successive.insert_one({"run": run})
    cursor = client.loops_test.successive.find({}, batch_size=1)
    await cursor.next()           # a server cursor left open: the runtime kills it when the loop ends
    async with client.start_session() as session:
        await client.loops_test.successive.find_one({}, session=session)
    return await client.loops_test.successive.count_documents({"run": run})


async def close() -> None:
    await client.close()


with collected_warnings() as caught:
    counts = [errors.run(lambda: use(run)) for run in range(4)]
    errors.run(close)
problems = loop_problems(errors, caught)
print("counts", counts)
print("problems", problems)
print("balanced", events.counts.get("ConnectionCreatedEvent") == events.counts.get("ConnectionClosedEvent"),
      events.counts.get("PoolCreatedEvent"), events.counts.get("PoolClosedEvent"))
"""


def _run_script(
    script: str, server_uri: str, *, dev_mode: bool = False, resource_warnings_fail: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a process of its own against ``server_uri``: in Python's development mode (``-X dev``)
    if asked, ResourceWarnings as errors unless told otherwise."""
    options = ["-X", "dev"] if dev_mode else []
    if resource_warnings_fail:
        options += ["-W", "error::ResourceWarning"]
    return subprocess.run(
        [sys.executable, *options, "-c", script, server_uri],
        capture_output=True,
        text=True,
        cwd=_ROOT,
        timeout=120,
    )


def _never_awaited_after_a_clean_exit(finished: subprocess.CompletedProcess[str]) -> list[str]:
    """The "never awaited" warnings of a script that exited cleanly: status 0, no task destroyed pending, no
    unclosed resource, no error."""
    assert finished.returncode == 0, finished.stderr
    stderr = finished.stderr
    for problem in ("Task was destroyed", "ResourceWarning", "RuntimeError", "unclosed", "Traceback"):
        assert problem not in stderr, stderr
    return [line for line in stderr.splitlines() if "was never awaited" in line]


def test_successive_asyncio_runs_with_a_module_level_client(server_uri: str) -> None:
    async def reset() -> None:
        client = MongoClient(server_uri)
        await client.loops_test.successive.delete_many({})
        await client.close()

    asyncio.run(reset())
    finished = _run_script(_SUCCESSIVE_RUNS, server_uri)
    assert finished.returncode == 0, finished.stderr
    assert "counts [1, 1, 1, 1]" in finished.stdout, finished.stdout + finished.stderr
    assert "problems []" in finished.stdout, finished.stdout + finished.stderr
    # A pool per run, and one for the closing loop, which connects to end the sessions the runs pooled.
    assert "balanced True 5 5" in finished.stdout, finished.stdout + finished.stderr
    assert "Error" not in finished.stderr and "Warning" not in finished.stderr, finished.stderr


@pytest.mark.parametrize("min_pool_size", [0, 2])
def test_a_loop_closed_without_shutting_down_is_let_go_of(server_uri: str, min_pool_size: int) -> None:
    """A loop closed while the client's tasks still pend there (no asyncio.run): the next loop drops what
    belonged to it, closing the sockets directly, and works. With minPoolSize, the pool's background task
    (which keeps the pool filled) is only forgotten, not woken through the closed loop."""
    events = PoolEventCounts()
    errors = LoopErrors()
    client = MongoClient(server_uri, event_listeners=[events], minPoolSize=min_pool_size)
    with collected_warnings() as caught:
        loop = asyncio.new_event_loop()
        loop.set_exception_handler(errors.handler)
        assert loop.run_until_complete(client.admin.command("ping"))["ok"] == 1
        # Long enough for the background task to fill the pool to minPoolSize and wait to be woken.
        loop.run_until_complete(asyncio.sleep(0.3))
        loop.close()

        async def again() -> None:
            assert (await client.admin.command("ping"))["ok"] == 1
            await client.close()

        errors.run(again)
    # The tasks the closed loop could not finish are reported destroyed by asyncio itself, as for any
    # library's tasks: what matters is that no socket is left open and nothing touched the closed loop.
    problems = [text for text in loop_problems(errors, caught) if "Task was destroyed" not in text]
    assert problems == []
    _assert_balanced(events)


def test_operations_pending_on_a_closed_loop_are_finalized_quietly(server_uri: str) -> None:
    """The tasks a closed loop left pending (a change stream waiting in its getMore, with a cursor and a
    deadline) are destroyed, and the garbage collector closes their coroutines later, outside any loop and
    context: their cleanup (checking the connection back in, closing the cursor, restoring the deadline) must
    not raise there."""
    errors = LoopErrors()
    client = MongoClient(server_uri, timeoutMS=60_000)
    collection = client.loops_test.finalized
    unraisable: list[str] = []
    previous_hook = sys.unraisablehook
    sys.unraisablehook = lambda report: unraisable.append(f"{report.exc_type.__name__}: {report.exc_value}")
    try:
        loop = asyncio.new_event_loop()
        loop.set_exception_handler(errors.handler)

        async def leave_a_stream_waiting() -> asyncio.Task[Any]:
            await collection.delete_many({})
            await collection.insert_many([{"n": n} for n in range(10)])
            stream = await collection.watch(max_await_time_ms=10_000)
            waiting = asyncio.ensure_future(stream.next())
            await asyncio.sleep(0.3)  # the stream's getMore is on the wire
            return waiting

        waiting = loop.run_until_complete(leave_a_stream_waiting())
        loop.close()

        async def close() -> None:
            await client.close()

        errors.run(close)
        del waiting, loop
        gc.collect()
    finally:
        sys.unraisablehook = previous_hook
    assert unraisable == []


def test_a_connection_still_opening_when_its_loop_closes_is_closed() -> None:
    """A connection in its handshake belongs to no pool or monitor yet, only to a task the closed loop will never
    run again: letting go of the loop must still close its socket, at once rather than when the garbage
    collector finalizes the task. The listener accepts nothing before the end, so each monitor's connection is
    made by the kernel and then waits for its hello's reply."""
    errors = LoopErrors()
    with socket.create_server(("127.0.0.1", 0)) as silent, collected_warnings() as caught:
        port = silent.getsockname()[1]
        client = MongoClient(f"mongodb://127.0.0.1:{port}/?directConnection=true&serverSelectionTimeoutMS=300")
        # Once its loop is closed, the pending task and its connection are garbage, and a collection would close
        # the socket as it finalizes the task: the collector waits until the check is done.
        gc.disable()
        try:
            _ping_a_silent_server_then_close_the_loop(client, errors)

            async def fail_and_close_from_another_loop() -> None:
                with pytest.raises(ServerSelectionTimeoutError):
                    await client.admin.command("ping")
                await client.close()

            errors.run(fail_and_close_from_another_loop)
            # Both monitors' connections (the closed loop's, and the second loop's) must be closed: the server
            # side reads their hello and then the end of the stream.
            silent.settimeout(5)
            for _ in range(2):
                accepted, _address = silent.accept()
                with accepted:
                    accepted.settimeout(5)
                    assert _read_to_the_end(accepted) > 0
        finally:
            gc.enable()
    problems = [text for text in loop_problems(errors, caught) if "Task was destroyed" not in text]
    assert problems == []


def _ping_a_silent_server_then_close_the_loop(client: MongoClient, errors: LoopErrors) -> None:
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(errors.handler)
    # Not pytest.raises: its traceback would keep the pending task alive, and it would be finalized later.
    try:
        loop.run_until_complete(client.admin.command("ping"))
    except ServerSelectionTimeoutError:
        pass
    else:
        raise AssertionError("a server that never answers was selected")
    loop.close()


def _read_to_the_end(sock: socket.socket) -> int:
    """How many bytes the peer sent before closing (a ``TimeoutError`` if it never closes)."""
    total = 0
    while chunk := sock.recv(65536):
        total += len(chunk)
    return total


def test_close_from_a_loop_the_client_never_used_ends_the_sessions_pooled_by_earlier_loops(server_uri: str) -> None:
    """Each asyncio.run() closes what the client ran on its loop when it shuts down, but the server sessions
    stay pooled (they belong to the client, not to a loop): close() from a new loop still sends endSessions,
    over a connection made there for it, and leaves nothing open."""
    commands = CommandRecorder()
    events = PoolEventCounts()
    errors = LoopErrors()
    client = MongoClient(server_uri, event_listeners=[commands, events])

    async def ping() -> None:
        await client.admin.command("ping")

    async def close() -> None:
        await client.close()

    with collected_warnings() as caught:
        errors.run(ping)
        errors.run(ping)
        lsids = {str(event.command["lsid"]) for event in commands.of(CommandStartedEvent, "ping")}
        assert len(lsids) == 1  # the second loop took the session the first one pooled
        errors.run(close)
    (ended,) = commands.of(CommandStartedEvent, "endSessions")
    assert [str(lsid) for lsid in ended.command["endSessions"]] == list(lsids)
    assert len(commands.of(CommandSucceededEvent, "endSessions")) == 1
    assert len(client._executor.session_pool) == 0
    assert loop_problems(errors, caught) == []
    assert events.count("PoolCreatedEvent") == 3  # two loops' operations, and the closing loop's
    _assert_balanced(events)


def test_close_without_pooled_sessions_opens_nothing(server_uri: str) -> None:
    commands = CommandRecorder()
    events = PoolEventCounts()
    client = MongoClient(server_uri, event_listeners=[commands, events])

    async def close() -> None:
        await client.close()

    asyncio.run(close())
    assert commands.events == []
    assert events.counts == {}


_FORKED_CHILD = """
import asyncio, multiprocessing, sys, warnings
warnings.simplefilter("error", ResourceWarning)
from mongio import MongoClient

client = MongoClient(sys.argv[1])


def child() -> None:
    async def main() -> None:
        assert (await client.admin.command("ping"))["ok"] == 1
        await asyncio.wait_for(client.close(), 20)

    asyncio.run(main())
    print("child closed", flush=True)


async def parent() -> None:
    await client.admin.command("ping")
    # Forked while this loop runs: the child inherits the client with this loop's runtime and connections.
    process = multiprocessing.get_context("fork").Process(target=child)
    process.start()
    await asyncio.to_thread(process.join, 60)
    print("child exit code", process.exitcode, flush=True)
    # The child let go of the inherited connections without touching this process's loop: they still work.
    assert (await client.admin.command("ping"))["ok"] == 1
    await client.close()
    print("parent closed", flush=True)


asyncio.run(parent())
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the platform has no fork()")
def test_a_forked_child_uses_and_closes_the_client_without_touching_the_parent_s_loop(server_uri: str) -> None:
    """A child forked while the parent's loop runs inherits that loop's runtime, which looks running but is
    the parent's: the child lets go of it (closing its copies of the sockets, nothing else) instead of waiting
    for a loop that will never run there, and the parent's connections keep working."""
    finished = _run_script(_FORKED_CHILD, server_uri)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    lines = finished.stdout.splitlines()
    assert lines == ["child closed", "child exit code 0", "parent closed"], finished.stdout + finished.stderr
    assert "Error" not in finished.stderr and "Warning" not in finished.stderr, finished.stderr


_FORKED_WHILE_LOCKED = """
import asyncio, multiprocessing, sys, threading
from mongio import MongoClient

client = MongoClient(sys.argv[1], adaptiveRetries=True)


def child() -> None:
    async def main() -> None:
        assert (await client.admin.command("ping"))["ok"] == 1  # its success pays the retry budget
        await client.close()

    asyncio.run(main())
    print("child done", flush=True)


def fork_and_wait() -> None:
    process = multiprocessing.get_context("fork").Process(target=child)
    process.start()
    process.join(30)
    if process.is_alive():
        process.kill()
        print("child hung", flush=True)
    print("child exit code", process.exitcode, flush=True)


# Another thread forks while this one is inside the client's bookkeeping (holding its locks): the child
# has only the forking thread, so a lock copied held would never be released there.
with client._runtimes._lock, client._executor._token_bucket._lock:
    forker = threading.Thread(target=fork_and_wait)
    forker.start()
    forker.join(60)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the platform has no fork()")
def test_a_child_forked_while_another_thread_holds_the_client_s_lock_can_use_it(server_uri: str) -> None:
    finished = _run_script(_FORKED_WHILE_LOCKED, server_uri)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert finished.stdout.splitlines() == ["child done", "child exit code 0"], finished.stdout + finished.stderr


# -- one loop per thread, one client ---------------------------------------------------------------------------

_OPERATIONS_PER_THREAD = 1000


def test_three_threads_each_with_its_loop_share_one_client(server_uri: str) -> None:
    events = PoolEventCounts()
    errors = LoopErrors()
    commands = CommandRecorder()
    client = MongoClient(server_uri, event_listeners=[events, commands])
    collection = client.loops_test.threads
    finished_work = threading.Barrier(4)
    release = threading.Event()
    results: dict[int, Any] = {}

    async def work(worker: int) -> None:
        for n in range(_OPERATIONS_PER_THREAD):
            if n % 2:
                await collection.find_one({"worker": worker})
            else:
                await collection.insert_one({"worker": worker, "n": n})
        results[worker] = await collection.count_documents({"worker": worker})
        # Keep this loop running while the main thread closes the client from its own loop.
        await asyncio.to_thread(finished_work.wait)
        await asyncio.to_thread(release.wait)

    def thread_main(worker: int) -> None:
        try:
            errors.run(lambda: work(worker))
        except BaseException as exc:
            results[worker] = exc
            finished_work.abort()

    async def close_while_the_loops_run() -> None:
        await client.close()

    async def reset() -> None:
        await collection.delete_many({})

    with collected_warnings() as caught:
        errors.run(reset)
        threads = [threading.Thread(target=thread_main, args=(worker,)) for worker in range(3)]
        for thread in threads:
            thread.start()
        finished_work.wait(timeout=300)
        errors.run(close_while_the_loops_run)
        release.set()
        for thread in threads:
            thread.join(timeout=60)
    assert results == {worker: _OPERATIONS_PER_THREAD // 2 for worker in range(3)}
    assert loop_problems(errors, caught) == []
    # One pool per loop that used the client (the reset's loop and the three threads'), all closed.
    assert events.count("PoolCreatedEvent") == 4
    _assert_balanced(events)
    # The closing loop had no runtime of its own (the reset's loop had shut down): the pooled sessions were
    # ended once, from one of the threads' loops.
    (ended,) = commands.of(CommandSucceededEvent, "endSessions")
    assert ended.reply["ok"] == 1
    with pytest.raises(InvalidOperation):
        errors.run(lambda: collection.find_one({}))


# -- objects bound to one loop -----------------------------------------------------------------------------


def _assert_names_both_loops(error: EventLoopMismatchError, first: asyncio.AbstractEventLoop) -> None:
    text = str(error)
    assert f"{id(first):#x}" in text
    assert text.count(" at 0x") == 2


def test_session_cursor_and_change_stream_refuse_another_loop(server_uri: str) -> None:
    errors = LoopErrors()
    client = MongoClient(server_uri)
    collection = client.loops_test.bound
    made: dict[str, Any] = {}

    async def in_first_loop() -> None:
        made["loop"] = asyncio.get_running_loop()
        await collection.delete_many({})
        await collection.insert_many([{"n": n} for n in range(6)])
        session = made["session"] = client.start_session()
        await collection.find_one({}, session=session)
        cursor = made["cursor"] = collection.find({}, batch_size=2)
        await cursor.next()
        await cursor.next()
        made["stream"] = await collection.watch()

    async def in_second_loop() -> None:
        with pytest.raises(EventLoopMismatchError) as by_session:
            await collection.find_one({}, session=made["session"])
        _assert_names_both_loops(by_session.value, made["loop"])
        assert "this session" in str(by_session.value)
        with pytest.raises(EventLoopMismatchError) as by_cursor:
            await made["cursor"].next()
        _assert_names_both_loops(by_cursor.value, made["loop"])
        assert "this cursor" in str(by_cursor.value)
        with pytest.raises(EventLoopMismatchError) as by_stream:
            await made["stream"].try_next()
        _assert_names_both_loops(by_stream.value, made["loop"])
        assert "this change stream" in str(by_stream.value)
        # Closing them here is allowed: what the server holds is handed to this loop's client runtime.
        await made["cursor"].close()
        await made["stream"].close()
        await made["session"].end_session()
        # The client itself works here.
        assert await collection.count_documents({}) == 6
        await client.close()

    with collected_warnings() as caught:
        errors.run(in_first_loop)
        errors.run(in_second_loop)
        made.clear()
    assert loop_problems(errors, caught) == []


def test_asyncio_run_takes_close_as_it_takes_pymongos_coroutine(server_uri: str) -> None:
    client = MongoClient(server_uri)

    async def ping() -> None:
        await client.admin.command("ping")

    asyncio.run(ping())
    asyncio.run(ping())
    # PyMongo's close() is a coroutine function, so scripts end with asyncio.run(client.close()).
    assert asyncio.run(client.close()) is None

    async def closed_twice_then_used() -> None:
        await client.close()
        await client.close()
        with pytest.raises(ClientClosedError):
            await client.admin.command("ping")

    asyncio.run(closed_twice_then_used())


# -- Motor's habits: close() without await on a loop that is not running, then loop.close() -----------------

_MOTOR_HABITS = """
import asyncio, gc, sys
from mongio import MongoClient
from tests.support.loop_checks import PoolEventCounts
from tests.support.recorders import CommandRecorder


def motor_test_case(ending):
    events, sent = PoolEventCounts(), CommandRecorder()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    client = MongoClient(sys.argv[1], event_listeners=[events, sent])
    coll = client.loops_test.motor_habits
    loop.run_until_complete(coll.insert_many([{"n": n} for n in range(3)]))
    cursor = coll.find(batch_size=1)
    loop.run_until_complete(cursor.next())
    del cursor                                   # dropped with its server cursor open: queued for killCursors
    gc.collect()
    unawaited = coll.find_one()                  # a coroutine nobody awaits
    client.drop_database("loops_test_never")     # called without await, as with Motor
    client.close()                               # Motor's close: no await, no loop running
    ending(loop)
    asyncio.set_event_loop(None)
    del unawaited
    gc.collect()
    counts = events.counts
    print("balanced", counts.get("ConnectionCreatedEvent") == counts.get("ConnectionClosedEvent"),
          counts.get("PoolCreatedEvent") == counts.get("PoolClosedEvent"))
    print("sent", "killCursors" in sent.names(), "endSessions" in sent.names(), "dropDatabase" in sent.names())


def stop_then_close(loop):
    # Motor's own test harness.
    loop.stop()
    loop.run_forever()
    loop.close()


motor_test_case(lambda loop: loop.close())
motor_test_case(stop_then_close)
print("done")
"""


def test_motor_close_idiom_leaves_no_task_no_socket_and_no_error(server_uri: str) -> None:
    """Motor's habits under ``-X dev``: ``client.close()`` without ``await`` while no loop runs, then
    ``loop.close()`` (with or without a last turn of the loop), closes everything on the idle loop (the cursor
    dropped open is killed, the sessions are ended) so that no task is left pending and no transport unclosed; a
    coroutine never awaited (``drop_database`` called without ``await`` among them) is only Python's
    warning naming it, and sends nothing."""
    finished = _run_script(_MOTOR_HABITS, server_uri, dev_mode=True)
    never_awaited = _never_awaited_after_a_clean_exit(finished)
    assert finished.stdout.splitlines() == ["balanced True True", "sent True True False"] * 2 + ["done"]
    # Python warns once per line of the script.
    assert len(never_awaited) == 2, finished.stderr
    assert "'MongoClient.drop_database'" in never_awaited[0] and "'Collection.find_one'" in never_awaited[1]


# -- Motor's habits inside a running loop: close() and coroutines without await, then the loop stops ---------

_MOTOR_HABITS_IN_A_LOOP = """
import asyncio, gc, sys
from mongio import MongoClient
from tests.support.loop_checks import PoolEventCounts
from tests.support.recorders import CommandRecorder


def report(name, events, sent):
    counts = events.counts
    print(name, "balanced", counts.get("ConnectionCreatedEvent") == counts.get("ConnectionClosedEvent"),
          counts.get("PoolCreatedEvent") == counts.get("PoolClosedEvent"),
          "sent", "insert" in sent.names(), "dropDatabase" in sent.names(), "endSessions" in sent.names())


def test_case(ending):
    # Motor's harness: a client of its own made before the test, closed without await once the test ran.
    events, sent, harness_events = PoolEventCounts(), CommandRecorder(), PoolEventCounts()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    harness = MongoClient(sys.argv[1], event_listeners=[harness_events])
    loop.run_until_complete(harness.admin.command("ping"))

    async def test():
        client = MongoClient(sys.argv[1], event_listeners=[events, sent])
        coll = client.loops_test.motor_habits_in_a_loop
        await coll.insert_many([{"n": n} for n in range(3)])
        async for _ in coll.find(batch_size=1):
            break                                # left open: the closing kills it
        sent.clear()
        coll.insert_one({"n": 3})                # a coroutine nobody awaits: sends nothing
        client.drop_database("loops_test_never") # the same, called without await as with Motor
        client.close()                           # Motor's close: no await, the loop is running

    loop.run_until_complete(test())
    ending(loop, harness)
    asyncio.set_event_loop(None)
    gc.collect()
    report("test", events, sent)
    report("harness", harness_events, CommandRecorder())


def motor_teardown(loop, harness):
    # Motor's AsyncIOTestCase.tearDown, word for word.
    harness.close()
    loop.stop()
    loop.run_forever()
    loop.close()


test_case(motor_teardown)
print("done")
"""


def test_motor_close_idiom_inside_a_running_loop_leaves_nothing_once_the_harness_closes(server_uri: str) -> None:
    """Motor's habits inside a running loop, under ``-X dev`` with ResourceWarnings as errors: a client closed
    with ``client.close()`` and no ``await`` while the loop runs, then Motor's tear-down (its own client closed
    without ``await`` where no loop runs, then ``loop.stop()``, ``loop.run_forever()``, ``loop.close()``). The
    closing left in the background finishes when the tear-down runs the loop, so no task is left pending and
    no socket open, and the sessions are ended; the coroutines never awaited (``insert_one``,
    ``drop_database``) only get Python's warning and send nothing."""
    finished = _run_script(_MOTOR_HABITS_IN_A_LOOP, server_uri, dev_mode=True)
    never_awaited = _never_awaited_after_a_clean_exit(finished)
    assert finished.stdout.splitlines() == [
        "test balanced True True sent False False True",
        "harness balanced True True sent False False False",
        "done",
    ]
    assert len(never_awaited) == 2, finished.stderr
    assert "'Collection.insert_one'" in never_awaited[0] and "'MongoClient.drop_database'" in never_awaited[1]


_CLOSE_UNAWAITED_THEN_LOOP_CLOSED = """
import asyncio, sys, warnings
from mongio import MongoClient

warnings.simplefilter("always", ResourceWarning)
loop = asyncio.new_event_loop()
client = MongoClient(sys.argv[1])


async def test():
    await client.admin.command("ping")
    client.close()


loop.run_until_complete(test())
loop.close()                                     # nothing of mongio runs the loop again
del client
import gc; gc.collect()
"""


def test_a_closing_left_unfinished_by_a_closed_loop_says_so(server_uri: str) -> None:
    """``client.close()`` without ``await``, then ``loop.close()`` with nothing run in between: the closing
    cannot finish, and mongio says why and what to do (asyncio's own reports of the tasks come too)."""
    finished = _run_script(
        _CLOSE_UNAWAITED_THEN_LOOP_CLOSED, server_uri, dev_mode=True, resource_warnings_fail=False
    )
    assert finished.returncode == 0, finished.stderr
    assert "close() was not awaited and its event loop was closed before the closing finished" in finished.stderr
    assert "Await client.close()" in finished.stderr


def test_a_client_dropped_without_close_after_its_loop_was_closed_leaves_no_socket_open(server_uri: str) -> None:
    """Motor's harness closes each test's loop, and a test may leave its client unclosed: when the garbage
    collector later finds the client, the sockets of its connections on that closed loop were already closed
    (no ResourceWarning), though its tasks could not be stopped."""
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(lambda loop, context: None)  # its pending tasks are reported destroyed
    events = PoolEventCounts()

    async def use_and_drop() -> None:
        client = MongoClient(server_uri, event_listeners=[events])
        await client.admin.command("ping")
        await client.loops_test.dropped.find_one()

    loop.run_until_complete(use_and_drop())
    loop.close()
    assert events.counts.get("ConnectionCreatedEvent", 0) >= 1
    with collected_warnings() as caught:
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
