"""Every runnable block of the guides runs against the test server and prints what the page says it prints.

How blocks are found, and which are run, compared or parsed: :mod:`tests.docs.code_blocks`; how they run
and what fails them: :mod:`tests.docs.run_blocks`. The guides write the local address
``mongodb://localhost:27017``; it is replaced by the test server's URI. Blocks marked
``<!-- skip-test: reason -->`` are illustrative (a deployment or a package this machine lacks, a shell
command) and are counted, with their reasons, in the run's summary instead. The tests at the end break a
page on purpose (a missing ``await``, a changed value, a failing session) and check that the harness
reports it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import pytest

from tests.docs import code_blocks
from tests.docs.conftest import report
from tests.docs.run_blocks import BlockFailed, run_page

PAGES = [page.name for page in code_blocks.guide_pages()]


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


def _run(blocks: list[code_blocks.CodeBlock], server_uri: str) -> None:
    with _logging_restored():
        run_page(blocks, server_uri.rstrip("/"))


@pytest.mark.parametrize("page", PAGES)
def test_every_block_is_run_checked_or_marked_not_run(
    page: str, guide_pages: dict[str, code_blocks.GuidePage]
) -> None:
    assert guide_pages[page].problems == []


@pytest.mark.server
@pytest.mark.parametrize("page", PAGES)
def test_guide_code_blocks_run(
    page: str, server_uri: str, guide_pages: dict[str, code_blocks.GuidePage]
) -> None:
    blocks = guide_pages[page].blocks
    runnable = [block for block in blocks if block.skip_reason is None]
    for block in blocks:
        if block.skip_reason is not None:
            report(f"{block.where}: not run: {block.skip_reason}")
    if not runnable:
        pytest.skip(f"docs/{page} has no block to run or check")
    _run(runnable, server_uri)


def test_guides_have_code_and_every_skip_has_a_reason(guide_pages: dict[str, code_blocks.GuidePage]) -> None:
    every = [block for page in guide_pages.values() for block in page.blocks]
    skipped = [block for block in every if block.skip_reason is not None]
    assert not [block.where for block in skipped if not (block.skip_reason or "").strip()], (
        "a skip-test marker without a reason"
    )
    python = [block for block in every if block.language in code_blocks.RUN]
    ran = [block for block in python if block.skip_reason is None]
    compared = [block for block in ran if block.output is not None]
    report(
        f"guide code blocks: {len(every)} blocks, {len(ran)} of {len(python)} python blocks run against the test "
        f"server ({len(compared)} with their output compared), {len(skipped)} marked skip-test"
    )
    assert len(ran) >= 3 * (len(python) - len(ran)), "most guide code must run"


# The harness fails a broken page: each page below is a mutation of what the guides do.


def _page(text: str) -> list[code_blocks.CodeBlock]:
    page = code_blocks.collect("mutation.md", code_blocks.parse_blocks("mutation.md", text))
    assert page.problems == []
    return page.blocks


def _python(code: str, output: str | None = None) -> str:
    text = f"```python\n{code}```\n"
    return text if output is None else f'{text}\n```text title="Output"\n{output}```\n'


CLIENT = 'from mongio import MongoClient\n\nclient = MongoClient("mongodb://localhost:27017")\n'
SCRIPT = (
    "import asyncio\n\nfrom mongio import MongoClient\n\n\nasync def main() -> None:\n"
    '    async with MongoClient("mongodb://localhost:27017") as client:\n'
    "        {}\n\n\nasyncio.run(main())\n"
)


@pytest.mark.server
@pytest.mark.parametrize(
    "text",
    [
        # In a script's coroutine (no top-level await on the page): only a RuntimeWarning would say so.
        _python(SCRIPT.format('client.docs_mutation.c.insert_one({"x": 1})')),
        # A statement on a page that awaits elsewhere.
        _python(
            CLIENT + "await client.docs_mutation.c.drop()\n" + 'client.docs_mutation.c.insert_one({"x": 1})\n'
        ),
        # A coroutine kept in a name.
        _python(CLIENT + "names = client.list_database_names()\n"),
    ],
    ids=["in-a-script", "a-statement", "kept-in-a-name"],
)
def test_a_missing_await_fails(text: str, server_uri: str) -> None:
    with pytest.raises(BlockFailed, match="never awaited"):
        _run(_page(text), server_uri)


@pytest.mark.server
def test_the_same_blocks_with_their_awaits_pass(server_uri: str) -> None:
    _run(_page(_python(SCRIPT.format('await client.docs_mutation.c.insert_one({"x": 1})'))), server_uri)
    _run(_page(_python(CLIENT + "names = await client.list_database_names()\n")), server_uri)


@pytest.mark.server
def test_a_changed_printed_value_fails(server_uri: str) -> None:
    """The crud guide with the year of Dune changed in its data: the output blocks still say 1965."""
    text = (code_blocks.DOCS / "crud.md").read_text()
    assert text.count('"year": 1965') == 1
    mutated = code_blocks.collect(
        "crud.md", code_blocks.parse_blocks("crud.md", text.replace('"year": 1965', '"year": 1865'))
    )
    with pytest.raises(BlockFailed, match="printed other than its output says"):
        _run(mutated.blocks, server_uri)


@pytest.mark.server
def test_a_block_that_prints_without_an_output_block_fails(server_uri: str) -> None:
    with pytest.raises(BlockFailed, match="no output block follows it"):
        _run(_page(_python("print(6 * 7)\n")), server_uri)
    _run(_page(_python("print(6 * 7)\n", output="42\n")), server_uri)
    with pytest.raises(BlockFailed, match="printed other than its output says"):
        _run(_page(_python("print(6 * 7)\n", output="43\n")), server_uri)


SESSION = (
    "```pycon\n"
    ">>> from mongio import MongoClient\n"
    '>>> client = MongoClient("mongodb://localhost:27017")\n'
    ">>> result = await client.docs_mutation.c.insert_one({{'_id': 1}})\n"
    ">>> {}\n"
    "{}"
    "```\n"
)


@pytest.mark.server
@pytest.mark.parametrize(
    ("statement", "shown", "problem"),
    [
        ("result.inserted_id + 1", "2\n", None),
        ("await client.docs_mutation.c.find_one()", "{'_id': 1}\n", None),
        ("result.inserted_idd", "1\n", "failed: AttributeError"),
        ("result.inserted_id", "2\n", "printed other than its output says"),
        ("client.docs_mutation.c.find_one()", "{'_id': 1}\n", "printed other than its output says"),
        (
            "await client.docs_mutation.c.insert_one({'_id': 1})",
            "Traceback (most recent call last):\n  ...\nmongio.errors.DuplicateKeyError: E11000 ...\n",
            None,
        ),
        (
            "await client.docs_mutation.c.insert_one({'_id': 2})",
            "Traceback (most recent call last):\n  ...\nmongio.errors.DuplicateKeyError: E11000 ...\n",
            "nothing was raised",
        ),
    ],
    ids=["value", "awaited", "error", "wrong-value", "missing-await", "expected-error", "no-error"],
)
def test_a_pycon_session_runs_and_is_compared(
    statement: str, shown: str, problem: str | None, server_uri: str
) -> None:
    blocks = _page(SESSION.format(statement, shown))
    if problem is None:
        _run(blocks, server_uri)
    else:
        with pytest.raises(BlockFailed, match=problem):
            _run(blocks, server_uri)


def test_a_block_the_tests_do_not_know_is_a_problem_unless_marked() -> None:
    text = (
        "```pycon\n>>> 1\n1\n```\n\n```sh\nmake docs\n```\n\n<!-- skip-test: a shell command -->\n"
        '```sh\nmake docs\n```\n\n```text\nplain text\n```\n\nProse.\n\n```text title="Output"\n1\n```\n'
        '\n```toml\n[a]\nb = 1\n```\n\n```python\nprint(1)\n```\n```text title="Output"\n1\n```\n'
    )
    page = code_blocks.collect("mutation.md", code_blocks.parse_blocks("mutation.md", text))
    assert page.problems == [
        "docs/mutation.md:6: a sh block is neither run nor checked: mark it <!-- skip-test: REASON --> if it is "
        "not meant to be",
        "docs/mutation.md:15: a text block is neither run nor checked: mark it <!-- skip-test: REASON --> if it "
        "is not meant to be",
        "docs/mutation.md:21: an output block that follows no python block",
    ]
    assert [(block.language, block.skip_reason, block.output) for block in page.blocks] == [
        ("pycon", None, None),
        ("sh", "a shell command", None),
        ("toml", None, None),
        ("python", None, "1\n"),
    ]


@pytest.mark.server
def test_a_toml_block_that_does_not_parse_fails(server_uri: str) -> None:
    with pytest.raises(BlockFailed, match="not valid TOML"):
        _run(_page('```toml\n[tool.pytest.ini_options\nasyncio_mode = "auto"\n```\n'), server_uri)
