"""A short failover durability soak (``python -m spec_runner.cluster.soak`` is the long one): writers and
readers through injected faults of every kind, elections and member deaths, with operations cancelled at
random points; no acknowledged write lost or applied twice, no wrong read, no leak."""

from __future__ import annotations

import pytest
from spec_runner.cluster.soak import SoakSettings, classify_error, soak_topology

from mongio.errors import OperationFailure, OperationTimeoutError

pytestmark = [pytest.mark.server, pytest.mark.slow]


@pytest.mark.parametrize("topology", ["replicaset", "sharded"])
async def test_a_short_soak_loses_and_duplicates_nothing(topology: str) -> None:
    settings = SoakSettings(writers=10, readers=3, faults=20, cancellations=300, seed=3)
    report = await soak_topology(topology, settings)
    assert report.acknowledged_inserts > 0 and report.reads > 0
    assert report.cancelled > 0
    assert sum(report.faults.values()) >= settings.faults
    assert report.lost_writes == 0, report.table()
    assert report.duplicate_writes == 0, report.table()
    assert report.wrong_reads == 0, report.table()
    assert report.checked_out_after == 0, report.table()
    assert report.stale_replies == 0, report.table()
    assert report.leaked_tasks == 0, report.table()


async def test_writes_waiting_for_a_connection_through_elections_see_no_error() -> None:
    """The pool-pressure run, short: more writers than connections, an election every half second. A write
    that selected the primary and waits for a connection while it steps down is still a retryable write
    (judged on the server as selected), so the application sees no error at all."""
    settings = SoakSettings(
        writers=20, readers=0, faults=4, cancellations=0, max_pool_size=5, pressure=True, election_interval=0.5
    )
    report = await soak_topology("replicaset", settings)
    assert report.faults["election"] == settings.faults
    assert report.acknowledged_inserts > 0
    assert sum(report.avoidable_errors.values()) == 0, report.table()
    assert sum(report.unavoidable_errors.values()) == 0, report.table()
    assert report.lost_writes == 0 and report.duplicate_writes == 0, report.table()


def test_the_soak_tells_errors_no_retry_could_avoid_from_the_others() -> None:
    not_writable = OperationFailure("not primary", 10107, {"ok": 0, "code": 10107})
    overloaded = OperationFailure(
        "overloaded", 462, {"ok": 0, "code": 462, "errorLabels": ["SystemOverloadedError", "RetryableError"]}
    )
    assert classify_error(not_writable) == ("OperationFailure (code 10107)", False)
    assert classify_error(overloaded) == ("OperationFailure (code 462)", True)
    assert classify_error(OperationTimeoutError("timed out")) == ("OperationTimeoutError", True)
    # An operation that met an overload has at most maxAdaptiveRetries retries: what ends it was unavoidable.
    assert classify_error(not_writable, after_overload=True) == (
        "OperationFailure (code 10107) after an overload capped the retries",
        True,
    )
