"""The proxy benchmark's table, and one real run of each way of connecting (direct, python-socks, hand-written)."""

from __future__ import annotations

import pytest
from benchmarks import proxy_connect


def test_table_gives_medians_ranges_and_ratios_to_direct() -> None:
    results = {
        "direct": [(0.000500, 0.000300), (0.000600, 0.000350), (0.000700, 0.000400)],
        "python-socks": [(0.001000, 0.000450), (0.001200, 0.000500), (0.001100, 0.000700)],
        "hand-written": [(0.000900, 0.000400), (0.001000, 0.000420), (0.001100, 0.000440)],
    }
    lines = proxy_connect.table(results).splitlines()
    assert lines[1].split() == ["direct", "600", "(500-700)", "1.00", "350", "(300-400)", "1.00"]
    assert lines[2].split() == ["python-socks", "1100", "(1000-1200)", "1.83", "500", "(450-700)", "1.43"]
    assert lines[3].split() == ["hand-written", "1000", "(900-1100)", "1.67", "420", "(400-440)", "1.20"]


def test_one_round_connects_every_way(capsys: pytest.CaptureFixture[str]) -> None:
    proxy_connect.main(["--rounds", "1", "--per-round", "2"])
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [row.split()[0] for row in rows] == list(proxy_connect.WAYS)
    assert all(float(row.split()[3]) > 0 for row in rows)
