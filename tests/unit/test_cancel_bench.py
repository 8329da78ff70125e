"""The cancellation benchmark's bookkeeping: its table, and one real measurement of a small crowd."""

from __future__ import annotations

from benchmarks import cancel_bench


def test_table_gives_median_range_per_task_and_ratio_to_pymongo() -> None:
    results = {
        "pymongo newest 1000": [0.040, 0.050, 0.060],
        "mongio newest 1000": [0.020, 0.030, 0.025],
        "pymongo oldest 1000": [0.010, 0.010, 0.010],
        "mongio oldest 1000": [0.005, 0.005, 0.005],
    }
    lines = cancel_bench.table(results, ["pymongo", "mongio"], [1000]).splitlines()
    assert lines[1].split() == ["pymongo", "newest", "1000", "50", "40-60", "50.0"]
    assert lines[2].split() == ["mongio", "newest", "1000", "25", "20-30", "25.0", "0.50x"]
    assert lines[4].split() == ["mongio", "oldest", "1000", "5", "5-5", "5.0", "0.50x"]


def test_a_crowd_of_waiting_selections_is_cancelled_and_timed() -> None:
    seconds = cancel_bench.run_once("mongio", 50, "newest")
    assert 0 <= seconds < 10
