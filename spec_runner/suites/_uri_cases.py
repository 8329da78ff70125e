"""Shared checks of the connection string and URI options spec files (they use one format)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from spec_runner.model import RunContext, SpecCase, relative_file, unique_names

Outcome = tuple[Any, tuple[str, ...]]
"""What parsing produced (or the error it raised) and the warnings it reported."""


def _fold(key: str) -> str:
    return key.lower()


def expect_outcome(case: Mapping[str, Any], attempt: Callable[[], Outcome]) -> Any:
    """Run ``attempt`` and check ``valid`` and ``warning``; returns the parse result of a valid case."""
    from mongio.errors import ConfigurationError

    try:
        result, found = attempt()
    except ConfigurationError as exc:
        if case.get("valid", True):
            raise AssertionError(
                f"{case['uri']!r} should be valid, but raised {type(exc).__name__}: {exc}"
            ) from exc
        return None
    if case.get("valid") is False:
        raise AssertionError(
            f"{case['uri']!r} should be invalid, but parsed to {result!r} (warnings {found!r})"
        )
    warning = case.get("warning")
    if warning is True and not found:
        raise AssertionError(f"{case['uri']!r} should warn, but reported no warning")
    if warning is False and found:
        raise AssertionError(f"{case['uri']!r} should not warn, but reported {list(found)!r}")
    return result


def check_options(uri: str, expected: Mapping[str, Any] | None, actual: Mapping[str, Any]) -> None:
    """Every expected option must be present with the expected value (keys compared case-insensitively)."""
    if expected is None:
        return
    for key, value in expected.items():
        if key not in actual:
            raise AssertionError(f"{uri!r}: option {key!r} missing; parsed options {dict(actual)!r}")
        got = actual[key]
        if got != value or type(got) is not type(value):
            raise AssertionError(f"{uri!r}: option {key!r} is {got!r}, expected {value!r}")


def check_hosts(uri: str, expected: list[Mapping[str, Any]] | None, hosts: Any) -> None:
    if expected is None:
        return
    if len(expected) != len(hosts):
        raise AssertionError(f"{uri!r}: {len(hosts)} hosts parsed ({hosts!r}), expected {len(expected)}")
    for want, got in zip(expected, hosts):
        for key, attribute in (("type", "type"), ("host", "host"), ("port", "port")):
            value = want.get(key)
            if value is not None and getattr(got, attribute) != value:
                raise AssertionError(
                    f"{uri!r}: host {got!r} has {key} {getattr(got, attribute)!r}, expected {value!r}"
                )


def check_auth(uri: str, expected: Mapping[str, Any] | None, parsed: Any) -> None:
    if expected is None:
        return
    for key, got in (("username", parsed.username), ("password", parsed.password), ("db", parsed.database)):
        value = expected.get(key)
        if value is not None and got != value:
            raise AssertionError(f"{uri!r}: auth {key} is {got!r}, expected {value!r}")


def collect_files(
    suite: str, tests_dir: Path, run_one: Callable[[Mapping[str, Any]], None]
) -> Iterator[SpecCase]:
    """One case per test of every ``.json`` file directly under ``tests_dir``."""
    for path in sorted(tests_dir.glob("*.json")):
        spec = json.loads(path.read_text(encoding="utf-8"))
        file = relative_file(tests_dir, path)
        tests = spec.get("tests", [])
        for name, case in zip(unique_names([t["description"] for t in tests]), tests):
            yield SpecCase(suite=suite, file=file, name=name, run=_bind(run_one, case))


def _bind(
    run_one: Callable[[Mapping[str, Any]], None], case: Mapping[str, Any]
) -> Callable[[RunContext], None]:
    return lambda _context: run_one(case)
