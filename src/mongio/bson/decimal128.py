"""The BSON Decimal128 type: an IEEE 754-2008 128-bit decimal, stored in the binary integer decimal (BID) form.

A :class:`Decimal128` is an immutable value object holding the 16 bytes exactly as they appear in BSON.
Decoding a document only stores those bytes; the value is unpacked when it is printed or converted, so
decoding many decimals stays cheap.

There is deliberately no arithmetic on :class:`Decimal128`. Convert to :class:`decimal.Decimal` with
:meth:`Decimal128.to_decimal`, compute under :func:`create_decimal128_context` (which traps any result that
Decimal128 could not hold exactly), and wrap the result again::

    ctx = create_decimal128_context()
    total = Decimal128(ctx.add(price.to_decimal(), tax.to_decimal()))
"""

from __future__ import annotations

import decimal
import re
from typing import Any, Final, cast

from mongio.bson._type_marker import type_marker
from mongio.bson.codec_options import TypeDecoder, TypeEncoder
from mongio.bson.errors import InvalidDecimal128

__all__ = [
    "Decimal128",
    "DecimalDecoder",
    "DecimalEncoder",
    "TypeDecoder",
    "TypeEncoder",
    "create_decimal128_context",
]

# IEEE 754-2008 decimal128 parameters. Exponents here are those of the integer coefficient ("q"), not the
# adjusted exponent: Emax = 6144 and 34 digits of precision give q <= 6111; Emin = -6143 gives q >= -6176.
_PRECISION: Final = 34
_MAX_COEFFICIENT: Final = 10**_PRECISION - 1
_EXPONENT_MAX: Final = 6111
_EXPONENT_MIN: Final = -6176
_EXPONENT_BIAS: Final = 6176
# The payload of a NaN is canonical only when it has at most 33 digits.
_MAX_NAN_PAYLOAD: Final = 10 ** (_PRECISION - 1) - 1

_SIGN_BIT: Final = 1 << 127
_INFINITY_BITS: Final = 0x1E << 122
_NAN_BITS: Final = 0x1F << 122
_SNAN_BITS: Final = 0x3F << 121
_COEFFICIENT_MASK: Final = (1 << 113) - 1
_PAYLOAD_MASK: Final = (1 << 110) - 1

# A decimal exponent written with more digits than this cannot be brought into range by any string short
# enough to exist in memory, so it is reported as overflow or underflow without converting it to an int.
_MAX_EXPONENT_DIGITS: Final = 18

# re.ASCII keeps \d and the case-insensitive names from matching non-ASCII digits and letters; fullmatch
# keeps "$" from accepting a trailing newline.
_FINITE_RE: Final = re.compile(
    r"(?P<sign>[+-])?(?:(?P<int>\d+)(?:\.(?P<frac>\d*))?|\.(?P<onlyfrac>\d+))(?:[eE](?P<exp>[+-]?\d+))?",
    re.ASCII,
)
_SPECIAL_RE: Final = re.compile(
    r"(?P<sign>[+-])?(?:(?P<inf>inf|infinity)|(?P<snan>s)?nan(?P<payload>\d*))",
    re.ASCII | re.IGNORECASE,
)

_POSITIVE_INFINITY_DECIMAL: Final = decimal.Decimal("Infinity")
_NEGATIVE_INFINITY_DECIMAL: Final = decimal.Decimal("-Infinity")


def create_decimal128_context() -> decimal.Context:
    """Return a :class:`decimal.Context` whose results always fit a :class:`Decimal128` exactly.

    It has Decimal128's precision (34 digits), exponent range and clamping, rounds half-even, and traps
    :class:`decimal.InvalidOperation`, :class:`decimal.Overflow` and :class:`decimal.Inexact`, so a
    computation that would lose information raises instead of silently rounding.
    """
    return decimal.Context(
        prec=_PRECISION,
        rounding=decimal.ROUND_HALF_EVEN,
        Emin=-6143,
        Emax=6144,
        capitals=1,
        clamp=1,
        flags=[],
        traps=[decimal.InvalidOperation, decimal.Overflow, decimal.Inexact],
    )


