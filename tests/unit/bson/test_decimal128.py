"""Decimal128: the BSON corpus decimal128 files both ways, the parsing grammar, and property round trips."""

from __future__ import annotations

import copy
import decimal
import json
import pickle
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from spec_runner.model import specs_root

from mongio.bson.decimal128 import Decimal128, create_decimal128_context
from mongio.bson.errors import InvalidDecimal128

CORPUS_DIR = specs_root() / "bson-corpus" / "tests"
CORPUS_FILES = sorted(CORPUS_DIR.glob("decimal128-*.json"))

# The element header of a single-field corpus document {"d": <decimal128>}: int32 length, type 0x13, "d\0".
_HEADER_LEN = 4 + 1 + 2


def _load(kind: str) -> Iterator[Any]:
    for path in CORPUS_FILES:
        data = json.loads(path.read_text())
        for case in data.get(kind, []):
            yield pytest.param(case, id=f"{path.stem}:{case['description']}")


def _valid_cases() -> list[Any]:
    return list(_load("valid"))


def _parse_error_cases() -> list[Any]:
    return list(_load("parseErrors"))


def _bid_of(case: dict[str, Any]) -> bytes:
    document = bytes.fromhex(case["canonical_bson"])
    return document[_HEADER_LEN : _HEADER_LEN + 16]


def _string_of(extjson: str) -> str:
    value: str = json.loads(extjson)["d"]["$numberDecimal"]
    return value


# -- corpus -------------------------------------------------------------------------------------------------


def test_corpus_is_present() -> None:
    # Without this, a wrong path would quietly parametrize the corpus tests below with nothing.
    assert len(_valid_cases()) > 100
    assert len(_parse_error_cases()) > 100


@pytest.mark.parametrize("case", _valid_cases())
def test_corpus_bid_to_string(case: dict[str, Any]) -> None:
    assert str(Decimal128.from_bid(_bid_of(case))) == _string_of(case["canonical_extjson"])


# The canonical string of a lossy case (e.g. "NaN" for a negative sNaN) does not carry every bit.
@pytest.mark.parametrize("case", [c for c in _valid_cases() if not c.values[0].get("lossy")])
def test_corpus_string_to_bid(case: dict[str, Any]) -> None:
    assert Decimal128(_string_of(case["canonical_extjson"])).bid == _bid_of(case)


@pytest.mark.parametrize("case", [c for c in _valid_cases() if "degenerate_extjson" in c.values[0]])
def test_corpus_degenerate_string_to_bid(case: dict[str, Any]) -> None:
    assert Decimal128(_string_of(case["degenerate_extjson"])).bid == _bid_of(case)


@pytest.mark.parametrize("case", _valid_cases())
def test_corpus_decimal_round_trip(case: dict[str, Any]) -> None:
    # to_decimal() followed by Decimal128(Decimal) must give back the canonical form of the same value.
    original = Decimal128.from_bid(_bid_of(case))
    again = Decimal128(original.to_decimal())
    assert str(again) == str(original)
    if not case.get("lossy"):
        assert again == original


@pytest.mark.parametrize("case", _parse_error_cases())
def test_corpus_parse_errors(case: dict[str, Any]) -> None:
    with pytest.raises(InvalidDecimal128) as info:
        Decimal128(case["string"])
    assert repr(case["string"]) in str(info.value)


