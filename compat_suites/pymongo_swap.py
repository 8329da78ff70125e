"""pytest plugin for PyMongo's async suite run through mongio: ``pymongo.AsyncMongoClient`` becomes a mongio client.

Loaded with ``-p compat_suites.pymongo_swap``. The name is replaced where PyMongo exports it, and, once the
tests are collected, in each of the suite's modules that imported it, so the suite's harness (its
``client_context`` and client helpers) and the tests build mongio clients; PyMongo's other classes and the tests
stay as they are.
"""

from __future__ import annotations

import sys
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

    pymongo.AsyncMongoClient = AsyncMongoClient  # type: ignore[misc, assignment]


def pytest_collection_finish(session: pytest.Session) -> None:
    """The suite's modules imported PyMongo's client by name; each such name now means the mongio client.

    PyMongo's own module keeps its class: its code refers to it (class attributes of its client), and the
    clients the swap leaves native are PyMongo's own business.
    """
    from pymongo.asynchronous.mongo_client import AsyncMongoClient as native

    for name, module in list(sys.modules.items()):
        if name.startswith("test.") and getattr(module, "AsyncMongoClient", None) is native:
            module.AsyncMongoClient = AsyncMongoClient  # type: ignore[attr-defined]
