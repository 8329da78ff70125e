"""A short failover durability soak (``python -m spec_runner.cluster.soak`` is the long one): writers and
readers through injected faults of every kind, elections and member deaths, with operations cancelled at
random points; no acknowledged write lost or applied twice, no wrong read, no leak."""

from __future__ import annotations

import pytest
from spec_runner.cluster.soak import SoakSettings, soak_topology

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
    assert report.leaked_tasks <= 1, report.table()  # pytest-asyncio's own runner task may remain
