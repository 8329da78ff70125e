"""The instruction-count benchmark's arithmetic and table, and one real count under callgrind."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from benchmarks import instructions_bench
from benchmarks.driver_workload import extract_data
from benchmarks.loopback_responder import LoopbackResponderProcess


def test_the_count_is_read_from_callgrinds_closing_summary() -> None:
    output = "==12== Callgrind, a call-graph generating cache profiler\n==12== Events    : Ir\n==12== Collected : 682202276\n"
    assert instructions_bench.collected_instructions(output) == 682202276
    with pytest.raises(RuntimeError, match="no instruction count"):
        instructions_bench.collected_instructions("==12== error while loading shared libraries\n")


def test_per_operation_cost_is_the_difference_of_the_two_runs() -> None:
    assert instructions_bench.per_operation(1_000_000, 2_000_000, (200, 1200)) == 1000.0
    with pytest.raises(ValueError, match="larger"):
        instructions_bench.per_operation(1, 2, (1200, 200))


def test_concurrency_tasks_give_each_task_one_operation_then_three() -> None:
    assert instructions_bench.operation_counts("run_command", (200, 1200)) == (200, 1200)
    assert instructions_bench.operation_counts("concurrency_1000x10", (200, 1200)) == (1000, 3000)


def test_table_gives_each_driver_and_its_ratio_to_pymongo() -> None:
    results = {"run_command": {"pymongo": 800_000.0, "mongio": 200_000.0}}
    lines = instructions_bench.table(results, ["pymongo", "mongio"]).splitlines()
    assert lines[0] == "| task | pymongo | mongio | mongio / pymongo |"
    assert lines[2] == "| run_command | 800,000 | 200,000 | 0.250x |"
    # Without PyMongo there is nothing to compare with.
    assert (
        instructions_bench.table({"run_command": {"mongio": 5.0}}, ["mongio"]).splitlines()[2]
        == "| run_command | 5 |"
    )


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_a_real_count_of_mongios_run_command() -> None:
    data = Path(tempfile.mkdtemp(prefix="mongio-instructions-test-"))
    extract_data(data)
    responder = LoopbackResponderProcess(data / "tweet.json").start()
    try:
        results = instructions_bench.measure(["mongio"], ["run_command"], (20, 60), responder.uri, data)
    finally:
        responder.stop()
    # A round trip costs the client tens of thousands of instructions at least (the interpreter, the hello
    # reply's decoding), and far fewer than ten million.
    assert 10_000 < results["run_command"]["mongio"] < 10_000_000