# -- the parts of the format the local corpus copy does not reach -------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Special values, in any case and with either sign.
        ("inf", "Infinity"),
        ("-INF", "-Infinity"),
        ("+Infinity", "Infinity"),
        ("-iNfInItY", "-Infinity"),
        ("nan", "NaN"),
        ("-NaN", "NaN"),
        ("sNaN", "NaN"),
        ("-snan", "NaN"),
        ("NaN123", "NaN"),
        # Leading zeros and bare points.
        ("000123", "123"),
        ("-0000.00", "-0.00"),
        ("017.", "17"),
        (".5", "0.5"),
        ("+0.003", "0.003"),
        ("00000000000000000000000000000000000000000001", "1"),
        # Exponent formatting.
        ("4E+9", "4E+9"),
        ("0.73e-7", "7.3E-8"),
        ("1E-7", "1E-7"),
        ("0.000001", "0.000001"),
        ("0.0000001", "1E-7"),
        ("1230E-2", "12.30"),
        ("1E+0", "1"),
        ("1E00000000000000000000000000003", "1E+3"),
        ("12345E3", "1.2345E+7"),
        ("-0E+3", "-0E+3"),
        ("0E-8", "0E-8"),
        # Zeros clamp silently in both directions, however large the exponent.
        ("0E+6112", "0E+6111"),
        ("-0e99999999999999999999999999", "-0E+6111"),
        ("0E-6177", "0E-6176"),
        ("0.000E-99999999999999999999999999", "0E-6176"),
        # Clamping pads the coefficient to bring a large exponent into range.
        ("1E+6144", "1.000000000000000000000000000000000E+6144"),
        ("12E+6112", "1.20E+6113"),
        # Subnormals, and exact division by ten when the exponent is below the minimum.
        ("1E-6176", "1E-6176"),
        ("10E-6177", "1E-6176"),
        ("1.00E-6174", "1.00E-6174"),
        ("1000000000E-6185", "1E-6176"),
        # More than 34 digits is fine while only trailing zeros have to go, and only as many as needed.
        ("1234567890123456789012345678901234000", "1.234567890123456789012345678901234E+36"),
        ("10000000000000000000000000000000000", "1.000000000000000000000000000000000E+34"),
        ("0.00000000000000000000000000000000000000001000", "1.000E-41"),
        ("1" + "0" * 6000, "1.000000000000000000000000000000000E+6000"),
        ("0." + "0" * 6000 + "1", "1E-6001"),
    ],
)
def test_parse_and_print(text: str, expected: str) -> None:
    value = Decimal128(text)
    assert str(value) == expected
    # The printed form must parse back to the very same bytes, except where it cannot say which NaN it was.
    if expected != "NaN":
        assert Decimal128(expected) == value


@pytest.mark.parametrize(
    "text",
    [
        "1E+6145",  # one digit, but the exponent cannot be clamped into range
        "12E+6144",  # clamping would need 35 digits
        "1E-6177",  # below the smallest subnormal
        "11E-6177",
        "1234567890123456789012345678901234E-6177",
        "7E99999999999999999999999",
        "-7E-99999999999999999999999",
        "12345678901234567890123456789012345",  # 35 significant digits, the last not zero
        "1.000000000000000000000000000000000001",
        "NaN" + "1" * 34,  # a payload of 34 digits does not fit
        "1e+",
        "1e-",
        "٣",  # a non-ASCII digit
        "1\n",
        "in f",
        "Infinityy",
        "sNa",
        "snan1x",
        "nan.",
        "+",
        "-",
    ],
)
def test_rejects(text: str) -> None:
    with pytest.raises(InvalidDecimal128) as info:
        Decimal128(text)
    assert repr(text) in str(info.value)


def test_special_value_bits() -> None:
    assert Decimal128("NaN").bid == bytes(15) + b"\x7c"
    assert Decimal128("-NaN").bid == bytes(15) + b"\xfc"
    assert Decimal128("sNaN").bid == bytes(15) + b"\x7e"
    assert Decimal128("-sNaN").bid == bytes(15) + b"\xfe"
    assert Decimal128("Infinity").bid == bytes(15) + b"\x78"
    assert Decimal128("-Inf").bid == bytes(15) + b"\xf8"
    assert Decimal128("NaN18").bid == b"\x12" + bytes(14) + b"\x7c"
    assert Decimal128("-0").bid == bytes(14) + b"\x40\xb0"


def test_to_decimal_keeps_sign_exponent_and_nan_kind() -> None:
    assert Decimal128("1.10").to_decimal().as_tuple() == decimal.Decimal("1.10").as_tuple()
    assert Decimal128("-0E+12").to_decimal().as_tuple() == decimal.Decimal("-0E+12").as_tuple()
    assert Decimal128("-Infinity").to_decimal() == decimal.Decimal("-Infinity")
    for text in ("NaN", "-NaN", "sNaN", "-sNaN", "NaN42", "-sNaN7"):
        assert str(Decimal128(text).to_decimal()) == str(decimal.Decimal(text))
    # A payload of 34 digits is not canonical, so it reads as no payload at all.
    oversized = (0x7C << 120) | (10**33)
    assert str(Decimal128.from_bid(oversized.to_bytes(16, "little")).to_decimal()) == "NaN"


