"""The machine-readable list of differences from PyMongo (``src/mongio/compat/differences.yaml``) and the
generated blocks that show it in Markdown files: README.md's "Differences from PyMongo" list
(tests/unit/compat/readme_differences.py) and the documentation's migration guide
(tests/docs/migrating_differences.py).

A generated block sits between a start and an end marker line in its file; the file's other text is written
by hand. Each user renders its block from :func:`entries` and checks that the file holds it.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
LIST = ROOT / "src" / "mongio" / "compat" / "differences.yaml"


def sections() -> dict[str, list[dict[str, Any]]]:
    """The list's sections (``client``, ``bson``) in the file's order, each with its entries."""
    loaded: dict[str, list[dict[str, Any]]] = yaml.safe_load(LIST.read_text())
    return loaded


def entries() -> list[dict[str, Any]]:
    """Every entry of the list, all sections in the file's order."""
    return [entry for section in sections().values() for entry in section]


def bullet(text: str, width: int, prefix: str = "- ") -> str:
    """One Markdown list item holding ``text`` with its whitespace normalised, wrapped at ``width``."""
    return textwrap.fill(
        " ".join(text.split()),
        width=width,
        initial_indent=prefix,
        subsequent_indent=" " * len(prefix),
        break_long_words=False,
        break_on_hyphens=False,
    )


@dataclass(frozen=True)
class GeneratedBlock:
    """The generated part of a Markdown file: from the line ``start`` to the line ``end``, both kept."""

    path: Path
    start: str
    end: str

    def current(self) -> str:
        """The block the file holds now, markers included."""
        text = self.path.read_text()
        return text[text.index(self.start) : text.index(self.end) + len(self.end)]

    def write(self, rendered: str) -> None:
        """Replace the file's block with ``rendered`` (which holds the markers)."""
        self.path.write_text(self.path.read_text().replace(self.current(), rendered))
