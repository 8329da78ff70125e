"""SASLprep (RFC 4013): the RFC's examples, the authentication spec's password forms, and properties."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mongio.connection.auth.saslprep import SASLprepError, saslprep


@pytest.mark.parametrize(
    ("given_text", "expected"),
    [
        # RFC 4013 section 3.
        ("I\u00adX", "IX"),  # SOFT HYPHEN mapped to nothing
        ("user", "user"),
        ("USER", "USER"),  # case preserved
        ("\u00aa", "a"),  # NFKC
        ("\u2168", "IX"),  # NFKC
        # The authentication spec's test plan, step 4.
        ("I\u00adV", "IV"),
        ("\u2163", "IV"),
        # Non-ASCII spaces become SPACE; zero-width characters vanish.
        ("a\u00a0b", "a b"),
        ("a\u3000b", "a b"),
        ("a\u200bb\ufeff", "ab"),
        ("", ""),
        ("\u00ad", ""),
        # Right-to-left text that starts and ends with right-to-left characters is fine.
        ("\u0627\u0628", "\u0627\u0628"),
    ],
)
def test_prepared_forms(given_text: str, expected: str) -> None:
    assert saslprep(given_text) == expected


@pytest.mark.parametrize(
    ("given_text", "reason"),
    [
        ("\u0007", "prohibited"),  # RFC 4013 example: control character
        ("a\u0000b", "prohibited"),
        ("\ue000", "prohibited"),  # private use
        ("\ufffe", "prohibited"),  # non-character
        ("\u200e", "prohibited"),  # LEFT-TO-RIGHT MARK: display property
        ("\U000e0001", "prohibited"),  # tagging
        ("\u0627\u0031", "start and end"),  # RFC 4013 example: bidi rule
        ("\u0627a\u0628", "mixes"),
    ],
)
def test_rejected(given_text: str, reason: str) -> None:
    with pytest.raises(SASLprepError, match=reason):
        saslprep(given_text)


def test_unassigned_code_points_depend_on_semantics() -> None:
    unassigned = "\u0221"  # unassigned in Unicode 3.2, assigned later
    with pytest.raises(SASLprepError, match="unassigned"):
        saslprep(unassigned)
    assert saslprep(unassigned, allow_unassigned=True) == unassigned


def test_error_does_not_quote_the_input() -> None:
    with pytest.raises(SASLprepError) as info:
        saslprep("hunter2\u0007")
    assert "hunter2" not in str(info.value)


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E)))
def test_printable_ascii_is_unchanged(text: str) -> None:
    assert saslprep(text) == text


@pytest.mark.slow
@given(st.text())
def test_output_is_stable_and_normalized(text: str) -> None:
    try:
        prepared = saslprep(text, allow_unassigned=True)
    except SASLprepError:
        return
    assert saslprep(prepared, allow_unassigned=True) == prepared
    assert unicodedata.ucd_3_2_0.normalize("NFKC", prepared) == prepared
