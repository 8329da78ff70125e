"""Evaluating matches: an expected value from a test file against an actual value from the driver.

Documents: every expected key must be present and match; the actual document may have more keys only at the
root (a command, a reply, a returned document, an error response, log data) and never in nested documents.
Arrays: same length, element by element. Numbers: int, Int64 and float match when numerically equal
(Decimal128 only matches Decimal128). Every other value matches an equal value of the same BSON type.

An expected document whose first and only key starts with ``$$`` is a special operator: ``$$exists``,
``$$type``, ``$$matchesEntity``, ``$$matchesHexBytes``, ``$$unsetOrMatches``, ``$$sessionLsid``, ``$$lte``,
``$$matchAsDocument`` and ``$$matchAsRoot``. ``$$placeholder`` is not allowed in an expected value.

A mismatch raises ``MatchError`` naming the path and the expected and actual values; a malformed expectation
(unknown operator, bad hex, undefined entity) raises ``UnifiedTestError``.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Protocol

from mongio.bson.decimal128 import Decimal128
from mongio.bson.errors import BSONError
from spec_runner.unified import ejson
from spec_runner.unified.errors import MatchError, UnifiedTestError


class _Missing:
    """The value of a key the actual document does not have (distinct from ``None``, BSON null)."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<missing>"

    def __bool__(self) -> bool:
        return False


MISSING: Final = _Missing()
"""Pass as ``actual`` when there is no value at all (an operation without a result, an error without one)."""

TRUNCATION_MARK: Final = "..."
"""What the logging specification appends to an Extended JSON document cut at the max document length."""


class EntityLookup(Protocol):
    """What the entity-based operators need from the entity map."""

    def bson_value(self, name: str) -> Any:
        """The BSON value stored under ``name`` (raises ``EntityError`` if undefined or not a BSON value)."""
        ...

    def session_lsid(self, name: str) -> Any:
        """The logical session id document of the session entity ``name``."""
        ...


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1

# BSON type aliases as the $type query operator spells them; "number" is the alias for the four numerics.
TYPE_ALIASES: Final = frozenset(
    {
        "double",
        "string",
        "object",
        "array",
        "binData",
        "undefined",
        "objectId",
        "bool",
        "date",
        "null",
        "regex",
        "dbPointer",
        "javascript",
        "symbol",
        "javascriptWithScope",
        "int",
        "timestamp",
        "long",
        "decimal",
        "minKey",
        "maxKey",
        "number",
    }
)
NUMBER_ALIASES: Final = frozenset({"int", "long", "double", "decimal"})

# mongio.bson classes by name, so the matcher knows them without importing modules that may not exist yet.
_CLASS_ALIASES: Final = {
    "Int64": "long",
    "ObjectId": "objectId",
    "Decimal128": "decimal",
    "Timestamp": "timestamp",
    "Binary": "binData",
    "Regex": "regex",
    "MinKey": "minKey",
    "MaxKey": "maxKey",
    "DBPointer": "dbPointer",
    "Symbol": "symbol",
    "Undefined": "undefined",
    "DatetimeMS": "date",
    "DBRef": "object",
    "RawBSONDocument": "object",
}


def bson_type(value: Any) -> str | None:
    """The ``$type`` alias of a driver value, or ``None`` for a value that is not a BSON type."""
    if value is None:
        return "null"
    for cls in type(value).__mro__:
        if cls.__module__.startswith("mongio.bson"):
            if cls.__name__ == "Code":
                return "javascript" if getattr(value, "scope", None) is None else "javascriptWithScope"
            alias = _CLASS_ALIASES.get(cls.__name__)
            if alias is not None:
                return alias
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int" if INT32_MIN <= value <= INT32_MAX else "long"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, bytes | bytearray | memoryview | uuid.UUID):
        return "binData"
    if isinstance(value, datetime):
        return "date"
    if isinstance(value, re.Pattern):
        return "regex"
    return None


def is_operator(value: Any) -> bool:
    """True for an expected document whose first and only key starts with ``$$``."""
    return isinstance(value, Mapping) and len(value) == 1 and next(iter(value)).startswith("$$")


