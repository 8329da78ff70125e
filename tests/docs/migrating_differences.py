"""The migration guide's list of differences (docs/migrating.md), generated from
``src/mongio/compat/differences.yaml`` like README's: every entry, grouped by the list's sections, each with
what PyMongo does, what mongio does, why, and what ported code should do.

``python tests/docs/migrating_differences.py --write`` rewrites the block after the list changed;
tests/docs/test_migrating_differences.py fails while the page and the list disagree.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script from anywhere: the repository's root is the import root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.differences_list import ROOT, GeneratedBlock, sections

PAGE = ROOT / "docs" / "migrating.md"
START = "<!-- differences:start (generated from src/mongio/compat/differences.yaml; edit the list, not this) -->"
END = "<!-- differences:end -->"
BLOCK = GeneratedBlock(PAGE, START, END)
SECTION_TITLES = {"client": "The client API", "bson": "BSON"}
FIELDS = (("pymongo", "PyMongo"), ("mongio", "mongio"), ("why", "Why"), ("workaround", "What to do"))
# The list's own text is plain prose: characters Markdown would read as markup are escaped.
_MARKUP = re.compile(r"([\\`*_\[\]])")


def plain(text: Any) -> str:
    """The list's plain text as Markdown text that shows it as it is."""
    return _MARKUP.sub(r"\\\1", " ".join(str(text).split())).replace("<", "&lt;")


def _entry(entry: dict[str, Any]) -> list[str]:
    lines = [f"**{plain(entry['api'])}** <span class=\"difference-id\">({entry['id']})</span>", ""]
    # One line per item: a wrapped line could start with Markdown of its own (a "-", a "1.").
    lines += [f"- {title}: {plain(entry[key])}" for key, title in FIELDS if key in entry]
    return [*lines, ""]


def render() -> str:
    """The generated block, markers included."""
    lines = [START, ""]
    for name, items in sections().items():
        lines += [f"### {SECTION_TITLES.get(name, name)}", ""]
        for entry in items:
            lines += _entry(entry)
    return "\n".join([*lines, END])


def current() -> str:
    """The block the page holds now, markers included."""
    return BLOCK.current()


def write() -> None:
    BLOCK.write(render())


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        print(render())
