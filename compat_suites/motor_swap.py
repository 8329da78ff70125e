"""pytest plugin for Motor's suite run through mongio: Motor's asyncio client class becomes a mongio client.

Loaded with ``-p compat_suites.motor_swap``. Only ``motor.motor_asyncio.AsyncIOMotorClient`` changes; Motor's
other classes, its test harness and PyMongo stay as they are.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import mongio


class AsyncIOMotorClient(mongio.MongoClient):
    """A mongio client in the PyMongo-typed mode, built from Motor's constructor arguments."""

    def __init__(self, *args: Any, io_loop: asyncio.AbstractEventLoop | None = None, **kwargs: Any) -> None:
        # Motor binds a client to ``io_loop``; a mongio client binds to the loop that runs its first
        # operation, which in Motor's tests is that same loop. Anything but a loop is refused, as Motor does.
        if io_loop is not None and not isinstance(io_loop, asyncio.AbstractEventLoop):
            raise TypeError(f"io_loop must be an asyncio event loop, not {io_loop!r}")
        super().__init__(*args, pymongo_types=True, **kwargs)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    from motor import motor_asyncio

    motor_asyncio.AsyncIOMotorClient = AsyncIOMotorClient  # type: ignore[misc, assignment]
