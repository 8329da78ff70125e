"""Running a guide's blocks as a reader would, and failing on anything a reader would see go wrong.

A page's blocks run in order in one fresh namespace, as a reader would type them into ``python -m asyncio``:
a block with top-level ``await`` runs as a coroutine on the page's event loop, and the objects a block makes
are there for the next one; a block without one runs as a script does (it may start its own loop with
``asyncio.run(main())``). A block fails when it raises; when it prints other than its output block says (or
prints with no output block); when a warning about a coroutine never awaited, or a ``ResourceWarning``,
comes while it runs (or when the garbage it left is collected); when an exception is only reported as
unraisable (in a finalizer, a coroutine's cleanup); or when it leaves a name bound to a coroutine nobody
awaited. ``pycon`` sessions run statement by statement, each compared with what the session shows after it.
What a block prints is compared with the test server's address written back as the guides write it.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import contextlib
import dataclasses
import doctest
import gc
import inspect
import io
import sys
import tomllib
import traceback
import types
import warnings
from collections.abc import Iterator
from typing import Any

from mongio import MongoClient
from tests.conftest import first_host
from tests.docs import code_blocks

_CHECKER = doctest.OutputChecker()
_OPTIONS = doctest.ELLIPSIS  # "..." in an expected output stands for any text (an ObjectId, a time)
# Warnings that mean the code is wrong: a coroutine never awaited (RuntimeWarning), an unclosed resource.
_FAILING_WARNINGS = (RuntimeWarning, ResourceWarning)
_GUIDE_HOST, _GUIDE_PORT = code_blocks.GUIDE_URI.removeprefix("mongodb://").rsplit(":", 1)


class BlockFailed(AssertionError):
    """A guide block did not do what the page says it does."""


def run_page(blocks: list[code_blocks.CodeBlock], uri: str) -> None:
    """Run a page's runnable blocks against the server at ``uri``; raise :class:`BlockFailed` at the first
    that fails. The databases the page creates are dropped afterwards, and its clients closed."""
    page = blocks[0].page
    namespace: dict[str, Any] = {"__name__": f"docs.{page}", "__builtins__": builtins}
    address = first_host(uri)
    loop = asyncio.new_event_loop()
    before = loop.run_until_complete(_database_names(uri))
    try:
        for block in blocks:
            run_block(_with_uri(block, uri), namespace, loop, address)
    except BaseException:
        _clean_up(namespace, loop, uri, before)  # the block's failure is the one to report
        raise
    with _strict(f"docs/{page}, after its last block"):
        _clean_up(namespace, loop, uri, before)


def _clean_up(namespace: dict[str, Any], loop: asyncio.AbstractEventLoop, uri: str, before: set[str]) -> None:
    """Close the page's clients, drop the databases it made (the server is left as the page found it), and
    close its loop."""
    loop.run_until_complete(_close_clients(namespace))
    namespace.clear()
    created = loop.run_until_complete(_database_names(uri)) - before
    loop.run_until_complete(_drop_databases(uri, created))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


def run_block(
    block: code_blocks.CodeBlock,
    namespace: dict[str, Any],
    loop: asyncio.AbstractEventLoop,
    address: tuple[str, int],
) -> None:
    """Run (or parse) one block in the page's ``namespace`` and ``loop``; ``address`` is the test server's."""
    if block.language in code_blocks.PARSED:
        _parse(block)
        return
    with _strict(block.where):
        if block.language == "pycon":
            _run_session(block, namespace, loop, address)
        else:
            _run_python(block, namespace, loop, address)
    _no_coroutine_left(block, namespace)


def _with_uri(block: code_blocks.CodeBlock, uri: str) -> code_blocks.CodeBlock:
    return dataclasses.replace(block, code=block.code.replace(code_blocks.GUIDE_URI, uri))


def as_the_guide_wrote(printed: str, address: tuple[str, int]) -> str:
    """``printed`` with the test server's ``address`` (as ``host:port``, or a ``(host, port)`` pair) written as
    the guides write it, ``localhost:27017``."""
    host, port = address
    return printed.replace(f"{host}:{port}", f"{_GUIDE_HOST}:{_GUIDE_PORT}").replace(
        repr((host, port)), repr((_GUIDE_HOST, int(_GUIDE_PORT)))
    )


def _parse(block: code_blocks.CodeBlock) -> None:
    try:
        tomllib.loads(block.code)
    except tomllib.TOMLDecodeError as error:
        raise BlockFailed(f"{block.where}: not valid TOML: {error}\n{block.code}") from error


def _execute(code: types.CodeType, namespace: dict[str, Any], loop: asyncio.AbstractEventLoop) -> None:
    if code.co_flags & inspect.CO_COROUTINE:
        loop.run_until_complete(types.FunctionType(code, namespace)())
    else:
        exec(code, namespace)


def _run_python(
    block: code_blocks.CodeBlock,
    namespace: dict[str, Any],
    loop: asyncio.AbstractEventLoop,
    address: tuple[str, int],
) -> None:
    code = compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        try:
            _execute(code, namespace, loop)
        except Exception as error:
            raise BlockFailed(f"{block.where} failed: {error!r}\n{block.code}") from error
    if block.output is None and printed.getvalue():
        raise BlockFailed(
            f"{block.where} prints, but no output block follows it to say what:\n{printed.getvalue()}"
        )
    _compare(block.where, block.output or "", as_the_guide_wrote(printed.getvalue(), address))


def _run_session(
    block: code_blocks.CodeBlock,
    namespace: dict[str, Any],
    loop: asyncio.AbstractEventLoop,
    address: tuple[str, int],
) -> None:
    """Each ``>>>`` statement of the session, as the asyncio REPL runs it (an expression's value is shown)."""
    examples = doctest.DocTestParser().get_examples(block.code)
    if not examples:
        raise BlockFailed(f"{block.where}: a pycon block without a >>> prompt")
    for example in examples:
        where = f"docs/{block.page}:{block.line + 1 + example.lineno}"
        code = compile(example.source, where, "single", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        raised: Exception | None = None
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            try:
                _execute(code, namespace, loop)
            except Exception as error:
                raised = error
        if raised is None and example.exc_msg is not None:
            raise BlockFailed(f"{where}: expected {example.exc_msg.strip()}, nothing was raised")
        if raised is not None and example.exc_msg is None:
            raise BlockFailed(f"{where} failed: {raised!r}\n{example.source}") from raised
        if raised is not None:
            assert example.exc_msg is not None
            _compare(where, example.exc_msg, traceback.format_exception_only(raised)[-1])
        else:
            _compare(where, example.want, as_the_guide_wrote(printed.getvalue(), address))


def _compare(where: str, expected: str, printed: str) -> None:
    if not _CHECKER.check_output(expected, printed, _OPTIONS):
        difference = _CHECKER.output_difference(doctest.Example("", expected), printed, _OPTIONS)
        raise BlockFailed(f"{where} printed other than its output says: {difference}")


@contextlib.contextmanager
def _strict(where: str) -> Iterator[None]:
    """Fail on a failing warning, or an unraisable exception, while the body runs or when its garbage is
    collected; other warnings go on to the test run as usual."""
    unraisable: list[str] = []

    def hook(report: Any) -> None:
        unraisable.append(
            f"{report.err_msg or 'Exception ignored in'} {report.object!r}: {report.exc_value!r}"
        )

    previous_hook = sys.unraisablehook
    sys.unraisablehook = hook
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                yield
            finally:
                gc.collect()  # an un-awaited coroutine in a reference cycle warns only when collected
    finally:
        sys.unraisablehook = previous_hook
    failing = [
        f"{item.category.__name__}: {item.message}"
        for item in caught
        if issubclass(item.category, _FAILING_WARNINGS)
    ]
    for item in caught:
        if not issubclass(item.category, _FAILING_WARNINGS):
            warnings.warn_explicit(item.message, item.category, item.filename, item.lineno)
    if failing or unraisable:
        raise BlockFailed(f"{where}: " + "; ".join([*failing, *unraisable]))


def _no_coroutine_left(block: code_blocks.CodeBlock, namespace: dict[str, Any]) -> None:
    left = {name: value for name, value in namespace.items() if inspect.iscoroutine(value)}
    for value in left.values():
        value.close()  # reported here, so not warned about again when the namespace goes
    if left:
        raise BlockFailed(f"{block.where}: {', '.join(sorted(left))} bound to a coroutine never awaited")


async def _database_names(uri: str) -> set[str]:
    async with MongoClient(uri) as client:
        return set(await client.list_database_names())


async def _drop_databases(uri: str, names: set[str]) -> None:
    async with MongoClient(uri) as client:
        for name in sorted(names):
            await client.drop_database(name)


async def _close_clients(namespace: dict[str, Any]) -> None:
    """Close what the page left open (a closed client's close() does nothing), on the loop it ran on."""
    for value in list(namespace.values()):
        if isinstance(value, MongoClient):
            await value.close()
