"""Which tests run only on asyncio, and why: under ``pytest --backend trio`` they are skipped with the reason.

A test belongs here when what it checks is asyncio's own machinery (the loop's call_later, a Task's cancel(),
the loop's exception handler, closing or replacing an event loop, uvloop), so it has no trio counterpart as
written; the behaviour itself is covered on trio by the tests written for both backends. Entries are node id
prefixes (a module, or one test of it).
"""

from __future__ import annotations

ASYNCIO_ONLY: dict[str, str] = {}


def asyncio_only_reason(nodeid: str) -> str | None:
    """Why the test ``nodeid`` runs only on asyncio (``None``: it runs on every backend)."""
    for prefix, reason in ASYNCIO_ONLY.items():
        if nodeid == prefix or nodeid.startswith((prefix + "::", prefix + "[")):
            return reason
    return None
