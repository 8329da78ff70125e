"""The migration guide's list of differences is generated from src/mongio/compat/differences.yaml: it shows
every entry of the list, with every field a reader needs, and nothing the list lacks."""

from __future__ import annotations

from tests.docs import migrating_differences
from tests.support.differences_list import entries


def test_migration_guide_shows_the_generated_list() -> None:
    assert migrating_differences.current() == migrating_differences.render(), (
        "docs/migrating.md's differences list is out of date: run python tests/docs/migrating_differences.py --write"
    )


def test_every_entry_appears_once_with_its_fields() -> None:
    block = migrating_differences.current()
    listed = entries()
    assert len(listed) > 10
    for entry in listed:
        assert block.count(f"({entry['id']})</span>") == 1, entry["id"]
        heading = f"**{migrating_differences.plain(entry['api'])}**"
        assert heading in block, entry["id"]
        after = block[block.index(heading) :]
        for key, title in migrating_differences.FIELDS:
            if key in entry:
                text = " ".join(f"- {title}: {migrating_differences.plain(entry[key])}".split())
                assert text in " ".join(after.split()), (entry["id"], key)
