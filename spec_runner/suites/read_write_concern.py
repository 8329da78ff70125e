"""The read and write concern specification's server-less tests.

- ``connection-string/``: a URI gives a read or write concern, or is invalid. The string is parsed with
  :func:`mongio.options.parse_uri` in strict mode (an invalid value is an error, not a warning) and the
  concerns are the ones :meth:`mongio.options.ClientOptions.from_uri` builds from it, which is also where
  contradicting settings (``w=0`` with ``journal=true``) are refused.
- ``document/``: a :class:`~mongio.options.ReadConcern` or :class:`~mongio.options.WriteConcern` built from
  the specification's fields gives the document sent to the server, ``isServerDefault`` and
  ``isAcknowledged``, or is invalid.

The ``operation/`` files use the unified test format: the default write concern is left out of the commands
of every write helper. They run against the server through the unified runner, in the same suite.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from spec_runner.model import RunContext, SpecCase, Suite, relative_file, unique_names
from spec_runner.suites._unified_support import unified_suite
from spec_runner.suites._uri_cases import expect_outcome

NAME = "read-write-concern"
DIRECTORIES = ("connection-string", "document")

# The specification's write concern fields -> WriteConcern's keyword argument and the command document's key.
WRITE_CONCERN_FIELDS = {
    "w": ("w", "w"),
    "wtimeoutMS": ("wtimeout", "wtimeout"),
    "journal": ("j", "j"),
    "fsync": ("fsync", "fsync"),
}
READ_CONCERN_FIELDS = {"level": "level"}


def _same(got: Any, want: Any) -> bool:
    """Equal and of the same type, recursively (so that ``True`` never passes for ``1``)."""
    if isinstance(want, Mapping):
        return (
            isinstance(got, Mapping)
            and set(got) == set(want)
            and all(_same(got[key], value) for key, value in want.items())
        )
    return bool(got == want) and type(got) is type(want)


def _unknown(what: str, given: Mapping[str, Any], known: Mapping[str, Any]) -> None:
    extra = sorted(set(given) - set(known))
    if extra:
        raise AssertionError(f"no mapping is known for the {what} field(s) {extra!r}")


def _expected_write_document(fields: Mapping[str, Any]) -> dict[str, Any]:
    _unknown("writeConcern", fields, WRITE_CONCERN_FIELDS)
    return {WRITE_CONCERN_FIELDS[key][1]: value for key, value in fields.items()}


def _check_write_concern(
    where: str, concern: Any, fields: Mapping[str, Any], expected: Mapping[str, Any]
) -> None:
    """``concern`` sends ``expected`` and its properties give ``fields`` (the specification's names)."""
    if not _same(concern.document, expected):
        raise AssertionError(f"{where}: write concern document {concern.document!r}, expected {expected!r}")
    # The typed properties must say the same as the document.
    for key, attribute in (("w", "w"), ("wtimeoutMS", "wtimeout"), ("journal", "j")):
        got = getattr(concern, attribute)
        want = fields.get(key)
        if not (got is None and want is None) and not _same(got, want):
            raise AssertionError(f"{where}: WriteConcern.{attribute} is {got!r}, expected {want!r}")


def _check_read_concern(
    where: str, concern: Any, fields: Mapping[str, Any], expected: Mapping[str, Any]
) -> None:
    _unknown("readConcern", fields, READ_CONCERN_FIELDS)
    if not _same(concern.document, expected):
        raise AssertionError(
            f"{where}: read concern document {concern.document!r}, expected {dict(expected)!r}"
        )
    if concern.level != fields.get("level"):
        raise AssertionError(
            f"{where}: ReadConcern.level is {concern.level!r}, expected {fields.get('level')!r}"
        )


# -- connection-string/ --------------------------------------------------------------------------------------


def _run_connection_string(test: Mapping[str, Any]) -> None:
    from mongio.options import ClientOptions, ConfigurationWarning, parse_uri

    uri = test["uri"]

    def attempt() -> tuple[Any, tuple[str, ...]]:
        parse_uri(uri, strict=True, warn=False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            options = ClientOptions.from_uri(uri)
        issued = tuple(str(w.message) for w in caught if issubclass(w.category, ConfigurationWarning))
        return options, issued

    options = expect_outcome(test, attempt)
    if options is None:
        return
    if test.get("readConcern") is not None:
        fields = test["readConcern"]
        _check_read_concern(repr(uri), options.read_concern, fields, fields)
    if test.get("writeConcern") is not None:
        fields = test["writeConcern"]
        _check_write_concern(repr(uri), options.write_concern, fields, _expected_write_document(fields))


# -- document/ -----------------------------------------------------------------------------------------------


def _expect_invalid(what: str, fields: Mapping[str, Any], build: Callable[[], Any]) -> None:
    from mongio.errors import ConfigurationError

    try:
        concern = build()
    except (ConfigurationError, TypeError):
        return
    raise AssertionError(f"{what} {dict(fields)!r} should be invalid, but built {concern!r}")


def _check_flag(where: str, name: str, got: bool, want: bool | None) -> None:
    if want is not None and got != want:
        raise AssertionError(f"{where}: {name} is {got}, expected {want}")


def _run_write_concern_document(test: Mapping[str, Any]) -> None:
    from mongio.options import WriteConcern

    fields = test["writeConcern"]
    _unknown("writeConcern", fields, WRITE_CONCERN_FIELDS)
    kwargs = {WRITE_CONCERN_FIELDS[key][0]: value for key, value in fields.items()}
    if not test.get("valid", True):
        _expect_invalid("write concern", fields, lambda: WriteConcern(**kwargs))
        return
    concern = WriteConcern(**kwargs)
    where = f"WriteConcern({kwargs!r})"
    if test.get("writeConcernDocument") is not None:
        _check_write_concern(where, concern, fields, test["writeConcernDocument"])
    _check_flag(where, "is_server_default", concern.is_server_default, test.get("isServerDefault"))
    _check_flag(where, "acknowledged", concern.acknowledged, test.get("isAcknowledged"))


def _run_read_concern_document(test: Mapping[str, Any]) -> None:
    from mongio.options import ReadConcern

    fields = test["readConcern"]
    _unknown("readConcern", fields, READ_CONCERN_FIELDS)
    level = fields.get("level")
    if not test.get("valid", True):
        _expect_invalid("read concern", fields, lambda: ReadConcern(level))
        return
    concern = ReadConcern(level)
    where = f"ReadConcern({level!r})"
    if test.get("readConcernDocument") is not None:
        _check_read_concern(where, concern, fields, test["readConcernDocument"])
    _check_flag(where, "is_server_default", concern.is_server_default, test.get("isServerDefault"))


def _run_document(test: Mapping[str, Any]) -> None:
    if "writeConcern" not in test and "readConcern" not in test:
        raise AssertionError("the test gives neither a readConcern nor a writeConcern")
    if "writeConcern" in test:
        _run_write_concern_document(test)
    if "readConcern" in test:
        _run_read_concern_document(test)


# -- collection ----------------------------------------------------------------------------------------------

RUNNERS: dict[str, Callable[[Mapping[str, Any]], None]] = {
    "connection-string": _run_connection_string,
    "document": _run_document,
}


def collect(tests_dir: Path) -> Iterator[SpecCase]:
    for directory in DIRECTORIES:
        run_one = RUNNERS[directory]
        for path in sorted((tests_dir / directory).glob("*.json")):
            spec = json.loads(path.read_text(encoding="utf-8"))
            file = relative_file(tests_dir, path)
            tests = spec.get("tests", [])
            for name, test in zip(unique_names([t["description"] for t in tests]), tests):
                yield SpecCase(suite=NAME, file=file, name=name, run=_bind(run_one, test))


def _bind(
    run_one: Callable[[Mapping[str, Any]], None], test: Mapping[str, Any]
) -> Callable[[RunContext], None]:
    return lambda _context: run_one(test)


_OPERATION = unified_suite(NAME, directories=("operation",))


def collect_all(tests_dir: Path) -> Iterator[SpecCase]:
    """The server-less cases, then the unified ``operation/`` cases (which need the server)."""
    yield from collect(tests_dir)
    yield from _OPERATION.collect(tests_dir)


SUITE = Suite(name=NAME, collect=collect_all, needs_server=True)
