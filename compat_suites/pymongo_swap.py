"""pytest plugin for PyMongo's async suite run through mongio: ``pymongo.AsyncMongoClient`` becomes a mongio client,
``gridfs.AsyncGridFSBucket`` mongio's GridFS bucket.

Loaded with ``-p compat_suites.pymongo_swap``. Each name is replaced where PyMongo exports it, and, once the
tests are collected, in each of the suite's modules that imported it, so the suite's harness (its
``client_context`` and client helpers) and the tests build mongio clients and buckets; PyMongo's other classes
and the tests stay as they are. The bucket is swapped too because PyMongo's refuses a mongio database: its
tests would otherwise test nothing of mongio's.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

import mongio
import mongio.gridfs


class AsyncMongoClient(mongio.MongoClient):
    """A mongio client in the PyMongo-typed mode, built from PyMongo's constructor arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, pymongo_types=True, **kwargs)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    import gridfs
    import pymongo

    pymongo.AsyncMongoClient = AsyncMongoClient  # type: ignore[misc, assignment]
    gridfs.AsyncGridFSBucket = mongio.gridfs.AsyncGridFSBucket  # type: ignore[misc, assignment]


def pytest_collection_finish(session: pytest.Session) -> None:
    """The suite's modules imported PyMongo's client by name; each such name now means the mongio client.

    PyMongo's own module keeps its class: its code refers to it (class attributes of its client), and the
    clients the swap leaves native are PyMongo's own business.
    """
    from gridfs.asynchronous.grid_file import AsyncGridFSBucket as native_bucket
    from pymongo.asynchronous.mongo_client import AsyncMongoClient as native_client

    swaps = (
        ("AsyncMongoClient", native_client, AsyncMongoClient),
        ("AsyncGridFSBucket", native_bucket, mongio.gridfs.AsyncGridFSBucket),
    )
    for name, module in list(sys.modules.items()):
        if not name.startswith("test."):
            continue
        for attribute, native, swapped in swaps:
            if getattr(module, attribute, None) is native:
                setattr(module, attribute, swapped)
