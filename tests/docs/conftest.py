"""The documentation tests: the guides' code blocks run against the test server, and the built site is
checked as a reader would meet it. Their counts are reported at the end of the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.docs import code_blocks, site

_REPORT: list[str] = []


def report(line: str) -> None:
    """A line for the end-of-run summary of the documentation tests."""
    _REPORT.append(line)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _REPORT:
        terminalreporter.section("documentation")
        for line in _REPORT:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def guide_pages() -> dict[str, code_blocks.GuidePage]:
    return {page.name: code_blocks.guide_page(page) for page in code_blocks.guide_pages()}


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built from this checkout into a temporary directory, warnings as errors (``make docs``)."""
    site_dir = tmp_path_factory.mktemp("site")
    result = site.build(site_dir)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    return site_dir
