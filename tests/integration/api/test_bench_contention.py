"""The server-contention benchmark measures what it says, against the test server."""

from __future__ import annotations

import pytest
from benchmarks.server_contention import measure

pytestmark = pytest.mark.server


async def test_server_contention_measures_one_driver_at_one_cap(server_uri: str) -> None:
    row = await measure("mongio", server_uri, None, 2, 400)
    assert (row["driver"], row["cap"]) == ("mongio", 2)
    assert row["cpu"] > 0 and 0 < row["wall"] < 1.0  # seconds per operation
    assert row["server_cpu"] is None  # no server pid given: no server column