def _error(value: object, reason: str) -> InvalidDecimal128:
    return InvalidDecimal128(f"{value!r} is not a valid Decimal128: {reason}")


def _pack_finite(source: object, negative: bool, digits: str, exponent: int) -> int:
    """Pack a sign, a decimal digit string and its exponent into the 128-bit BID integer.

    Trailing zeros are dropped and exponents clamped only as far as needed to fit, so the preferred
    exponent is kept whenever Decimal128 can hold it; anything that would need inexact rounding raises.
    """
    digits = digits.lstrip("0")
    if len(digits) > _PRECISION:
        excess = len(digits) - _PRECISION
        if digits[-excess:].strip("0"):
            raise _error(source, f"more than {_PRECISION} significant digits would need inexact rounding")
        digits = digits[:-excess]
        exponent += excess
    coefficient = int(digits) if digits else 0

    if exponent > _EXPONENT_MAX:
        if coefficient:
            # Clamping: pad the coefficient with zeros to bring the exponent down into range.
            shift = exponent - _EXPONENT_MAX
            if len(digits) + shift > _PRECISION:
                raise _error(source, "overflow (the exponent is too large)")
            coefficient *= 10**shift
        exponent = _EXPONENT_MAX
    elif exponent < _EXPONENT_MIN:
        if coefficient:
            # Only trailing zeros may go; dropping any other digit would be inexact (underflow).
            shift = _EXPONENT_MIN - exponent
            if shift >= len(digits) or digits[-shift:].strip("0"):
                raise _error(source, "underflow (the exponent is too small to hold the value exactly)")
            coefficient //= 10**shift
        exponent = _EXPONENT_MIN

    bits = ((exponent + _EXPONENT_BIAS) << 113) | coefficient
    return bits | _SIGN_BIT if negative else bits


def _pack_nan(source: object, negative: bool, signaling: bool, payload: int) -> int:
    if payload > _MAX_NAN_PAYLOAD:
        raise _error(source, "the NaN payload has more than 33 digits")
    bits = (_SNAN_BITS if signaling else _NAN_BITS) | payload
    return bits | _SIGN_BIT if negative else bits


def _parse_exponent(source: object, text: str, coefficient_is_zero: bool, fraction_digits: int) -> int:
    """The exponent of the last digit: the exponent string less the number of digits after the point. An
    absurdly long exponent maps to one just beyond the range (after that subtraction, so that a zero written
    with a fraction still clamps)."""
    unsigned = text.lstrip("+-").lstrip("0")
    if len(unsigned) <= _MAX_EXPONENT_DIGITS:
        return int(text) - fraction_digits
    negative = text.startswith("-")
    if not coefficient_is_zero:
        raise _error(
            source,
            "underflow (the exponent is too small)" if negative else "overflow (the exponent is too large)",
        )
    # A zero just clamps; any out-of-range exponent of the right sign leads to the same result.
    return _EXPONENT_MIN - 1 if negative else _EXPONENT_MAX + 1


def _pack_str(value: str) -> int:
    match = _FINITE_RE.fullmatch(value)
    if match is not None:
        negative = match["sign"] == "-"
        integer = match["int"] or ""
        fraction = match["frac"] or match["onlyfrac"] or ""
        digits = integer + fraction
        exponent_text = match["exp"]
        exponent = -len(fraction)
        if exponent_text is not None:
            exponent = _parse_exponent(value, exponent_text, not digits.strip("0"), len(fraction))
        return _pack_finite(value, negative, digits, exponent)
    match = _SPECIAL_RE.fullmatch(value)
    if match is None:
        raise _error(value, "not a numeric string")
    negative = match["sign"] == "-"
    if match["inf"] is not None:
        return _INFINITY_BITS | _SIGN_BIT if negative else _INFINITY_BITS
    payload_text = match["payload"].lstrip("0")
    if len(payload_text) > _PRECISION - 1:
        raise _error(value, "the NaN payload has more than 33 digits")
    return _pack_nan(value, negative, match["snan"] is not None, int(payload_text or "0"))


