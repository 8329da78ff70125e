"""The URI options specification's tests, through :meth:`mongio.options.ClientOptions.from_uri`.

Validity is judged on building a client's options from the string alone (no keywords), which is where
options that contradict each other are refused; warnings are those the build reported, and are also
checked to have been issued as :class:`~mongio.options.ConfigurationWarning`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from spec_runner.model import SpecCase, Suite
from spec_runner.suites._uri_cases import check_options, collect_files, expect_outcome

NAME = "uri-options"


def _run(case: Mapping[str, Any]) -> None:
    from mongio.options import ClientOptions, ConfigurationWarning

    def attempt() -> tuple[Any, tuple[str, ...]]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            options = ClientOptions.from_uri(case["uri"])
        issued = tuple(str(w.message) for w in caught if issubclass(w.category, ConfigurationWarning))
        if issued != options.warnings:
            raise AssertionError(
                f"warnings issued {issued!r} differ from those reported {options.warnings!r}"
            )
        return options, options.warnings

    options = expect_outcome(case, attempt)
    if options is not None:
        check_options(case["uri"], case.get("options"), options.options)


def collect(tests_dir: Path) -> Iterator[SpecCase]:
    return collect_files(NAME, tests_dir, _run)


SUITE = Suite(name=NAME, collect=collect)
