"""One small real run of the OIDC loop-lag benchmark: every way authenticates its connections and reports lags."""

from __future__ import annotations

import json

import pytest
from benchmarks import oidc_loop_lag

CONNECTIONS = 3


def test_one_round_authenticates_every_connection_every_way(capsys: pytest.CaptureFixture[str]) -> None:
    oidc_loop_lag.main(
        [
            "--connections",
            str(CONNECTIONS),
            "--rounds",
            "1",
            "--delay",
            "0.01",
            "--drivers",
            "mongio",
            "--json",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    results, server = report["results"], report["server"]
    assert set(results) == {f"mongio/{way}" for way in oidc_loop_lag.WAYS}
    for row in results.values():
        assert row["errors"] == 0
        assert row["all_pinged_s"] > 0 and row["worst_lag_ms"] >= row["median_lag_ms"]
    # Each authenticating way's connections each presented a token the server accepted; the Azure way asked the
    # endpoint for it.
    authenticating = len(oidc_loop_lag.WAYS) - 1
    assert server["accepted"] == authenticating * CONNECTIONS
    assert server["azure_requests"] >= 1


def test_pymongo_runs_only_the_ways_it_can_be_given() -> None:
    pairs = oidc_loop_lag.round_runs(["mongio", "pymongo"], oidc_loop_lag.WAYS, 1)
    assert pairs[0][0] == "pymongo"  # the drivers' order turns each round
    assert {way for driver, way in pairs if driver == "pymongo"} == {"blocking-callback", "none"}
    assert {way for driver, way in pairs if driver == "mongio"} == set(oidc_loop_lag.WAYS)
