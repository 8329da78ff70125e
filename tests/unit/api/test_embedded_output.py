"""The embedded server's output, read line by line from the chunks its pipe gives, a long line in bounded pieces."""

from __future__ import annotations

from mongio.embedded import _LONGEST_LINE, _lines


class ScriptedOutput:
    """A child process (``mongio.backend.ChildProcess``) whose output comes in the given chunks."""

    def __init__(self, *chunks: bytes) -> None:
        self._chunks = list(chunks)
        self.returncode: int | None = None

    async def read_output(self, max_bytes: int) -> bytes:
        chunk = self._chunks.pop(0) if self._chunks else b""
        assert len(chunk) <= max_bytes
        return chunk

    async def wait(self) -> int:
        return 0

    def terminate(self) -> None:
        pass

    def kill(self) -> None:
        pass

    def close_output(self) -> None:
        pass


async def test_lines_are_put_together_across_chunks() -> None:
    output = ScriptedOutput(b"one\ntw", b"o\n\nthr", b"ee")
    assert [line async for line in _lines(output)] == [b"one", b"two", b"", b"three"]


async def test_a_line_longer_than_the_bound_comes_in_pieces_of_the_bound() -> None:
    # A piece is cut once more than the bound is pending.
    output = ScriptedOutput(b"x" * _LONGEST_LINE, b"x" * _LONGEST_LINE, b"xxxxx", b"\nend\n")
    pieces = [line async for line in _lines(output)]
    assert pieces == [b"x" * _LONGEST_LINE, b"x" * _LONGEST_LINE, b"x" * 5, b"end"]
