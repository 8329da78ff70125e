"""The ```python blocks of the guides (docs/*.md), in page order, each with the skip marker before it if any.

A block preceded by ``<!-- skip-test: REASON -->`` (blank lines between are allowed) is illustrative: it is
listed with its reason and not run. Every other python block runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# The address the guides write for a local server: the tests put the test server's address in its place.
GUIDE_URI = "mongodb://localhost:27017"

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)[ \t]*(?P<info>[^\n`]*)$")
_SKIP = re.compile(r"<!--\s*skip-test:\s*(?P<reason>.*?)\s*-->")


@dataclass(frozen=True)
class CodeBlock:
    page: str
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    skip_reason: str | None

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"


def guide_pages() -> list[Path]:
    """The guides: every Markdown page directly under docs/ (the API reference under docs/api has no
    hand-written code)."""
    return sorted(DOCS.glob("*.md"))


def blocks(page: Path) -> list[CodeBlock]:
    """Every fenced block of the page, in order."""
    lines = page.read_text().splitlines()
    found: list[CodeBlock] = []
    pending_skip: str | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        skip = _SKIP.search(line)
        opening = _FENCE.match(line)
        if skip:
            pending_skip = skip.group("reason")
        elif opening:
            fence, indent = opening.group("fence"), opening.group("indent")
            language = (opening.group("info").split() or [""])[0].lstrip(".").lower()
            start = index + 1
            index = start
            while index < len(lines) and not lines[index].strip().startswith(fence):
                index += 1
            body = [text.removeprefix(indent) for text in lines[start:index]]
            found.append(CodeBlock(page.name, start, language, "\n".join(body) + "\n", pending_skip))
            pending_skip = None
        elif line.strip():
            pending_skip = None  # a marker applies only to the block right after it
        index += 1
    return found


def python_blocks(page: Path) -> list[CodeBlock]:
    return [block for block in blocks(page) if block.language in ("python", "py")]
