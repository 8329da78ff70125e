"""A headless Chromium renders the built site, served over HTTP on loopback: the home page, the API page of
``Collection`` and a guide. Each has its title, the theme's bundled scripts ran (served from the site
itself), nothing shows an error, and ``Collection.insert_one`` has its anchor. Skipped when Debian's
``chromium`` package is not installed (``apt-get install -y chromium``)."""

from __future__ import annotations

import functools
import html
import http.server
import json
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.conftest import report
from tests.docs.site import ROOT

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="/usr/bin/chromium is absent: install Debian's chromium package to run it"
)


# Every guide and the Collection API page, each in a 1280 px wide frame of one page served beside the site:
# it writes, once all have loaded, how many code blocks each page has and how many scroll sideways (their
# ends, where the comments are, hidden).
_MEASURED = sorted(f"{path.stem}/" for path in (ROOT / "docs").glob("*.md") if path.stem != "index")
_MEASURED.append("api/collection/")
_OVERFLOW_PATH = "/__code-overflow__.html"
_OVERFLOW_PAGE = (
    """<!doctype html><html><body><pre id="result">pending</pre><script>
const pages = PAGES;
const results = [];
let left = pages.length;
for (const page of pages) {
  const frame = document.createElement("iframe");
  frame.style.cssText = "width:1280px;height:900px;border:0";
  frame.src = "/" + page;
  frame.addEventListener("load", () => {
    const blocks = [...frame.contentDocument.querySelectorAll(".md-typeset pre > code")];
    const hidden = blocks.filter(code => code.scrollWidth > code.clientWidth + 1);
    results.push(page + " " + blocks.length + " " + hidden.length);
    if (--left === 0) document.getElementById("result").textContent = results.sort().join("\\n");
  });
  document.body.appendChild(frame);
}
</script></body></html>"""
    .replace("PAGES", json.dumps(_MEASURED))
    .encode()
)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path != _OVERFLOW_PATH:
            super().do_GET()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(_OVERFLOW_PAGE)))
        self.end_headers()
        self.wfile.write(_OVERFLOW_PAGE)


@pytest.fixture(scope="module")
def site_url(built_site: Path) -> Iterator[str]:
    """The built site served by http.server on 127.0.0.1, for the module's tests."""
    handler = functools.partial(_QuietHandler, directory=str(built_site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="docs-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _chromium(profile: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    command = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=5000",
        *arguments,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


PAGES = [
    ("", "mongio"),
    ("api/collection/", "Collection - mongio"),
    ("crud/", "CRUD and cursors - mongio"),
]
ERROR_TEXT = ("404 - Not found", "Traceback (most recent call last)", "Could not find", "ERROR -")


@pytest.mark.parametrize(("path", "title"), PAGES)
def test_chromium_renders_the_page(site_url: str, path: str, title: str, tmp_path: Path) -> None:
    result = _chromium(tmp_path / "profile", "--dump-dom", site_url + path)
    dom = result.stdout
    assert result.returncode == 0 and "<html" in dom, result.stderr[-2000:]
    assert f"<title>{title}</title>" in dom
    # The page is served as <html class="no-js">; the theme's bundled script marks it js-focus-visible.
    assert "js-focus-visible" in dom.split(">", 2)[1], "the theme's bundled scripts did not run"
    assert not [text for text in ERROR_TEXT if text in dom]
    if path == "api/collection/":
        assert 'id="mongio.collection.Collection.insert_one"' in dom
        assert 'id="mongio.collection.Collection.aggregate"' in dom
    report(f"chromium: {site_url + path} rendered, title {title!r}")


def test_chromium_screenshot_of_the_collection_page(site_url: str, tmp_path: Path) -> None:
    shot = tmp_path / "collection.png"
    result = _chromium(
        tmp_path / "profile", "--window-size=1280,900", f"--screenshot={shot}", site_url + "api/collection/"
    )
    assert result.returncode == 0 and shot.exists(), result.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1280, 900)
    # A blank page compresses to a few kilobytes; rendered text and code do not.
    assert len(data) > 30_000, f"the screenshot looks blank ({len(data)} bytes)"
    report(f"chromium: screenshot of api/collection/ {width}x{height}, {len(data)} bytes")


def test_no_code_block_hides_its_line_ends_at_1280_px(site_url: str, tmp_path: Path) -> None:
    """docs/stylesheets/extra.css: at 1280 px no code block of a guide or of the Collection page scrolls
    sideways, so the comments at the ends of the examples' lines are on screen."""
    result = _chromium(
        tmp_path / "profile", "--window-size=1300,1000", "--virtual-time-budget=20000", "--dump-dom",
        site_url + _OVERFLOW_PATH.lstrip("/"),
    )  # fmt: skip
    found = re.search(r'<pre id="result">(.*?)</pre>', result.stdout, re.S)
    assert found is not None, result.stderr[-2000:]
    lines = html.unescape(found.group(1)).splitlines()
    counts = {page: (int(blocks), int(hidden)) for page, blocks, hidden in (line.split() for line in lines)}
    assert sorted(counts) == sorted(_MEASURED)
    assert sum(blocks for blocks, _ in counts.values()) > 100
    assert {page: hidden for page, (_, hidden) in counts.items() if hidden} == {}
    report(f"chromium: {sum(b for b, _ in counts.values())} code blocks on {len(counts)} pages, none scrolls at 1280 px")
