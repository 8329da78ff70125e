"""A client whose hosts belong to a MongoDB-compatible service (CosmosDB, DocumentDB) says so once, when created."""

from __future__ import annotations

import logging
import warnings

import pytest

from mongio import MongoClient

LOOKALIKES = [
    ("h.cosmos.azure.com", "CosmosDB"),
    ("H.Cosmos.Azure.com:10255", "CosmosDB"),
    ("h.docdb.amazonaws.com", "DocumentDB"),
    ("h.docdb-elastic.amazonaws.com", "DocumentDB"),
    ("mongodb+srv://u:p@h.docdb-elastic.amazonaws.com", "DocumentDB"),
    ("mongodb://a.example.com,h.docdb.amazonaws.com,h.cosmos.azure.com", "DocumentDB"),
]


@pytest.mark.parametrize(("host", "service"), LOOKALIKES)
def test_a_lookalike_host_is_logged_once_on_the_client_logger(
    host: str, service: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="mongio.client"), warnings.catch_warnings():
        warnings.simplefilter("error")  # logged, so not warned as well
        MongoClient(host, connect=False)
    notices = [record for record in caplog.records if record.name == "mongio.client"]
    assert len(notices) == 1
    assert notices[0].levelno == logging.INFO and f"a {service} cluster" in notices[0].getMessage()


@pytest.mark.parametrize(("host", "service"), LOOKALIKES)
def test_a_lookalike_host_is_warned_when_nothing_logs_it(host: str, service: str) -> None:
    with pytest.warns(UserWarning, match=f"a {service} cluster") as warned:
        MongoClient(host, connect=False)
    assert len(warned) == 1 and warned[0].filename == __file__  # points at the line that created the client


@pytest.mark.parametrize("host", ["normal.host.com", "cosmos.azure.com.example.org", "mongodb+srv://u:p@a.example.com"])
def test_other_hosts_say_nothing(host: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="mongio.client"), warnings.catch_warnings():
        warnings.simplefilter("error")
        MongoClient(host, connect=False)
    assert not [record for record in caplog.records if record.name == "mongio.client"]
