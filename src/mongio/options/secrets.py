"""Keeping passwords out of what the options code says: error messages, warnings, ``repr``.

A connection string that fails to parse cannot be trusted to say where its password is, so the password is
found conservatively, by :func:`password_span`: in ``scheme://user:password@hosts``, everything between the
first ``:`` after the scheme and the *last* ``@`` of the string. A password holding an unencoded ``/``,
``?`` or ``@`` is still covered, and a string without a scheme (``alice:pw@h``) or with a mangled one
(``mongodb:/alice:pw@h``) is read from its start. Without any ``@``, the text after the first ``:`` of the
host list counts as a password unless it is a port number (``mongodb://alice:pw`` forgot its host, and
``mongodb://localhost:x1`` cannot be told from it).

:class:`Secrets` collects what must not be shown (that span raw and percent-decoded, the values of the
secret options, and the pieces a malformed string's parse may cut them into) and hides them in any text.
:func:`hiding_secrets` runs a parse and, when it fails, raises the same error with its message hidden and
without the original error in its ``__cause__``/``__context__``. Every path that parses or validates a
connection string or credentials goes through it; :func:`redact_uri` gives the string itself for display.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar
from urllib.parse import unquote

from mongio.errors import ConfigurationError

__all__ = ["REDACTED", "Secrets", "hiding_secrets", "password_span", "redact_uri"]

REDACTED = "***"
"""What replaces a secret wherever the options code would show it."""

# A scheme as a connection string writes it ("mongodb://", "mongodb+srv://", or a misspelled one).
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# Where the host list ends when no "@" says where the user information is.
_AUTHORITY_END = re.compile(r"[/?]")
# Characters at which the parser splits a string: a password holding one may be quoted in pieces.
_SPLITS = re.compile(r"[/?&=,:@\[\]#; ]")
# Option values that are secrets: the key, then its value up to the next option.
_SECRET_OPTION = re.compile(r"(?i)(?:^|[?&])(?:proxyPassword|tlsCertificateKeyFilePassword)=([^&]*)")
_SECRET_PROPERTY = re.compile(r"(?i)AWS_SESSION_TOKEN(?::|%3A)([^,&]*)")

# Keyword arguments of MongoClient whose values are secrets, by case-folded name.
_SECRET_KEYWORDS = frozenset(("password", "proxypassword", "tlscertificatekeyfilepassword"))
_SECRET_PROPERTIES = ("AWS_SESSION_TOKEN",)


def password_span(uri: str) -> tuple[int, int] | None:
    """Where the password of connection string ``uri`` may be (``uri[start:end]``), or ``None``.

    Conservative: with an ``@``, from the first ``:`` after the scheme to the last ``@`` (no password when
    no ``:`` comes before it); without one, the text after the first ``:`` up to the end of the host list,
    unless it is all digits (a port).
    """
    scheme = _SCHEME.match(uri)
    start = scheme.end() if scheme else 0
    at = uri.rfind("@", start)
    colon = uri.find(":", start)
    if at >= 0:
        return (colon + 1, at) if 0 <= colon < at else None
    end_match = _AUTHORITY_END.search(uri, start)
    end = end_match.start() if end_match else len(uri)
    if not 0 <= colon < end:
        return None
    port = uri[colon + 1 : end].split(",", 1)[0]
    if not port or (port.isascii() and port.isdigit()):
        return None
    return colon + 1, end


def _secret_option_spans(uri: str) -> list[tuple[int, int]]:
    spans = [match.span(1) for match in _SECRET_OPTION.finditer(uri)]
    spans += [match.span(1) for match in _SECRET_PROPERTY.finditer(uri)]
    return [span for span in spans if span[0] < span[1]]


def redact_uri(uri: str) -> str:
    """``uri`` with its password and secret option values replaced by ``***`` (for display)."""
    spans = _secret_option_spans(uri)
    password = password_span(uri)
    if password is not None:
        spans.append(password)
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    result = uri
    for start, end in reversed(merged):
        result = result[:start] + REDACTED + result[end:]
    return result


def _forms(text: str) -> set[str]:
    """``text`` as written and percent-decoded (as far as it decodes), each also as ``repr`` shows it and as
    the ``repr`` of its UTF-8 bytes shows it (a decoding error carries the bytes)."""
    decoded = {text, unquote(text, errors="replace"), unquote(text, errors="surrogateescape")}
    shown = {repr(form)[1:-1] for form in decoded}
    shown |= {repr(form.encode("utf-8", "surrogateescape"))[2:-1] for form in decoded}
    return decoded | shown


def _pieces(text: str) -> set[str]:
    """What a parse may quote of ``text``: the whole, and the parts between the parser's separators, in each
    form (the parser splits before decoding, and splits again after)."""
    found: set[str] = set()
    for form in _forms(text):
        found.add(form)
        for part in _SPLITS.split(form):
            found |= _forms(part)
    return {piece for piece in found if piece}


@dataclass(frozen=True)
class Secrets:
    """Texts that must not be shown, and :meth:`hide` to take them out of a message."""

    texts: frozenset[str] = frozenset()

    @classmethod
    def of_uri(cls, uri: object) -> Secrets:
        """The password and the secret option values of connection string ``uri`` (nothing for a non-str)."""
        if not isinstance(uri, str):
            return cls()
        spans = _secret_option_spans(uri)
        password = password_span(uri)
        if password is not None:
            spans.append(password)
        found: set[str] = set()
        for start, end in spans:
            found |= _pieces(uri[start:end])
        return cls(frozenset(found))

    @classmethod
    def of_options(cls, text: str) -> Secrets:
        """The secret option values of ``key=value&...`` option text."""
        found: set[str] = set()
        for start, end in _secret_option_spans(text):
            found |= _pieces(text[start:end])
        return cls(frozenset(found))

    @classmethod
    def of_values(cls, values: Iterable[object]) -> Secrets:
        """Secret values given as such (a password keyword, ...): each as written and percent-decoded."""
        found: set[str] = set()
        for value in values:
            if isinstance(value, str | bytes) and value:
                text = value if isinstance(value, str) else value.decode("utf-8", "replace")
                found |= _forms(text)
                if isinstance(value, bytes):
                    found.add(repr(value)[2:-1])
        return cls(frozenset(text for text in found if text))

    @classmethod
    def of_keywords(cls, kwargs: Mapping[str, Any]) -> Secrets:
        """The secret values among ``MongoClient`` keyword arguments (passwords, ``AWS_SESSION_TOKEN``)."""
        values: list[object] = []
        for key, value in kwargs.items():
            folded = key.lower()
            if folded in _SECRET_KEYWORDS:
                values.append(value)
            elif folded == "authmechanismproperties":
                if isinstance(value, Mapping):
                    values += [
                        item for name, item in value.items() if str(name).upper() in _SECRET_PROPERTIES
                    ]
                elif isinstance(value, str):
                    values += [match.group(1) for match in _SECRET_PROPERTY.finditer(value)]
        return cls.of_values(values)

    def __or__(self, other: Secrets) -> Secrets:
        return Secrets(self.texts | other.texts)

    def __bool__(self) -> bool:
        return bool(self.texts)

    def hide(self, text: str) -> str:
        """``text`` with every secret (the longest first) replaced by ``***``."""
        result = text
        for start, end in reversed(self._places(text)):
            result = result[:start] + REDACTED + result[end:]
        return result

    def shows_any(self, text: str) -> bool:
        """Whether ``text`` shows one of the secrets."""
        return bool(self._places(text))

    def _places(self, text: str) -> list[tuple[int, int]]:
        """Where ``text`` shows a secret, in order, the longest secrets placed first.

        A secret counts where it is not part of a longer word: the parser cuts a malformed string at
        separators only, so what it quotes of a password is never glued to letters or digits, and a short
        password ("p") leaves the words of the message ("password") alone. Only an end that is a letter or a
        digit needs the boundary: an escape such as "\\x00" is glued to whatever precedes it. (Plain string
        searches rather than a regular expression, which the re module would cache for every new password.)
        """
        places: list[tuple[int, int]] = []
        for secret in sorted(self.texts, key=len, reverse=True):
            start = text.find(secret)
            while start >= 0:
                end = start + len(secret)
                if _bounded(text, start, end) and all(end <= first or last <= start for first, last in places):
                    places.append((start, end))
                start = text.find(secret, start + 1)
        return sorted(places)

    def hidden_error(self, error: ConfigurationError) -> ConfigurationError:
        """A copy of ``error`` (same class) whose message hides the secrets. Its cause is kept only when
        nothing in the cause's chain shows a secret; the original error is never chained."""
        replacement = type(error)(self.hide(str(error)))
        cause = error.__cause__
        if cause is not None and not any(self.shows_any(text) for text in _chain_texts(cause)):
            replacement.__cause__ = cause
        return replacement


