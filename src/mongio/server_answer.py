"""A client property about the deployment that reads both ways: as a value now, or awaited.

PyMongo's ``AsyncMongoClient`` makes ``address``, ``primary``, ``secondaries``, ``arbiters``,
``is_primary`` and ``is_mongos`` awaitable (``await client.address`` connects first and then answers);
Motor made them plain properties answering from what the client already knows. A
:class:`ServerAnswer` is both: it compares, hashes, iterates and tests true or false as the value known
now, and awaiting it gives the answer PyMongo's async client would give, as a plain value.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Iterator
from typing import Any, Generic, TypeVar

__all__ = ["ServerAnswer"]

_T = TypeVar("_T")


class ServerAnswer(Generic[_T]):
    """``value`` is what the client knows now; awaiting runs ``fetch`` (which may connect and select a
    server) and gives its result. Only identity tests (``is None``) see the wrapper: compare with ``==``
    or use :attr:`value`."""

    __slots__ = ("_fetch", "_value")

    def __init__(self, value: _T, fetch: Callable[[], Awaitable[_T]]) -> None:
        self._value = value
        self._fetch = fetch

    @property
    def value(self) -> _T:
        """The answer from what the client knows now, without I/O."""
        return self._value

    def __await__(self) -> Generator[Any, None, _T]:
        return self._answer().__await__()

    async def _answer(self) -> _T:
        return await self._fetch()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ServerAnswer):
            other = other.value
        return bool(self._value == other)

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __iter__(self) -> Iterator[Any]:
        items: Iterator[Any] = iter(self._value)  # type: ignore[call-overload]
        return items

    def __len__(self) -> int:
        return len(self._value)  # type: ignore[arg-type]

    def __getitem__(self, index: Any) -> Any:
        return self._value[index]  # type: ignore[index]

    def __contains__(self, item: object) -> bool:
        return item in self._value  # type: ignore[operator]

    def __repr__(self) -> str:
        return repr(self._value)