def _pack_decimal(value: decimal.Decimal) -> int:
    sign, digit_tuple, exponent = value.as_tuple()
    negative = bool(sign)
    digits = "".join(map(str, digit_tuple))
    if isinstance(exponent, int):
        return _pack_finite(value, negative, digits, exponent)
    if exponent == "F":
        return _INFINITY_BITS | _SIGN_BIT if negative else _INFINITY_BITS
    # "n" is a quiet NaN, "N" a signaling one; the digits are the payload.
    digits = digits.lstrip("0")
    if len(digits) > _PRECISION - 1:
        raise _error(value, "the NaN payload has more than 33 digits")
    return _pack_nan(value, negative, exponent == "N", int(digits or "0"))


def _unpack(bits: int) -> tuple[bool, str, int, int]:
    """Split the BID integer into (negative, kind, coefficient or NaN payload, exponent).

    ``kind`` is ``"F"`` for finite, ``"I"`` for infinity, ``"n"`` for NaN and ``"N"`` for signaling NaN.
    Non-canonical coefficients and payloads read as zero, as IEEE 754-2008 requires.
    """
    negative = bits >= _SIGN_BIT
    if (bits >> 125) & 3 != 3:
        # The common form: a 14-bit exponent followed by a 113-bit coefficient.
        coefficient = bits & _COEFFICIENT_MASK
        if coefficient > _MAX_COEFFICIENT:
            coefficient = 0
        return negative, "F", coefficient, ((bits >> 113) & 0x3FFF) - _EXPONENT_BIAS
    combination = (bits >> 122) & 0x1F
    if combination == 0x1F:
        payload = bits & _PAYLOAD_MASK
        if payload > _MAX_NAN_PAYLOAD:
            payload = 0
        return negative, "N" if (bits >> 121) & 1 else "n", payload, 0
    if combination == 0x1E:
        return negative, "I", 0, 0
    # The "11" form implies a coefficient of at least 2**113, beyond 34 digits, so it is always zero.
    return negative, "F", 0, ((bits >> 111) & 0x3FFF) - _EXPONENT_BIAS


def _finite_str(negative: bool, coefficient: int, exponent: int) -> str:
    digits = str(coefficient)
    sign = "-" if negative else ""
    if exponent == 0:
        return sign + digits
    adjusted = exponent + len(digits) - 1
    if exponent < 0 and adjusted >= -6:
        point = len(digits) + exponent
        if point > 0:
            return f"{sign}{digits[:point]}.{digits[point:]}"
        return f"{sign}0.{'0' * -point}{digits}"
    mantissa = f"{digits[0]}.{digits[1:]}" if len(digits) > 1 else digits
    return f"{sign}{mantissa}E{adjusted:+d}"


