"""README's "Differences from PyMongo" list is generated from src/mongio/compat/differences.yaml: it shows
exactly the entries that have a README text, so README lists nothing the file lacks and drops nothing the file
says belongs there."""

from __future__ import annotations

import re

from tests.unit.compat import readme_differences


def test_readme_shows_the_generated_list() -> None:
    assert readme_differences.current() == readme_differences.render(), (
        "README.md's differences list is out of date: run python tests/unit/compat/readme_differences.py --write"
    )


def test_every_readme_text_appears_once_and_nothing_else_is_listed() -> None:
    block = readme_differences.current()
    bullets = [" ".join(b.split()) for b in re.split(r"\n- ", block.split("\n", 1)[1].rsplit("\n", 1)[0]) if b]
    texts = [" ".join(e["readme"].split()) for e in readme_differences.entries() if "readme" in e]
    assert [b.removeprefix("- ") for b in bullets[:-1]] == texts
    assert "differences.yaml" in bullets[-1]


def test_every_entry_has_the_common_fields_and_a_unique_id() -> None:
    entries = readme_differences.entries()
    ids = [entry["id"] for entry in entries]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    allowed = {"id", "api", "pymongo", "mongio", "why", "workaround", "readme", "parity"}
    for entry in entries:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", entry["id"]), entry["id"]
        assert set(entry) <= allowed, (entry["id"], set(entry) - allowed)
        assert all(str(entry.get(key, "")).strip() for key in ("api", "pymongo", "mongio", "why")), entry["id"]
