"""README.md's "Differences from PyMongo" list, generated from ``src/mongio/compat/differences.yaml``.

The list between the ``differences:start`` and ``differences:end`` markers is one bullet per entry that has a
``readme`` text, in the file's order. ``python tests/unit/readme_differences.py --write`` rewrites it after
the list changed; tests/unit/test_readme_differences.py fails while README and the list disagree.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
LIST = ROOT / "src" / "mongio" / "compat" / "differences.yaml"
README = ROOT / "README.md"
START = "<!-- differences:start (generated from src/mongio/compat/differences.yaml; edit the list, not this) -->"
END = "<!-- differences:end -->"
WIDTH = 110


def entries() -> list[dict[str, Any]]:
    """Every entry of the list, all sections in the file's order."""
    sections: dict[str, list[dict[str, Any]]] = yaml.safe_load(LIST.read_text())
    return [entry for section in sections.values() for entry in section]


def _bullet(text: str) -> str:
    return textwrap.fill(
        " ".join(text.split()),
        width=WIDTH,
        initial_indent="- ",
        subsequent_indent="  ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def render() -> str:
    """The generated block, markers included."""
    bullets = [_bullet(entry["readme"]) for entry in entries() if "readme" in entry]
    footer = _bullet(
        "The full machine-readable list, README's entries included (each with a stable `id`, what PyMongo "
        "does, what mongio does, why, and what ported code should do), is `src/mongio/compat/differences.yaml`: "
        "CSOT timeout classes, awaitable deployment properties, listener recognition, `mongio.uri_parser`, "
        "BSON interoperation, and every signature difference the API parity test finds."
    )
    return "\n".join([START, *bullets, footer, END])


def current() -> str:
    """The block README holds now, markers included."""
    text = README.read_text()
    return text[text.index(START) : text.index(END) + len(END)]


def write() -> None:
    text = README.read_text()
    README.write_text(text.replace(current(), render()))


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        print(render())
