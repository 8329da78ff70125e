"""The documentation site, built with warnings as errors and checked as a reader would meet it: every internal
link and anchor resolves, nothing is loaded from outside, every public class, function, method and property
has its entry in the API reference, each ``Async...`` alias is shown as one, and the search index finds
``insert_one``. A headless Chromium renders three pages when ``/usr/bin/chromium`` is installed."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

from tests.docs import public_api, site
from tests.docs.conftest import report


@pytest.fixture(scope="module")
def pages(built_site: Path) -> dict[str, site.Page]:
    return site.read_site(built_site)


def test_site_has_every_guide_and_api_page(pages: dict[str, site.Page]) -> None:
    guides = {path.stem for path in (site.ROOT / "docs").glob("*.md")} - {"index"}
    assert {f"{name}/index.html" for name in guides} <= set(pages)
    api = {path.stem for path in (site.ROOT / "docs" / "api").glob("*.md")} - {"index"}
    assert {f"api/{name}/index.html" for name in api} <= set(pages)
    report(f"documentation site: {len(pages)} HTML pages: the home page, {len(guides)} guides, {len(api) + 1} API pages")


def test_internal_links_and_anchors_resolve(pages: dict[str, site.Page]) -> None:
    broken: list[str] = []
    checked = 0
    for page in pages.values():
        for url in page.links:
            if site.is_external(url) or url.startswith(("mailto:", "javascript:")):
                continue
            path, fragment = site.resolve(page, url)
            checked += 1
            target = pages.get(path)
            if target is None:
                if not (page.path.parents[len(Path(page.url).parts) - 1] / path).exists():
                    broken.append(f"{page.url}: {url} (no {path})")
            elif fragment and fragment not in target.ids:
                broken.append(f"{page.url}: {url} (no #{fragment} in {path})")
    assert checked > 500
    assert not broken, f"{len(broken)} broken internal links:\n  " + "\n  ".join(broken[:50])
    report(f"documentation site: {checked} internal links and anchors resolve")


def test_no_restructuredtext_markup_shows_in_the_api_pages(pages: dict[str, site.Page]) -> None:
    leftovers = re.compile(r":(?:class|meth|func|attr|exc|mod|data|obj):`|^\s*\.\. [a-z-]+::|\w::$", re.M)
    shown = {url: sorted(set(leftovers.findall("".join(page.text)))) for url, page in pages.items() if url.startswith("api/")}
    assert not {url: found for url, found in shown.items() if found}


def test_no_api_page_shows_the_private_read_preference_class(pages: dict[str, site.Page]) -> None:
    # Signatures name the modes' public base class, ReadPreferenceMode, not the _ServerMode it is aliased as.
    shown = sorted(url for url, page in pages.items() if url.startswith("api/") and "_ServerMode" in "".join(page.text))
    assert shown == []
    assert "ReadPreferenceMode" in "".join(pages["api/collection/index.html"].text)


def test_nothing_is_loaded_from_outside_the_site(pages: dict[str, site.Page]) -> None:
    external = {f"{page.url}: {url}" for page in pages.values() for url in page.resources if site.is_external(url)}
    assert not external, sorted(external)[:20]


def _api_ids(pages: dict[str, site.Page]) -> set[str]:
    return {anchor for url, page in pages.items() if url.startswith("api/") for anchor in page.ids}


def _public_paths() -> dict[int, list[str]]:
    """Each exported object's paths: where it is defined and every public module that exports it."""
    paths: dict[int, list[str]] = {}
    for module_name in public_api.PUBLIC_MODULES:
        for name, obj in public_api.exports(module_name):
            if public_api.is_mongio_object(obj):
                found = paths.setdefault(id(obj), [f"{obj.__module__}.{obj.__qualname__}"])
                found.append(f"{module_name}.{name}")
    return paths


def _is_alias(name: str, obj: object) -> bool:
    """A second name for a class or function (``AsyncCollection`` for ``Collection``): shown as an alias, not
    documented twice."""
    return public_api.is_mongio_object(obj) and obj.__name__ != name  # type: ignore[attr-defined]


def test_every_public_class_function_method_and_property_is_in_the_api_reference(
    pages: dict[str, site.Page],
) -> None:
    ids = _api_ids(pages)
    paths = _public_paths()
    missing: list[str] = []
    members = 0
    for module_name in public_api.PUBLIC_MODULES:
        for name, obj in public_api.exports(module_name):
            if not public_api.is_mongio_object(obj) or _is_alias(name, obj):
                continue
            anchor = next((path for path in paths[id(obj)] if path in ids), None)
            if anchor is None:
                missing.append(f"{module_name}.{name}")
                continue
            if not inspect.isclass(obj):
                continue
            for member, function in public_api.public_members(obj):
                if function is not None and function.__name__ != member:
                    continue  # a second name of a member (PyMongo's spelling: writeable = writable)
                members += 1
                owner = next(klass for klass in obj.__mro__ if member in vars(klass))
                if f"{anchor}.{member}" not in ids and not any(
                    found.endswith(f".{owner.__qualname__}.{member}") for found in ids
                ):
                    missing.append(f"{anchor}.{member}")
    assert members > 500
    assert not missing, f"{len(missing)} public names without an API entry:\n  " + "\n  ".join(sorted(set(missing)))


def test_every_async_alias_is_shown_as_an_alias(pages: dict[str, site.Page]) -> None:
    text = " ".join(" ".join("".join(page.text) for url, page in pages.items() if url.startswith("api/")).split())
    ids = _api_ids(pages)
    targets = {
        (name, obj.__name__): obj
        for module_name in public_api.PUBLIC_MODULES
        for name, obj in public_api.exports(module_name)
        if _is_alias(name, obj)
    }
    aliases = set(targets)
    paths = _public_paths()
    undocumented = [name for (name, _), obj in targets.items() if not any(path in ids for path in paths[id(obj)])]
    assert not undocumented, f"aliases of names the API reference does not document: {undocumented}"
    assert ("AsyncCollection", "Collection") in aliases and ("PyMongoError", "MongioError") in aliases
    missing = [f"{name} (alias of {target})" for name, target in sorted(aliases) if f"{name}: alias of {target}" not in text]
    assert not missing, "aliases the API reference does not show as such: " + ", ".join(missing)


def test_search_index_finds_insert_one(built_site: Path) -> None:
    index = json.loads((built_site / "search" / "search_index.json").read_text())
    hits = [doc["location"] for doc in index["docs"] if re.search(r"\binsert_one\b", doc["title"] + " " + doc["text"])]
    assert any(location.startswith("api/collection/#mongio.collection.Collection.insert_one") for location in hits), hits[:10]
    assert any(not location.startswith("api/") for location in hits), "no guide mentions insert_one"
