"""The cancellation benchmark's bookkeeping: its table, and one real measurement of a small crowd."""

from __future__ import annotations

from benchmarks import cancel_bench


def test_table_gives_median_range_per_task_and_ratio_to_pymongo() -> None:
    results = {
        "pymongo newest 1000": [(0.040, 0), (0.050, 0), (0.060, 0)],
        "mongio newest 1000": [(0.020, 0), (0.030, 0), (0.025, 0)],
        "pymongo oldest 1000": [(0.010, 0), (0.010, 0), (0.010, 0)],
        "mongio oldest 1000": [(0.005, 0), (0.005, 0), (0.005, 0)],
    }
    lines = cancel_bench.table(results, ["pymongo", "mongio"], [1000]).splitlines()
    assert lines[1].split() == ["pymongo", "newest", "1000", "50", "40-60", "50.0"]
    assert lines[2].split() == ["mongio", "newest", "1000", "25", "20-30", "25.0", "0.50x"]
    assert lines[4].split() == ["mongio", "oldest", "1000", "5", "5-5", "5.0", "0.50x"]


def test_runs_that_left_tasks_waiting_are_reported_and_give_no_ratio() -> None:
    results = {
        "pymongo newest 2000": [(60.0, 1), (0.3, 0), (60.0, 2)],
        "mongio newest 2000": [(0.06, 0), (0.05, 0), (0.07, 0)],
        "pymongo oldest 2000": [(0.2, 0)] * 3,
        "mongio oldest 2000": [(0.04, 0)] * 3,
    }
    lines = cancel_bench.table(results, ["pymongo", "mongio"], [2000]).splitlines()
    assert lines[1] == "pymongo  newest    2000 not ended or failed: 2 task(s) in 2 of 3 run(s)"
    assert lines[2].split() == ["mongio", "newest", "2000", "60", "50-70", "30.0"]  # no ratio to compare
    assert lines[4].split()[-1] == "0.20x"


def test_a_crowd_of_waiting_selections_is_cancelled_and_timed() -> None:
    seconds, unended = cancel_bench.run_once("mongio", 50, "newest", limit=30)
    assert 0 <= seconds < 30 and unended == 0