def test_from_decimal() -> None:
    assert Decimal128(decimal.Decimal("-12.3400")) == Decimal128("-12.3400")
    assert Decimal128(decimal.Decimal("sNaN5")) == Decimal128("sNaN5")
    assert Decimal128(decimal.Decimal("-Infinity")) == Decimal128("-Infinity")
    assert Decimal128(decimal.Decimal("1E+6144")) == Decimal128("1000000000000000000000000000000000E+6111")
    with pytest.raises(InvalidDecimal128):
        Decimal128(decimal.Decimal("1.0000000000000000000000000000000001"))
    with pytest.raises(InvalidDecimal128):
        Decimal128(decimal.Decimal("1E-6177"))


def test_from_halves() -> None:
    value = Decimal128("-1.5")
    assert Decimal128((value.high, value.low)) == value
    assert Decimal128((0x3040000000000000, 0)) == Decimal128("0")
    with pytest.raises(InvalidDecimal128):
        Decimal128((1 << 64, 0))
    with pytest.raises(InvalidDecimal128):
        Decimal128((0, -1))
    with pytest.raises(InvalidDecimal128):
        Decimal128((1, 2, 3))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Decimal128((1.0, 2))  # type: ignore[arg-type]


def test_rejects_other_types() -> None:
    for value in (1.5, 3, b"1", None):
        with pytest.raises(TypeError):
            Decimal128(value)  # type: ignore[arg-type]


def test_from_bid_length_and_types() -> None:
    for length in (0, 15, 17):
        with pytest.raises(InvalidDecimal128):
            Decimal128.from_bid(bytes(length))
    raw = Decimal128("3.25").bid
    assert Decimal128.from_bid(bytearray(raw)) == Decimal128("3.25")
    assert Decimal128.from_bid(memoryview(b"xx" + raw)[2:]) == Decimal128("3.25")
    assert type(Decimal128.from_bid(bytearray(raw)).bid) is bytes
    with pytest.raises(TypeError):
        Decimal128.from_bid("0" * 16)  # type: ignore[arg-type]


def test_equality_hash_repr_pickle() -> None:
    a, b = Decimal128("1.0"), Decimal128("1.00")
    assert a != b  # same number, different representation
    assert a == Decimal128("10E-1")
    assert hash(a) == hash(Decimal128("10E-1"))
    assert len({a, b, Decimal128("1.0")}) == 2
    assert a != "1.0"
    assert repr(b) == "Decimal128('1.00')"
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        restored = pickle.loads(pickle.dumps(b, protocol))
        assert type(restored) is Decimal128
        assert restored == b
    assert copy.copy(b) == b and copy.deepcopy(b) == b


def test_immutable() -> None:
    value = Decimal128("1")
    with pytest.raises(AttributeError):
        value.bid = bytes(16)  # type: ignore[misc]
    with pytest.raises(AttributeError):
        value.extra = 1  # type: ignore[attr-defined]


def test_context_traps_what_decimal128_cannot_hold() -> None:
    ctx = create_decimal128_context()
    assert ctx.prec == 34
    assert ctx.add(decimal.Decimal("1.1"), decimal.Decimal("2.20")) == decimal.Decimal("3.30")
    with pytest.raises(decimal.Inexact):
        ctx.divide(decimal.Decimal(1), decimal.Decimal(3))
    with pytest.raises(decimal.Overflow):
        ctx.multiply(decimal.Decimal("1E+6144"), decimal.Decimal(10))
    # A result the context accepts always converts to Decimal128 exactly, clamped as the context clamps.
    result = ctx.create_decimal("1E+6144")
    assert Decimal128(result).to_decimal() == result
    assert str(Decimal128(result)) == str(result)


# -- properties ---------------------------------------------------------------------------------------------

_finite_decimals = st.builds(
    lambda sign, coefficient, exponent: decimal.Decimal((sign, tuple(map(int, str(coefficient))), exponent)),
    st.integers(0, 1),
    st.integers(0, 10**34 - 1),
    st.integers(-6176, 6111),
)


