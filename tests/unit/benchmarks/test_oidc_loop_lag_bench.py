"""One small real run of the OIDC loop-lag benchmark: every way authenticates its clients and reports lags."""

from __future__ import annotations

import json

import pytest
from benchmarks import oidc_loop_lag

from mongio.connection.auth.oidc_environments import AZURE_ENDPOINT_VARIABLE


def test_one_round_authenticates_every_way(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(AZURE_ENDPOINT_VARIABLE, "set by the benchmark")  # restored after the test
    oidc_loop_lag.main(["--clients", "3", "--rounds", "1", "--delay", "0.01", "--json"])
    results = json.loads(capsys.readouterr().out)
    assert {"no-auth", "azure", "async-callback", "blocking-callback"} <= set(results)
    for row in results.values():
        assert row["median_wall_s"] > 0 and row["worst_lag_ms"] >= row["median_p99_lag_ms"] >= 0