def child_path(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 300 else text[:297] + "..."


def _fail(path: str, expected: Any, actual: Any, why: str = "") -> MatchError:
    lead = f"{why}: " if why else ""
    return MatchError(path, f"{lead}expected {_show(expected)}, got {_show(actual)}")


def _is_number(value: Any) -> bool:
    return bson_type(value) in ("int", "long", "double")


def _normalized(value: Any) -> Any:
    """A form in which equal BSON values compare equal: binary as (subtype, bytes), datetimes (aware, naive
    as UTC, or ``DatetimeMS``) as milliseconds since the epoch, as BSON stores them."""
    if isinstance(value, uuid.UUID):
        return ("binData", 4, value.bytes)
    if bson_type(value) == "binData":
        return ("binData", int(getattr(value, "subtype", 0)), bytes(value))
    if isinstance(value, datetime):
        aware = value.replace(tzinfo=UTC) if value.tzinfo is None else value
        return ("date", (aware - _EPOCH) // timedelta(milliseconds=1))
    if bson_type(value) == "date":
        return ("date", int(value))
    return value


def values_equal(expected: Any, actual: Any) -> bool:
    """Equality of two non-container values under the matching rules (flexible numerics, same type)."""
    if _is_number(expected) and _is_number(actual):
        if isinstance(expected, float) and isinstance(actual, float) and math.isnan(expected):
            return math.isnan(actual)
        return bool(expected == actual)
    expected_type, actual_type = bson_type(expected), bson_type(actual)
    if expected_type != actual_type:
        return False
    if isinstance(expected, Decimal128):
        return expected.bid == getattr(actual, "bid", None)
    if _is_dbref(expected) or _is_dbref(actual):
        return bool(expected == actual)
    if expected_type in ("object", "array"):
        return _exact(expected, actual)
    return bool(_normalized(expected) == _normalized(actual))


def _exact(expected: Any, actual: Any) -> bool:
    """Exact equality with key order ignored, for documents inside values (Code scopes, collection data)."""
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        return expected.keys() == actual.keys() and all(_exact(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list | tuple) and isinstance(actual, list | tuple):
        return len(expected) == len(actual) and all(_exact(e, a) for e, a in zip(expected, actual))
    if isinstance(expected, Mapping | list | tuple) or isinstance(actual, Mapping | list | tuple):
        return False
    return values_equal(expected, actual)


def documents_equal(expected: Any, actual: Any) -> bool:
    """Exact match with key order ignored (no operators, no extra keys): how ``outcome`` data is compared."""
    return _exact(expected, actual)


class Matcher:
    """Matches expected values against actual ones; ``entities`` serves the entity-based operators."""

    def __init__(self, entities: EntityLookup | None = None) -> None:
        self._entities = entities
        self._operators: dict[str, Callable[[Any, Any, str, bool], None]] = {
            "$$exists": self._exists,
            "$$type": self._type,
            "$$matchesEntity": self._matches_entity,
            "$$matchesHexBytes": self._matches_hex_bytes,
            "$$unsetOrMatches": self._unset_or_matches,
            "$$sessionLsid": self._session_lsid,
            "$$lte": self._lte,
            "$$matchAsDocument": self._match_as_document,
            "$$matchAsRoot": self._match_as_root,
            "$$placeholder": self._placeholder,
        }

    def match(
        self, expected: Any, actual: Any, *, root: bool = True, path: str = "", root_elements: bool = False
    ) -> None:
        """Raise ``MatchError`` unless ``actual`` matches ``expected``.

        ``root``: the actual document may have extra keys at its top level. ``root_elements``: ``expected`` is
        an array of root-level documents (the documents of an iterable result such as ``find``).
        """
        if is_operator(expected):
            self._operator(expected, actual, path, root)
            return
        if actual is MISSING:
            raise MatchError(path, f"expected {_show(expected)}, but there is no value")
        if isinstance(expected, Mapping) and bson_type(expected) == "object" and not _is_dbref(expected):
            self._match_document(expected, actual, root, path)
            return
        if isinstance(expected, list | tuple):
            if not isinstance(actual, list | tuple):
                raise _fail(path, expected, actual, "expected an array")
            if len(expected) != len(actual):
                raise _fail(path, expected, actual, f"expected {len(expected)} elements, got {len(actual)}")
            for index, (item, got) in enumerate(zip(expected, actual)):
                if is_operator(item) and "$$unsetOrMatches" in item:
                    # An array element is never unset: arrays must have the same number of elements.
                    raise UnifiedTestError(
                        f"{child_path(path, index)}: $$unsetOrMatches cannot be used as an array element"
                    )
                self.match(item, got, root=root_elements, path=child_path(path, index))
            return
        if not values_equal(expected, actual):
            raise _fail(path, expected, actual)

    def matches(self, expected: Any, actual: Any, *, root: bool = True, root_elements: bool = False) -> bool:
        """Whether ``actual`` matches ``expected`` (malformed expectations still raise)."""
        try:
            self.match(expected, actual, root=root, root_elements=root_elements)
        except MatchError:
            return False
        return True

    def _match_document(self, expected: Mapping[str, Any], actual: Any, root: bool, path: str) -> None:
        if not isinstance(actual, Mapping):
            raise _fail(path, dict(expected), actual, "expected a document")
        for key, value in expected.items():
            here = child_path(path, key)
            got = actual.get(key, MISSING)
            if is_operator(value):
                self._operator(value, got, here, False)
            elif got is MISSING:
                raise MatchError(here, f"key is missing; expected {_show(value)}")
            else:
                self.match(value, got, root=False, path=here)
        if not root:
            extra = [k for k in actual if k not in expected]
            if extra:
                raise MatchError(path, f"unexpected keys {extra} in nested document {_show(dict(actual))}")

    def _operator(self, expected: Mapping[str, Any], actual: Any, path: str, root: bool) -> None:
        ((name, argument),) = expected.items()
        handler = self._operators.get(name)
        if handler is None:
            raise UnifiedTestError(f"{path or 'value'}: unknown special operator {name}")
        handler(argument, actual, path, root)

    def _exists(self, argument: Any, actual: Any, path: str, root: bool) -> None:
        if not isinstance(argument, bool):
            raise UnifiedTestError(f"{path}: $$exists takes a boolean, not {argument!r}")
        present = actual is not MISSING
        if argument and not present:
            raise MatchError(path, "expected the key to exist, but it is missing")
        if not argument and present:
            raise MatchError(path, f"expected the key to be absent, got {_show(actual)}")

    def _type(self, argument: Any, actual: Any, path: str, root: bool) -> None:
        names = [argument] if isinstance(argument, str) else argument
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise UnifiedTestError(f"{path}: $$type takes a type alias or a list of them, not {argument!r}")
        unknown = [n for n in names if n not in TYPE_ALIASES]
        if unknown:
            raise UnifiedTestError(f"{path}: unknown $$type alias(es) {unknown}")
        if actual is MISSING:
            raise MatchError(path, f"expected a value of type {argument!r}, but the key is missing")
        allowed = set(names)
        if "number" in allowed:
            allowed |= NUMBER_ALIASES
        kind = bson_type(actual)
        if kind not in allowed:
            raise MatchError(path, f"expected type {argument!r}, got {kind} {_show(actual)}")

    def _lookup(self) -> EntityLookup:
        if self._entities is None:
            raise UnifiedTestError("an entity operator was used where no entity map is available")
        return self._entities

    def _matches_entity(self, argument: Any, actual: Any, path: str, root: bool) -> None:
        if not isinstance(argument, str):
            raise UnifiedTestError(f"{path}: $$matchesEntity takes an entity name, not {argument!r}")
        self.match(self._lookup().bson_value(argument), actual, root=root, path=path)

    def _matches_hex_bytes(self, argument: Any, actual: Any, path: str, root: bool) -> None:
        if (
            not isinstance(argument, str)
            or len(argument) % 2
            or re.fullmatch(r"[0-9A-Fa-f]*", argument) is None
        ):
            raise UnifiedTestError(
                f"{path}: $$matchesHexBytes takes an even number of hex digits, not {argument!r}"
            )
        wanted = bytes.fromhex(argument)
        if isinstance(actual, str):
            got: bytes | None = (
                bytes.fromhex(actual) if re.fullmatch(r"(?:[0-9A-Fa-f]{2})*", actual) else None
            )
        elif isinstance(actual, bytes | bytearray | memoryview):
            got = bytes(actual)
        else:
            got = None
        if got != wanted:
            raise _fail(path, f"bytes {argument.lower()}", actual)

    def _unset_or_matches(self, argument: Any, actual: Any, path: str, root: bool) -> None:
        if actual is MISSING:
            return
        self.match(argument, actual, root=root, path=path)

    def _session_lsid(self, argument: Any, actual: Any, path: str, root: bool) -> None:
        if not isinstance(argument, str):
            raise UnifiedTestError(f"{path}: $$sessionLsid takes a session entity name, not {argument!r}")
        lsid = self._lookup().session_lsid(argument)
        if actual is MISSING:
            raise MatchError(path, f"expected the lsid of {argument} {_show(lsid)}, but the key is missing")
        if not _exact(lsid, actual):
            raise _fail(path, lsid, actual, f"not the lsid of session {argument}")

    def _lte(self, argument: Any, actual: Any, path: str, root: bool) -> None:
        if not _is_number(argument):
            raise UnifiedTestError(f"{path}: $$lte takes a number, not {argument!r}")
        if actual is MISSING:
            raise MatchError(path, f"expected a number <= {argument}, but the key is missing")
        if not _is_number(actual) or not actual <= argument:
            raise MatchError(path, f"expected a number <= {_show(argument)}, got {_show(actual)}")

    def _match_as_document(self, argument: Any, actual: Any, path: str, root: bool) -> None:
        if actual is MISSING:
            raise MatchError(path, "expected an Extended JSON string, but the key is missing")
        if not isinstance(actual, str):
            raise _fail(path, "an Extended JSON string", actual)
        try:
            parsed = ejson.loads(actual)
        except (ValueError, TypeError, KeyError, BSONError) as exc:
            if actual.endswith(TRUNCATION_MARK):
                # The logging specification cuts long documents and appends "..."; what is left is not JSON.
                raise MatchError(
                    path,
                    f"the Extended JSON was truncated after {len(actual) - len(TRUNCATION_MARK)} characters "
                    f"(the driver's max document length), so it cannot be matched as a document: "
                    f"{_show(actual)}",
                ) from None
            raise MatchError(path, f"cannot parse {_show(actual)} as Extended JSON: {exc}") from None
        if not isinstance(parsed, Mapping):
            raise MatchError(path, f"expected Extended JSON for a document, got {_show(actual)}")
        self.match(argument, parsed, root=False, path=path)

    def _match_as_root(self, argument: Any, actual: Any, path: str, root: bool) -> None:
        if not isinstance(argument, Mapping):
            raise UnifiedTestError(f"{path}: $$matchAsRoot takes a document, not {argument!r}")
        if actual is MISSING:
            raise MatchError(path, f"expected {_show(argument)}, but the key is missing")
        self.match(argument, actual, root=True, path=path)

    def _placeholder(self, argument: Any, actual: Any, path: str, root: bool) -> None:
        raise UnifiedTestError(f"{path}: $$placeholder cannot be used in an expected value")


def _is_dbref(value: Any) -> bool:
    return any(
        cls.__name__ == "DBRef" and cls.__module__.startswith("mongio.bson") for cls in type(value).__mro__
    )


def match(
    expected: Any,
    actual: Any,
    *,
    root: bool = True,
    path: str = "",
    root_elements: bool = False,
    entities: EntityLookup | None = None,
) -> None:
    """Raise ``MatchError`` unless ``actual`` matches ``expected`` (see ``Matcher.match``)."""
    Matcher(entities).match(expected, actual, root=root, path=path, root_elements=root_elements)


def resolve_placeholders(value: Any, provide: Callable[[str], Any], path: str = "") -> Any:
    """A copy of ``value`` with each ``{"$$placeholder": ...}`` replaced by ``provide(path)``.

    ``provide`` receives the path of the placeholder (``kmsProviders.aws.accessKeyId``) and raises
    ``UnifiedTestError`` when it has nothing to put there.
    """
    if isinstance(value, Mapping):
        if len(value) == 1 and "$$placeholder" in value:
            return provide(path)
        return {k: resolve_placeholders(v, provide, child_path(path, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_placeholders(v, provide, child_path(path, i)) for i, v in enumerate(value)]
    return value


def contains_placeholder(value: Any) -> bool:
    """Whether ``value`` holds a ``$$placeholder`` anywhere."""
    if isinstance(value, Mapping):
        return (len(value) == 1 and "$$placeholder" in value) or any(
            contains_placeholder(v) for v in value.values()
        )
    if isinstance(value, list | tuple):
        return any(contains_placeholder(v) for v in value)
    return False