def _chain_texts(error: BaseException) -> list[str]:
    """What ``error`` and every error chained to it (shown or suppressed) say, ``repr`` and arguments."""
    texts: list[str] = []
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        texts += ["".join(traceback.format_exception_only(current)), repr(current.args)]
        pending += [current.__cause__, current.__context__]
    return texts


def _is_word_character(character: str) -> bool:
    return character.isascii() and character.isalnum()


def _bounded(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` continues no word: at an end that is a letter or a digit, the character
    beyond is not one."""
    if _is_word_character(text[start]) and start > 0 and _is_word_character(text[start - 1]):
        return False
    return not (_is_word_character(text[end - 1]) and end < len(text) and _is_word_character(text[end]))


_P = ParamSpec("_P")
_R = TypeVar("_R")


def hiding_secrets(secrets: Secrets, function: Callable[_P, _R], *args: _P.args, **kwargs: _P.kwargs) -> _R:
    """``function(*args, **kwargs)``; a :class:`~mongio.errors.ConfigurationError` it raises comes out with
    ``secrets`` hidden, raised afresh (outside the handler, so the original is not its ``__context__``)."""
    try:
        return function(*args, **kwargs)
    except ConfigurationError as exc:
        chained = exc.__cause__ is not None or exc.__context__ is not None
        if not secrets or (not chained and not secrets.shows_any(str(exc))):
            raise
        replacement = secrets.hidden_error(exc)
    raise replacement