@given(st.binary(min_size=16, max_size=16))
def test_any_bid_decodes_and_reencodes_stably(raw: bytes) -> None:
    value = Decimal128.from_bid(raw)
    text = str(value)
    canonical = Decimal128(value.to_decimal())
    # to_decimal() loses nothing but non-canonical bits, so one more round trip changes nothing.
    assert Decimal128(canonical.to_decimal()) == canonical
    assert str(canonical) == text
    if text != "NaN":
        assert Decimal128(text) == canonical
        # decimal's own to-scientific-string conversion is an independent check of the formatting rules.
        assert text == str(value.to_decimal())


@given(st.integers(0, 1), st.integers(0, 10**34 - 1), st.integers(0, 12287))
def test_canonical_finite_bids_round_trip_exactly(sign: int, coefficient: int, biased_exponent: int) -> None:
    raw = ((sign << 127) | (biased_exponent << 113) | coefficient).to_bytes(16, "little")
    value = Decimal128.from_bid(raw)
    assert Decimal128(str(value)).bid == raw
    assert Decimal128(value.to_decimal()).bid == raw
    assert Decimal128((value.high, value.low)).bid == raw


_exponent_texts = st.builds(
    lambda sign, zeros, exponent: f"{sign}{'0' * zeros}{exponent}",
    st.sampled_from(["", "+", "-"]),
    st.integers(0, 3),
    st.integers(0, 6250) | st.integers(0, 10**30),
)
_numeric_strings = st.builds(
    lambda sign, whole, point, fraction, indicator, exponent: (
        f"{sign}{whole}{point}{fraction}{indicator + exponent if indicator else ''}"
    ),
    st.sampled_from(["", "+", "-"]),
    st.text("0123456789", max_size=40) | st.from_regex(r"0{0,5}[1-9]0{0,40}", fullmatch=True),
    st.sampled_from(["", "."]),
    st.text("0123456789", max_size=40) | st.from_regex(r"0{0,40}[1-9]?", fullmatch=True),
    st.sampled_from(["", "e", "E"]),
    _exponent_texts,
).filter(lambda text: any(c.isdigit() for c in text.partition("e")[0].partition("E")[0]))


@given(_numeric_strings)
def test_parsing_agrees_with_the_decimal128_context(text: str) -> None:
    # decimal.Context.create_decimal under the Decimal128 context is an independent implementation of the
    # same rules: exact rounding only, clamping, subnormals, overflow and underflow.
    try:
        expected: decimal.Decimal | None = create_decimal128_context().create_decimal(text)
    except (decimal.Inexact, decimal.Overflow, decimal.InvalidOperation):
        expected = None
    if expected is None:
        with pytest.raises(InvalidDecimal128):
            Decimal128(text)
    else:
        value = Decimal128(text)
        assert value.to_decimal().as_tuple() == expected.as_tuple()
        assert str(value) == str(expected)


@given(_finite_decimals)
def test_decimals_in_range_round_trip_exactly(value: decimal.Decimal) -> None:
    result = Decimal128(value).to_decimal()
    assert result.as_tuple() == value.as_tuple()
    assert str(Decimal128(value)) == str(value)


@given(_finite_decimals, st.integers(1, 40))
def test_extra_digits_are_dropped_only_as_far_as_needed(value: decimal.Decimal, extra_zeros: int) -> None:
    # The same number written with more trailing zeros converts exactly, keeping as many of those zeros
    # as 34 digits and the smallest exponent allow.
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    padded = decimal.Decimal((sign, (*digits, *(0,) * extra_zeros), exponent - extra_zeros))
    if value.is_zero():
        expected = decimal.Decimal((sign, (0,), max(exponent - extra_zeros, -6176)))
    else:
        kept = min(extra_zeros, 34 - len(digits), exponent + 6176)
        expected = decimal.Decimal((sign, (*digits, *(0,) * kept), exponent - kept))
    assert Decimal128(padded).to_decimal().as_tuple() == expected.as_tuple()
    assert Decimal128(str(padded)) == Decimal128(padded)


@pytest.mark.parametrize("text", [".00e1000000000000000000", "0.000e+99999999999999999999", "-.0e1000000000000000000"])
def test_a_zero_with_a_fraction_and_an_absurd_exponent_clamps_to_the_largest_exponent(text: str) -> None:
    # Such exponents skip the int conversion; the fraction's length must not bring them back into range.
    expected = create_decimal128_context().create_decimal(text)
    assert Decimal128(text).to_decimal().as_tuple() == expected.as_tuple()
    assert expected.as_tuple().exponent == 6111
