"""The BSON corpus: every valid, decodeErrors and parseErrors case, through mongio's codec and Extended JSON.

The assertions are the ones the corpus README gives for a codec with a native representation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

from spec_runner.model import RunContext, SpecCase, Suite, relative_file, unique_names

NAME = "bson-corpus"


def _codecs() -> tuple[Any, Any, Any, Any]:
    """(codec module, canonical JSON options, relaxed JSON options, codec options), imported late so a
    missing piece fails the cases rather than the collection."""
    from mongio import bson
    from mongio.bson import json_util

    settings: dict[str, Any] = {
        "tz_aware": True,
        "tzinfo": UTC,
        "uuid_representation": bson.UuidRepresentation.UNSPECIFIED,
        "datetime_conversion": bson.DatetimeConversion.DATETIME_AUTO,
    }
    canonical = json_util.CANONICAL_JSON_OPTIONS.with_options(**settings)
    relaxed = json_util.RELAXED_JSON_OPTIONS.with_options(**settings)
    return bson, canonical, relaxed, bson.CodecOptions(**settings)


def normalize_json(text: str) -> str:
    """JSON is compared with whitespace and escaping normalized; key order and number types are kept."""
    return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=True)


def _check_valid(case: dict[str, Any]) -> None:
    bson, canonical, relaxed, options = _codecs()
    from mongio.bson import json_util

    cb = bytes.fromhex(case["canonical_bson"])
    cej = normalize_json(case["canonical_extjson"])
    rej = normalize_json(case["relaxed_extjson"]) if "relaxed_extjson" in case else None
    lossy = bool(case.get("lossy"))

    def same_json(produced: str, expected: str, what: str) -> None:
        got = normalize_json(produced)
        assert got == expected, f"{what}:\n  got      {got}\n  expected {expected}"

    def same_bson(produced: bytes, expected: bytes, what: str) -> None:
        assert produced == expected, f"{what}:\n  got      {produced.hex().upper()}\n  expected {expected.hex().upper()}"

    native = bson.decode(cb, codec_options=options)
    same_bson(bson.encode(native, codec_options=options), cb, "native_to_bson(bson_to_native(cB))")
    same_json(json_util.dumps(native, json_options=canonical), cej, "canonical_extjson(bson_to_native(cB))")
    if rej is not None:
        same_json(json_util.dumps(native, json_options=relaxed), rej, "relaxed_extjson(bson_to_native(cB))")

    from_cej = json_util.loads(case["canonical_extjson"], json_options=canonical)
    same_json(json_util.dumps(from_cej, json_options=canonical), cej, "canonical_extjson(json_to_native(cEJ))")
    if not lossy:
        same_bson(bson.encode(from_cej, codec_options=options), cb, "native_to_bson(json_to_native(cEJ))")

    if "degenerate_bson" in case:
        db = bytes.fromhex(case["degenerate_bson"])
        from_db = bson.decode(db, codec_options=options)
        same_bson(bson.encode(from_db, codec_options=options), cb, "native_to_bson(bson_to_native(dB))")

    if "degenerate_extjson" in case:
        from_dej = json_util.loads(case["degenerate_extjson"], json_options=canonical)
        same_json(json_util.dumps(from_dej, json_options=canonical), cej, "canonical_extjson(json_to_native(dEJ))")
        if not lossy:
            same_bson(bson.encode(from_dej, codec_options=options), cb, "native_to_bson(json_to_native(dEJ))")

    if rej is not None:
        from_rej = json_util.loads(case["relaxed_extjson"], json_options=relaxed)
        same_json(json_util.dumps(from_rej, json_options=relaxed), rej, "relaxed_extjson(json_to_native(rEJ))")


def _check_decode_error(case: dict[str, Any]) -> None:
    bson, _, _, options = _codecs()
    data = bytes.fromhex(case["bson"])
    try:
        value = bson.decode(data, codec_options=options)
    except bson.InvalidBSON:
        return
    raise AssertionError(f"decoding {case['bson']} should raise InvalidBSON, got {value!r}")


def _check_parse_error(bson_type: str, case: dict[str, Any]) -> None:
    bson, canonical, _, options = _codecs()
    from mongio.bson import json_util
    from mongio.bson.errors import BSONError

    text = case["string"]
    if bson_type == "0x13":
        try:
            value = bson.Decimal128(text)
        except bson.errors.InvalidDecimal128:
            return
        raise AssertionError(f"Decimal128({text!r}) should fail, got {value!r}")
    # The README asks that these inputs be valid JSON, but some upstream copies hold a few that are not;
    # either way the Extended JSON parser (or the encoder after it) must refuse them with its own error.
    try:
        value = bson.encode(json_util.loads(text, json_options=canonical), codec_options=options)
    except BSONError:
        return
    raise AssertionError(f"Extended JSON {text!r} should fail to parse or encode, got {value!r}")


def _bind(check: Callable[..., None], *args: Any) -> Callable[[RunContext], None]:
    return lambda _context: check(*args)


def collect(tests_dir: Path) -> Iterator[SpecCase]:
    for path in sorted(tests_dir.glob("*.json")):
        spec = json.loads(path.read_text(encoding="utf-8"))
        file = relative_file(tests_dir, path)
        bson_type = str(spec.get("bson_type", "")).lower()
        named: list[tuple[str, Callable[[RunContext], None]]] = []
        for case in spec.get("valid", []):
            named.append((f"valid: {case['description']}", _bind(_check_valid, case)))
        for case in spec.get("decodeErrors", []):
            named.append((f"decodeErrors: {case['description']}", _bind(_check_decode_error, case)))
        for case in spec.get("parseErrors", []):
            named.append((f"parseErrors: {case['description']}", _bind(_check_parse_error, bson_type, case)))
        names = unique_names([name for name, _ in named])
        for name, (_, run) in zip(names, named):
            yield SpecCase(suite=NAME, file=file, name=name, run=run)


SUITE = Suite(name=NAME, collect=collect)