class Decimal128:
    """A BSON Decimal128 value: 34 significant decimal digits, exponents from -6176 to 6111.

    Construct it from a numeric string (``Decimal128("1.10")``, ``Decimal128("-Infinity")``,
    ``Decimal128("NaN")``), from a :class:`decimal.Decimal`, or from a ``(high, low)`` tuple of the two
    unsigned 64-bit halves. The representation is preserved: ``"1.10"`` and ``"1.1"`` are different
    values that compare unequal, just as they are distinct in the database. Input that Decimal128 cannot
    hold exactly (more than 34 significant digits, an exponent out of range) raises
    :class:`~mongio.bson.errors.InvalidDecimal128` rather than being rounded.

    Instances are immutable, hashable, and compare equal exactly when their 16-byte encodings are equal.
    """

    __slots__ = ("_bid",)

    _type_marker = 19

    _bid: bytes

    def __init__(self, value: str | decimal.Decimal | tuple[int, int]) -> None:
        if isinstance(value, str):
            bits = _pack_str(value)
        elif isinstance(value, decimal.Decimal):
            bits = _pack_decimal(value)
        elif isinstance(value, (tuple, list)):
            bits = self._pack_halves(value)
        else:
            raise TypeError(
                f"Decimal128 takes a str, a decimal.Decimal or a (high, low) tuple, not {type(value).__name__}"
            )
        self._bid = bits.to_bytes(16, "little")

    @staticmethod
    def _pack_halves(value: tuple[int, int] | list[int]) -> int:
        if len(value) != 2:
            raise _error(value, "a (high, low) tuple needs exactly two items")
        high, low = value
        if not isinstance(high, int) or not isinstance(low, int):
            raise TypeError(f"the halves of a (high, low) tuple must be ints, not {value!r}")
        if not 0 <= high < 1 << 64 or not 0 <= low < 1 << 64:
            raise _error(value, "each half must be an unsigned 64-bit integer")
        return (high << 64) | low

    @classmethod
    def from_bid(cls, value: bytes | bytearray | memoryview) -> Decimal128:
        """Wrap the 16 little-endian bytes of a BSON Decimal128 (as stored in a document) without parsing them."""
        if type(value) is not bytes:
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise TypeError(f"from_bid takes 16 bytes, not {type(value).__name__}")
            value = bytes(value)
        if len(value) != 16:
            raise InvalidDecimal128(f"a Decimal128 is 16 bytes, got {len(value)}")
        self = cls.__new__(cls)
        self._bid = value
        return self

    @property
    def bid(self) -> bytes:
        """The 16 bytes of the value in BSON's little-endian binary integer decimal encoding."""
        return self._bid

    @property
    def high(self) -> int:
        """The upper 64 bits of the encoding (sign, combination field, top of the coefficient)."""
        return int.from_bytes(self._bid[8:], "little")

    @property
    def low(self) -> int:
        """The lower 64 bits of the encoding."""
        return int.from_bytes(self._bid[:8], "little")

    def to_decimal(self) -> decimal.Decimal:
        """Return the exact value as a :class:`decimal.Decimal`, keeping its exponent, sign and NaN kind.

        Infinity maps to ``Decimal('Infinity')``, NaN to ``Decimal('NaN')`` (signaling NaNs to
        ``Decimal('sNaN')``), with any canonical payload and the sign preserved.
        """
        negative, kind, coefficient, exponent = _unpack(int.from_bytes(self._bid, "little"))
        if kind == "F":
            return decimal.Decimal(f"{'-' if negative else ''}{coefficient}E{exponent}")
        if kind == "I":
            return _NEGATIVE_INFINITY_DECIMAL if negative else _POSITIVE_INFINITY_DECIMAL
        payload = str(coefficient) if coefficient else ""
        return decimal.Decimal(f"{'-' if negative else ''}{'s' if kind == 'N' else ''}NaN{payload}")

    def __str__(self) -> str:
        negative, kind, coefficient, exponent = _unpack(int.from_bytes(self._bid, "little"))
        if kind == "F":
            return _finite_str(negative, coefficient, exponent)
        if kind == "I":
            return "-Infinity" if negative else "Infinity"
        # The specification prints every NaN, whatever its sign, kind or payload, as plain "NaN".
        return "NaN"

    def __repr__(self) -> str:
        return f"Decimal128({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Decimal128):
            return self._bid == other._bid
        if type_marker(other) == Decimal128._type_marker:
            # Another library's Decimal128 (PyMongo's): the same 16 bytes are the same value.
            return self._bid == getattr(other, "bid", None)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._bid)

    def __getstate__(self) -> bytes:
        return self._bid

    def __setstate__(self, state: bytes) -> None:
        self._bid = state


class DecimalEncoder(TypeEncoder):
    """A type encoder storing ``decimal.Decimal`` values as :class:`Decimal128`::

    CodecOptions(type_registry=TypeRegistry([DecimalEncoder()]))
    """

    @property
    def python_type(self) -> type[decimal.Decimal]:
        return decimal.Decimal

    def transform_python(self, value: Any) -> Decimal128:
        return Decimal128(value)


class DecimalDecoder(TypeDecoder):
    """A type decoder reading BSON decimal128 values as ``decimal.Decimal``::

    CodecOptions(type_registry=TypeRegistry([DecimalDecoder()]))
    """

    @property
    def bson_type(self) -> type[Decimal128]:
        return Decimal128

    def transform_bson(self, value: Any) -> decimal.Decimal:
        return cast(Decimal128, value).to_decimal()
