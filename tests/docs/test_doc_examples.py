"""Every ```python block of the guides runs against the test server.

A page's blocks run in order in one namespace, as a reader would type them into ``python -m asyncio``: top-level
``await`` works, and the objects a block makes are there for the next one. The guides write the local address
``mongodb://localhost:27017``; it is replaced by the test server's URI. Blocks marked
``<!-- skip-test: reason -->`` are illustrative (a deployment or a package this machine lacks) and are
counted, with their reasons, in the run's summary instead.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import logging
import types
from collections.abc import Iterator
from typing import Any

import pytest

from mongio import MongoClient
from tests.docs import code_blocks
from tests.docs.conftest import report

PAGES = [page.name for page in code_blocks.guide_pages()]


def _run_block(block: code_blocks.CodeBlock, namespace: dict[str, Any], loop: asyncio.AbstractEventLoop) -> None:
    code = compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if code.co_flags & inspect.CO_COROUTINE:
        loop.run_until_complete(types.FunctionType(code, namespace)())
    else:
        # No top-level await: the block may run its own loop (asyncio.run(main())), as a script does.
        exec(code, namespace)


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


@contextlib.contextmanager
def _logging_restored() -> Iterator[None]:
    """A page may configure logging as a reader would (basicConfig, a logger's level): undone afterwards, so
    the tests that run after it see the logging they expect."""
    root_handlers = logging.root.handlers[:]
    names = ["mongio", *(name for name in logging.root.manager.loggerDict if name.startswith("mongio."))]
    levels = {name: logging.getLogger(name).level for name in names}
    try:
        yield
    finally:
        logging.root.handlers[:] = root_handlers
        for name in logging.root.manager.loggerDict:
            if name == "mongio" or name.startswith("mongio."):
                logging.getLogger(name).setLevel(levels.get(name, logging.NOTSET))


@pytest.mark.server
@pytest.mark.parametrize("page", PAGES)
def test_guide_code_blocks_run(page: str, server_uri: str, guide_blocks: dict[str, list[Any]]) -> None:
    blocks = guide_blocks[page]
    runnable = [block for block in blocks if block.skip_reason is None]
    for block in blocks:
        if block.skip_reason is not None:
            report(f"{block.where}: not run: {block.skip_reason}")
    if not runnable:
        pytest.skip(f"docs/{page} has no runnable python block")
    uri = server_uri.rstrip("/")
    with _logging_restored():
        _run_page(runnable, uri)


def _run_page(runnable: list[code_blocks.CodeBlock], uri: str) -> None:
    namespace: dict[str, Any] = {"__name__": f"docs.{runnable[0].page}"}
    loop = asyncio.new_event_loop()
    # The page's databases are dropped afterwards, so the server is left as the page found it.
    before = loop.run_until_complete(_database_names(uri))
    try:
        for block in runnable:
            block = code_blocks.CodeBlock(
                block.page, block.line, block.language, block.code.replace(code_blocks.GUIDE_URI, uri), None
            )
            try:
                _run_block(block, namespace, loop)
            except Exception as error:
                raise AssertionError(f"{block.where} failed: {error!r}\n{block.code}") from error
    finally:
        loop.run_until_complete(_close_clients(namespace))
        created = loop.run_until_complete(_database_names(uri)) - before
        loop.run_until_complete(_drop_databases(uri, created))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def test_guides_have_code_and_every_skip_has_a_reason(guide_blocks: dict[str, list[Any]]) -> None:
    every = [block for blocks in guide_blocks.values() for block in blocks]
    skipped = [block for block in every if block.skip_reason is not None]
    assert not [block.where for block in skipped if not block.skip_reason.strip()], "a skip-test marker without a reason"
    ran = len(every) - len(skipped)
    report(f"guide code blocks: {len(every)} python blocks, {ran} run against the test server, {len(skipped)} marked skip-test")
    assert ran >= 3 * len(skipped), "most guide code must run"
