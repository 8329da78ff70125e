"""The built documentation site, read as a browser would: its pages, their anchors and their links."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

ROOT = Path(__file__).resolve().parents[2]


def build(site_dir: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of the repository's site into ``site_dir`` (as ``make docs`` does)."""
    environment = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--clean", "--site-dir", str(site_dir)],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@dataclass
class Page:
    """One HTML file of the site: the ids it defines and the URLs it points at."""

    path: Path
    url: str  # its path from the site's root, e.g. "api/collection/index.html"
    ids: set[str] = field(default_factory=set)
    links: list[str] = field(default_factory=list)  # <a href>
    resources: list[str] = field(default_factory=list)  # <script src>, <link href>, <img src>
    title: str = ""
    text: list[str] = field(default_factory=list)


class _Reader(HTMLParser):
    def __init__(self, page: Page) -> None:
        super().__init__(convert_charrefs=True)
        self.page = page
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if "id" in values:
            self.page.ids.add(values["id"])
        if tag == "a" and "name" in values:
            self.page.ids.add(values["name"])
        if tag == "a" and "href" in values:
            self.page.links.append(values["href"])
        elif tag in ("script", "img") and values.get("src"):
            self.page.resources.append(values["src"])
        elif tag == "link" and values.get("href"):
            self.page.resources.append(values["href"])
        self._in_title = tag == "title"

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.page.title += data
        self.page.text.append(data)


def read_site(site_dir: Path) -> dict[str, Page]:
    """Every HTML page of the site by its path from the root."""
    pages: dict[str, Page] = {}
    for path in sorted(site_dir.rglob("*.html")):
        page = Page(path, path.relative_to(site_dir).as_posix())
        _Reader(page).feed(path.read_text(encoding="utf-8"))
        pages[page.url] = page
    return pages


def is_external(url: str) -> bool:
    parts = urlsplit(url)
    return bool(parts.scheme or parts.netloc)


def resolve(page: Page, url: str) -> tuple[str, str]:
    """The site path and the fragment a page-relative URL names (a directory means its index.html)."""
    target = urlsplit(urljoin("http://site/" + page.url, url))
    path = unquote(target.path).lstrip("/")
    if path == "" or path.endswith("/"):
        path += "index.html"
    return path, unquote(target.fragment)
