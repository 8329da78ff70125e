"""pytest plugin for PyMongo's async suite run through mongio: ``pymongo.AsyncMongoClient`` becomes a mongio client.

Loaded with ``-p compat_suites.pymongo_swap``. The name is replaced where PyMongo exports it, before the tests
import it, so the suite's harness (its ``client_context`` and client helpers) and the tests build mongio
clients; PyMongo's other classes and the tests stay as they are.
"""

from __future__ import annotations

from typing import Any

import pytest

import mongio


class AsyncMongoClient(mongio.MongoClient):
    """A mongio client in the PyMongo-typed mode, built from PyMongo's constructor arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, pymongo_types=True, **kwargs)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    import pymongo
    from pymongo.asynchronous import mongo_client

    pymongo.AsyncMongoClient = AsyncMongoClient  # type: ignore[misc, assignment]
    mongo_client.AsyncMongoClient = AsyncMongoClient  # type: ignore[misc, assignment]
