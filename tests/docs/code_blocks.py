"""The fenced blocks of the guides (docs/*.md), in page order, and what the documentation tests do with each.

- ``python`` (or ``py``) blocks run; a ``text`` block with ``title="Output"`` right after one (only blank
  lines between) is what it must print (``...`` stands for any text, as in doctest).
- ``pycon`` blocks are interactive sessions: each ``>>>`` statement runs, and what follows it up to the next
  prompt is what it must print (or the exception it must raise, doctest's ``Traceback`` form).
- ``toml`` blocks must parse.
- A block in any other language, or a ``text`` block that is not an output, is an error unless a
  ``<!-- skip-test: REASON -->`` marker before it (blank lines between are allowed) says why it is not run; the
  same marker turns a runnable block into an illustrative one, listed with its reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# The address the guides write for a local server: the tests put the test server's address in its place.
GUIDE_URI = "mongodb://localhost:27017"

PYTHON = frozenset({"python", "py"})
RUN = PYTHON | {"pycon"}
PARSED = frozenset({"toml"})
OUTPUT_LANGUAGE = "text"
OUTPUT_TITLE = "Output"

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)[ \t]*(?P<info>[^\n`]*)$")
_SKIP = re.compile(r"<!--\s*skip-test:\s*(?P<reason>.*?)\s*-->")
_TITLE = re.compile(r'\btitle="(?P<title>[^"]*)"')


@dataclass(frozen=True)
class CodeBlock:
    page: str
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    skip_reason: str | None
    title: str | None = None  # the fence's title="..."
    attached: bool = False  # only blank lines between this block and the block before it
    output: str | None = None  # a python block's expected output (the output block after it)

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"

    @property
    def is_output(self) -> bool:
        return self.language == OUTPUT_LANGUAGE and self.title == OUTPUT_TITLE


@dataclass(frozen=True)
class GuidePage:
    """A page's blocks the tests run or check (python blocks with their outputs attached), and what is wrong
    with its blocks."""

    name: str
    blocks: list[CodeBlock]
    problems: list[str]


def guide_pages() -> list[Path]:
    """The guides: every Markdown page directly under docs/ (the API reference under docs/api has no
    hand-written code)."""
    return sorted(DOCS.glob("*.md"))


def blocks(page: Path) -> list[CodeBlock]:
    """Every fenced block of the page, in order."""
    return parse_blocks(page.name, page.read_text())


def parse_blocks(page: str, text: str) -> list[CodeBlock]:
    """Every fenced block of the Markdown ``text`` of ``page``, in order."""
    lines = text.splitlines()
    found: list[CodeBlock] = []
    pending_skip: str | None = None
    attached = False  # nothing but blank lines since the last block closed
    index = 0
    while index < len(lines):
        line = lines[index]
        skip = _SKIP.search(line)
        opening = _FENCE.match(line)
        if skip:
            pending_skip = skip.group("reason")
            attached = False
        elif opening:
            fence, indent, info = opening.group("fence"), opening.group("indent"), opening.group("info")
            language = (info.split() or [""])[0].lstrip(".").lower()
            title = _TITLE.search(info)
            start = index + 1
            index = start
            while index < len(lines) and not lines[index].strip().startswith(fence):
                index += 1
            body = [text.removeprefix(indent) for text in lines[start:index]]
            code = "\n".join(body) + "\n"
            found.append(
                CodeBlock(page, start, language, code, pending_skip, title and title.group("title"), attached)
            )
            pending_skip = None
            attached = True
        elif line.strip():
            pending_skip = None  # a marker applies only to the block right after it
            attached = False
        index += 1
    return found


def guide_page(page: Path) -> GuidePage:
    return collect(page.name, blocks(page))


def collect(name: str, found: list[CodeBlock]) -> GuidePage:
    """The blocks of page ``name`` the tests run or check, each python block carrying the output block right
    after it; a problem for each block the tests would otherwise pass over."""
    kept: list[CodeBlock] = []
    problems: list[str] = []
    for block in found:
        if block.is_output:
            before = kept[-1] if kept else None
            if (
                not block.attached
                or before is None
                or before.language not in PYTHON
                or before.output is not None
            ):
                problems.append(f"{block.where}: an output block that follows no python block")
            elif block.skip_reason is not None:
                problems.append(f"{block.where}: an output block cannot be marked skip-test")
            else:
                kept[-1] = replace(before, output=block.code)
        elif block.language in RUN or block.language in PARSED or block.skip_reason is not None:
            kept.append(block)
        else:
            problems.append(
                f"{block.where}: a {block.language or 'plain'} block is neither run nor checked: mark it "
                "<!-- skip-test: REASON --> if it is not meant to be"
            )
    return GuidePage(name, kept, problems)
