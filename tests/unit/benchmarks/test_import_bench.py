"""The import-time benchmark's bookkeeping: run order, environment and the summary table."""

from __future__ import annotations

import pytest
from benchmarks import import_bench


def test_each_module_goes_first_in_turn() -> None:
    orders = [import_bench.interleaved_order(["pymongo", "mongio"], run) for run in range(4)]
    assert orders == [["pymongo", "mongio"], ["mongio", "pymongo"], ["pymongo", "mongio"], ["mongio", "pymongo"]]


def test_children_may_read_and_write_bytecode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    assert "PYTHONDONTWRITEBYTECODE" not in import_bench.child_environment()


def test_table_gives_median_range_and_ratio_to_pymongo() -> None:
    samples = {
        "pymongo": {"import-cpu": [0.100, 0.090, 0.110]},
        "mongio": {"import-cpu": [0.080, 0.095, 0.070]},
    }
    lines = import_bench.table(samples).splitlines()
    assert lines[1].split() == ["pymongo", "import-cpu", "100.0", "90.0-110.0", "1.00"]
    assert lines[2].split() == ["mongio", "import-cpu", "80.0", "70.0-95.0", "0.80"]


def test_one_real_import_is_measured() -> None:
    measured = import_bench.import_once("json", import_bench.child_environment())
    assert set(measured) == set(import_bench.MEASURES)
    assert all(seconds >= 0 for seconds in measured.values())
