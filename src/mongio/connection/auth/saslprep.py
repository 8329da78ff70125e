"""SASLprep (RFC 4013): the stringprep profile SCRAM-SHA-256 applies to passwords before key derivation.

The tables are those of RFC 3454 as Python's ``stringprep`` module provides them (Unicode 3.2, as the RFC
requires).
"""

from __future__ import annotations

import stringprep
import unicodedata
from collections.abc import Callable

__all__ = ["SASLprepError", "saslprep"]

# RFC 4013 section 2.3: every table below is prohibited output.
_PROHIBITED: tuple[Callable[[str], bool], ...] = (
    stringprep.in_table_c12,  # non-ASCII space characters
    stringprep.in_table_c21_c22,  # ASCII and non-ASCII control characters
    stringprep.in_table_c3,  # private use
    stringprep.in_table_c4,  # non-character code points
    stringprep.in_table_c5,  # surrogate codes
    stringprep.in_table_c6,  # inappropriate for plain text
    stringprep.in_table_c7,  # inappropriate for canonical representation
    stringprep.in_table_c8,  # change display properties or deprecated
    stringprep.in_table_c9,  # tagging characters
)


class SASLprepError(ValueError):
    """A string SASLprep rejects. The message never quotes the string, since it is usually a password."""


def saslprep(text: str, *, allow_unassigned: bool = False) -> str:
    """Prepare ``text`` with the SASLprep profile and return the result.

    ``allow_unassigned`` selects "query" semantics (code points unassigned in Unicode 3.2 pass through);
    the default is "stored string" semantics, where they are an error, as the server applies them too.
    Raises ``SASLprepError`` for a prohibited character or a violation of the bidirectional rules.
    """
    if text.isascii() and all(" " <= ch <= "~" for ch in text):
        # Printable ASCII maps to itself and contains nothing prohibited: the common case needs no tables.
        return text

    # Section 2.1, mapping: non-ASCII spaces become SPACE, "commonly mapped to nothing" characters go.
    mapped = "".join(
        " " if stringprep.in_table_c12(ch) else ch for ch in text if not stringprep.in_table_b1(ch)
    )
    # Section 2.2, normalization: Unicode form KC.
    prepared = unicodedata.ucd_3_2_0.normalize("NFKC", mapped)
    if not prepared:
        return prepared

    for position, ch in enumerate(prepared):
        if any(in_table(ch) for in_table in _PROHIBITED):
            raise SASLprepError(f"SASLprep: prohibited character at position {position}")
        if not allow_unassigned and stringprep.in_table_a1(ch):
            raise SASLprepError(f"SASLprep: unassigned code point at position {position}")

    # Section 2.4 / RFC 3454 section 6, bidirectional characters.
    if any(stringprep.in_table_d1(ch) for ch in prepared):
        if any(stringprep.in_table_d2(ch) for ch in prepared):
            raise SASLprepError("SASLprep: mixes right-to-left and left-to-right characters")
        if not (stringprep.in_table_d1(prepared[0]) and stringprep.in_table_d1(prepared[-1])):
            raise SASLprepError(
                "SASLprep: a string with right-to-left characters must start and end with one"
            )
    return prepared
