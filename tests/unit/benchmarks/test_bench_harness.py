"""The driver benchmark harness's bookkeeping: rotation, statistics, table and targets, on synthetic numbers."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from benchmarks import driver_bench
from benchmarks.driver_bench import (
    Run,
    Summary,
    check_targets,
    execute,
    format_table,
    rotation,
    round_value,
    summarize,
)
from benchmarks.driver_workload import TASKS, parse_tasks

DRIVERS = ["pymongo", "motor", "mongio", "mongio-uvloop"]


def test_rotation_puts_every_driver_in_every_position_once() -> None:
    orders = [rotation(DRIVERS, index) for index in range(len(DRIVERS))]
    assert orders[0] == DRIVERS
    assert orders[1] == ["motor", "mongio", "mongio-uvloop", "pymongo"]
    for position in range(len(DRIVERS)):
        assert sorted(order[position] for order in orders) == sorted(DRIVERS)
    assert rotation(DRIVERS, len(DRIVERS) + 1) == orders[1]
    assert rotation([], 3) == []


def test_round_value_is_the_median_per_operation_over_iterations() -> None:
    samples = {"ops": 100, "unit": "op", "wall": [0.05, 0.01, 0.02], "cpu": [0.004, 0.009, 0.001, 0.002]}
    wall, cpu = round_value(samples)
    assert wall == pytest.approx(0.02 / 100)
    assert cpu == pytest.approx((0.002 + 0.004) / 2 / 100)


def _per_round() -> dict[str, dict[str, list[tuple[float, float]]]]:
    return {
        "run_command": {
            "mongio": [(2e-4, 1e-4), (3e-4, 2e-4), (1e-4, 1.5e-4), (2e-4, 1e-4), (9e-4, 1e-4)],
            "pymongo": [(4e-4, 3e-4), (5e-4, 2e-4), (3e-4, 4e-4), (6e-4, 3e-4), (4e-4, 5e-4)],
            "motor": [],
        },
        "find_many": {"mongio": [(1e-5, 2e-5)]},
    }


def test_summarize_gives_median_min_max_over_rounds_and_ratios_to_pymongo() -> None:
    summaries = summarize(_per_round(), {"run_command": "op", "find_many": "doc"})
    assert [(row.task, row.driver) for row in summaries][:2] == [
        ("run_command", "pymongo"),
        ("run_command", "mongio"),
    ]
    by_key = {(row.task, row.driver): row for row in summaries}
    assert set(by_key) == {("run_command", "pymongo"), ("run_command", "mongio"), ("find_many", "mongio")}

    baseline = by_key["run_command", "pymongo"]
    assert (baseline.wall_median, baseline.wall_min, baseline.wall_max) == pytest.approx((4e-4, 3e-4, 6e-4))
    assert (baseline.cpu_median, baseline.cpu_min, baseline.cpu_max) == pytest.approx((3e-4, 2e-4, 5e-4))
    assert baseline.rounds == 5
    assert baseline.wall_ratio == pytest.approx(1.0)

    mongio = by_key["run_command", "mongio"]
    assert mongio.wall_median == pytest.approx(2e-4)
    assert mongio.wall_max == pytest.approx(9e-4)
    assert mongio.wall_ratio == pytest.approx(0.5)
    assert mongio.cpu_ratio == pytest.approx(1e-4 / 3e-4)

    alone = by_key["find_many", "mongio"]
    assert alone.unit == "doc"
    assert alone.wall_ratio is None and alone.cpu_ratio is None


def test_table_shows_microseconds_throughput_and_ratios() -> None:
    summaries = summarize(_per_round(), {"run_command": "op"})
    lines = format_table(summaries).splitlines()
    assert lines[0].split()[:2] == ["task", "driver"]
    assert set(lines[1]) <= {"-", " "}
    mongio_line = next(line for line in lines if line.startswith("run_command") and " mongio " in line)
    assert "200.0" in mongio_line  # median wall µs
    assert "100.0-900.0" in mongio_line  # wall min-max µs
    assert "5,000" in mongio_line  # operations per second
    assert "0.50x" in mongio_line and "0.33x" in mongio_line
    no_baseline = next(line for line in lines if line.startswith("find_many"))
    assert no_baseline.split()[-3:] == ["-", "-", "-"]
    widths = {len(line) for line in lines[:2]}
    assert len(widths) == 1  # header and rule line up


def _paired_rounds() -> tuple[dict[str, dict[str, list[tuple[float, float]]]], dict[str, dict[str, list[int]]]]:
    # PyMongo ran four rounds, mongio three (it failed round 1): CPU 4, 8, 2, 4 against 1, -, 1, 2 (x 1e-4).
    per_round = {
        "run_command": {
            "pymongo": [(1.0, 4e-4), (1.0, 8e-4), (1.0, 2e-4), (1.0, 4e-4)],
            "mongio": [(1.0, 1e-4), (1.0, 1e-4), (1.0, 2e-4)],
        }
    }
    return per_round, {"run_command": {"pymongo": [0, 1, 2, 3], "mongio": [0, 2, 3]}}


def test_per_round_ratios_pair_each_round_with_the_baseline_s_same_round() -> None:
    per_round, numbers = _paired_rounds()
    by_driver = {row.driver: row for row in summarize(per_round, {"run_command": "op"}, round_numbers=numbers)}
    mongio = by_driver["mongio"]
    # Rounds 0, 2, 3: 1/4, 1/2, 2/4. Paired by position instead (1/4, 1/8, 2/2) the median would be 0.25.
    assert mongio.cpu_round_ratio_median == pytest.approx(0.5)
    assert mongio.cpu_round_ratio_min == pytest.approx(0.25)
    assert mongio.cpu_round_ratio_max == pytest.approx(0.5)
    assert mongio.cpu_ratio == pytest.approx(1e-4 / 4e-4)  # the ratio of the medians is unchanged
    assert by_driver["pymongo"].cpu_round_ratio_median == pytest.approx(1.0)
    # Without the round numbers nothing says which rounds pair up: no per-round ratios.
    unpaired = {row.driver: row for row in summarize(per_round, {"run_command": "op"})}
    assert unpaired["mongio"].cpu_round_ratio_median is None
    assert unpaired["mongio"].cpu_ratio == pytest.approx(0.25)


def test_table_and_targets_show_the_per_round_ratio_beside_the_ratio_of_medians() -> None:
    per_round, numbers = _paired_rounds()
    summaries = summarize(per_round, {"run_command": "op"}, round_numbers=numbers)
    mongio_line = next(line for line in format_table(summaries).splitlines() if " mongio " in line)
    assert mongio_line.split()[-3:] == ["0.25x", "0.50x", "(0.25-0.50)"]  # CPU ratio, then per round
    [target] = check_targets(summaries)
    assert "CPU/op 0.25x PyMongo async; per round 0.50x (0.25-0.50)" in target
    assert target.endswith(": met")  # judged on the ratio of the medians (0.25x), not the per-round 0.50x


def _summary(task: str, driver: str, wall_ratio: float, cpu_ratio: float) -> Summary:
    return Summary(task, driver, "op", 5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, wall_ratio, cpu_ratio)


def test_targets_compare_mongio_ratios_with_the_limits() -> None:
    lines = check_targets(
        [
            _summary("run_command", "mongio", 0.9, 0.33),
            _summary("find_one_by_id", "mongio-uvloop", 0.9, 0.36),
            _summary("concurrency_200x50", "mongio", 1.25, 2.0),
            _summary("run_command", "motor", 1.0, 0.1),
            _summary("find_many", "mongio", 3.0, 3.0),
        ]
    )
    assert len(lines) == 3
    assert lines[0].startswith("mongio run_command") and lines[0].endswith(": met")
    assert lines[1].startswith("mongio-uvloop find_one_by_id") and lines[1].endswith("NOT met")
    assert "throughput 0.80x" in lines[2] and lines[2].endswith("NOT met")


def test_parse_tasks_keeps_the_canonical_order_and_refuses_unknown_names() -> None:
    assert parse_tasks(None) == list(TASKS)
    assert parse_tasks("small_insert_one, run_command") == ["run_command", "small_insert_one"]
    with pytest.raises(SystemExit):
        parse_tasks("run_command,nonsense")


class _FakeServer:
    started = 0

    def __init__(self) -> None:
        _FakeServer.started += 1
        self.uri = f"mongodb://fake-{_FakeServer.started}/"
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


def test_execute_rotates_uses_a_server_per_workload_and_drops_unavailable_drivers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[str, str, tuple[str, ...]]] = []
    servers: list[_FakeServer] = []

    def start_server() -> _FakeServer:
        server = _FakeServer()
        servers.append(server)
        return server

    def run_workload(
        driver: str, uri: str, tasks: Any, quick: bool, data_dir: Path, server_pid: int | None = None
    ) -> dict[str, Any]:
        calls.append((driver, uri, tuple(tasks)))
        if driver == "mongio":
            return {"driver": driver, "skipped": "mongio client not available: ImportError: nope"}
        if driver == "motor":
            return {"driver": driver, "version": "9", "results": {}, "errors": {"run_command": "Boom: x"}}
        wall = 0.001 * (len(calls))
        samples = {"ops": 10, "unit": "op", "wall": [wall], "cpu": [wall / 2]}
        return {"driver": driver, "version": "1", "results": {"run_command": samples}, "errors": {}}

    monkeypatch.setattr(driver_bench, "start_server", start_server)
    monkeypatch.setattr(driver_bench, "run_workload", run_workload)
    run = Run(drivers=["pymongo", "motor", "mongio"], tasks=["run_command"], rounds=3, quick=True)
    execute(run, Path("."), log=io.StringIO())

    assert run.orders == [rotation(run.drivers, index) for index in range(3)]
    assert [driver for driver, _, _ in calls] == [
        "pymongo",
        "motor",
        "mongio",
        "motor",
        "pymongo",
        "pymongo",
        "motor",
    ]
    assert len({uri for _, uri, _ in calls}) == len(calls)  # never two workloads on one server
    assert all(server.stopped for server in servers)
    assert run.skipped == {"mongio": "mongio client not available: ImportError: nope"}
    assert len(run.per_round["run_command"]["pymongo"]) == 3
    assert run.round_numbers["run_command"]["pymongo"] == [0, 1, 2]
    assert run.round_numbers["run_command"]["motor"] == []
    assert run.per_round["run_command"]["motor"] == []
    assert len(run.errors) == 3 and all("Boom: x" in line for line in run.errors)


def test_a_fresh_server_per_task_runs_each_task_on_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, tuple[str, ...]]] = []

    def run_workload(
        driver: str, uri: str, tasks: Any, quick: bool, data_dir: Path, server_pid: int | None = None
    ) -> dict[str, Any]:
        calls.append((uri, tuple(tasks)))
        return {"driver": driver, "results": {}, "errors": {}}

    monkeypatch.setattr(driver_bench, "start_server", _FakeServer)
    monkeypatch.setattr(driver_bench, "run_workload", run_workload)
    tasks = ["run_command", "find_many"]
    execute(Run(["pymongo"], tasks, 1, True, fresh_server_per_task=True), Path("."), log=io.StringIO())
    assert [group for _, group in calls] == [("run_command",), ("find_many",)]
    assert calls[0][0] != calls[1][0]
    calls.clear()
    execute(Run(["pymongo"], tasks, 1, True), Path("."), log=io.StringIO())
    assert [group for _, group in calls] == [("run_command", "find_many")]


def test_server_cpu_per_operation_is_summarized_when_every_round_has_it() -> None:
    server_cpu = {"run_command": {"mongio": [3e-4, 1e-4, 2e-4, 2e-4, 5e-4], "pymongo": [1e-4]}}
    summaries = summarize(_per_round(), {"run_command": "op"}, server_cpu)
    by_driver = {row.driver: row for row in summaries if row.task == "run_command"}
    assert by_driver["mongio"].server_cpu_median == pytest.approx(2e-4)
    # one round's reading for five rounds of timings is not a median over the rounds: left out
    assert by_driver["pymongo"].server_cpu_median is None
    mongio_line = next(line for line in format_table(summaries).splitlines() if " mongio " in line)
    assert "200.0" in mongio_line.split()[7]


def test_server_process_cpu_reads_a_process_or_gives_none() -> None:
    import os

    from benchmarks.driver_workload import server_process_cpu

    assert server_process_cpu(None) is None
    if os.path.exists(f"/proc/{os.getpid()}/stat"):
        before = server_process_cpu(os.getpid())
        assert before is not None and before > 0
        sum(range(2_000_000))  # spend some CPU
        after = server_process_cpu(os.getpid())
        assert after is not None and after >= before



def test_tracing_modes_run_mongio_three_ways_with_ratios_to_the_first(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    drivers: list[str] = []

    def run_workload(
        driver: str, uri: str, tasks: Any, quick: bool, data_dir: Path, server_pid: int | None = None
    ) -> dict[str, Any]:
        drivers.append(driver)
        cpu = {"mongio-tracing-absent": 0.001, "mongio-tracing-off": 0.001, "mongio-tracing-on": 0.002}[driver]
        samples = {"ops": 1, "unit": "op", "wall": [cpu], "cpu": [cpu]}
        return {"driver": driver, "version": "1", "results": {"run_command": samples}, "errors": {}}

    monkeypatch.setattr(driver_bench, "start_server", _FakeServer)
    monkeypatch.setattr(driver_bench, "run_workload", run_workload)
    monkeypatch.setattr(driver_bench, "extract_data", lambda target: None)
    driver_bench.main(["--tracing", "--rounds", "1", "--tasks", "run_command"])
    assert sorted(drivers) == ["mongio-tracing-absent", "mongio-tracing-off", "mongio-tracing-on"]
    text = capsys.readouterr().out
    assert "Ratios to: mongio-tracing-absent" in text
    (on_row,) = [line for line in text.splitlines() if line.startswith("run_command") and "tracing-on" in line]
    assert on_row.split()[-4:] == ["2.00x", "2.00x", "2.00x", "(2.00-2.00)"]
    with pytest.raises(SystemExit):
        driver_bench.main(["--tracing", "--drivers", "mongio"])
    with pytest.raises(SystemExit):
        driver_bench.main(["--tracing", "sometimes"])


def test_backends_run_mongio_on_asyncio_and_trio_with_ratios_to_asyncio(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runs: list[tuple[str, tuple[str, ...]]] = []

    def run_workload(
        driver: str, uri: str, tasks: Any, quick: bool, data_dir: Path, server_pid: int | None = None
    ) -> dict[str, Any]:
        runs.append((driver, tuple(tasks)))
        cpu = {"mongio": 0.001, "mongio-trio": 0.0015}[driver]
        samples = {"ops": 1, "unit": "op", "wall": [cpu], "cpu": [cpu]}
        return {"driver": driver, "version": "1", "results": {task: samples for task in tasks}, "errors": {}}

    monkeypatch.setattr(driver_bench, "start_server", _FakeServer)
    monkeypatch.setattr(driver_bench, "run_workload", run_workload)
    monkeypatch.setattr(driver_bench, "extract_data", lambda target: None)
    driver_bench.main(["--backends", "--rounds", "1"])
    every = ("run_command", "find_one_by_id", "find_many", "small_insert_one")
    assert sorted(runs) == [("mongio", every), ("mongio-trio", every)]
    text = capsys.readouterr().out
    assert "Ratios to: mongio" in text
    (trio_row,) = [line for line in text.splitlines() if line.startswith("run_command") and "mongio-trio" in line]
    assert trio_row.split()[-4:] == ["1.50x", "1.50x", "1.50x", "(1.50-1.50)"]
    # The concurrency workloads gather asyncio tasks: not a trio workload.
    with pytest.raises(SystemExit):
        driver_bench.main(["--backends", "--tasks", "concurrency_200x50"])
    with pytest.raises(SystemExit):
        driver_bench.main(["--backends", "--drivers", "mongio"])


def _nice_of(pid: int) -> int:
    # /proc/PID/stat: the command name is in parentheses; nice is the 19th field, the 17th after it.
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[16])


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the spinners' priority from /proc")
def test_busy_cores_spin_at_the_lowest_priority_and_end_with_the_block() -> None:
    import time

    with driver_bench.busy_cores(2) as spinners:
        assert len(spinners) == 2
        for spinner in spinners:
            for _ in range(200):  # the child lowers its own priority as its first statement
                if _nice_of(spinner.pid) == 19:
                    break
                time.sleep(0.01)
            assert _nice_of(spinner.pid) == 19
            assert spinner.poll() is None
    assert all(spinner.returncode is not None for spinner in spinners)
