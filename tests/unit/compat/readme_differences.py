"""README.md's "Differences from PyMongo" list, generated from ``src/mongio/compat/differences.yaml``.

The list between the ``differences:start`` and ``differences:end`` markers is one bullet per entry that has a
``readme`` text, in the file's order. ``python tests/unit/compat/readme_differences.py --write`` rewrites it
after the list changed; tests/unit/compat/test_readme_differences.py fails while README and the list
disagree.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script from anywhere: the repository's root is the import root
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.support.differences_list import LIST, ROOT, GeneratedBlock, bullet, entries

__all__ = ["END", "LIST", "README", "START", "current", "entries", "render", "write"]

README = ROOT / "README.md"
START = "<!-- differences:start (generated from src/mongio/compat/differences.yaml; edit the list, not this) -->"
END = "<!-- differences:end -->"
WIDTH = 110
BLOCK = GeneratedBlock(README, START, END)


def render() -> str:
    """The generated block, markers included."""
    bullets = [bullet(entry["readme"], WIDTH) for entry in entries() if "readme" in entry]
    footer = bullet(
        "The full machine-readable list, README's entries included (each with a stable `id`, what PyMongo "
        "does, what mongio does, why, and what ported code should do), is `src/mongio/compat/differences.yaml`: "
        "CSOT timeout classes, awaitable deployment properties, listener recognition, `mongio.uri_parser`, "
        "BSON interoperation, and every signature difference the API parity test finds.",
        WIDTH,
    )
    return "\n".join([START, *bullets, footer, END])


def current() -> str:
    """The block README holds now, markers included."""
    return BLOCK.current()


def write() -> None:
    BLOCK.write(render())


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        print(render())
