"""The runtime's fork hook: a forked child renews every registered object; the parent does not."""

from __future__ import annotations

import os

import pytest

from mongio.loop_runtime.fork import renew_in_forked_children


class _Renewed:
    def __init__(self, name: str) -> None:
        self.name = name
        self.renewed = 0

    def renew_after_fork(self) -> None:
        self.renewed += 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_renews_what_was_registered() -> None:
    kept = _Renewed("kept")
    renew_in_forked_children(kept)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child process
        try:
            os.write(write_end, str(kept.renewed).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    in_child = os.read(read_end, 16)
    os.close(read_end)
    os.waitpid(pid, 0)
    assert in_child == b"1"  # renewed once, in the child
    assert kept.renewed == 0  # never in the parent
