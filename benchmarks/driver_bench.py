"""Driver benchmarks: mongio against PyMongo's AsyncMongoClient and Motor, in one run.

    .venv/bin/python -m benchmarks.driver_bench [--rounds 5] [--tasks run_command,find_one_by_id]
        [--drivers pymongo,motor,mongio,mongio-uvloop,floor] [--quick] [--json FILE] [--fresh-server-per-task]
        [--server secantus|loopback] [--tracing [absent,off,on]] [--backends] [--busy-cores]

For every round, and every driver in an order rotated from round to round, a fresh SecantusDB is started
(it slows down as retryable-write records pile up, so no driver inherits another's) and the driver's
workloads (:mod:`benchmarks.driver_workload`) run against it in a Python process of their own. Server
start-up and process start-up fall outside the measurements; the workload process times only its timed
loops.

Each round gives, per task and driver, the median over that round's timed iterations of the wall time and
of the client process's CPU time per operation (``time.process_time()``, all threads of the client). The
table shows the median of those round values with their min and max, and the ratio of each median to
PyMongo async's (the figure the targets are checked against). Beside it, the CPU ratio per round: each
round's value over PyMongo async's in the same round, their median with min and max. A round's drivers run
within seconds of each other while the machine's speed drifts over minutes (other tenants of a shared
host), so the per-round ratios cancel what a round's drivers share and spread less than the medians they
come from; where the two ratios disagree, drift between rounds is the likely cause. Beside them, the server
process's CPU time per operation (read from /proc, where there is one): where the server is the
bottleneck, as on the 200-task workload, it shows what each driver's traffic costs the server. A driver whose client cannot run (mongio while it is incomplete, or without uvloop) is
reported as skipped, with the reason, instead of stopping the run.

``--drivers`` may add ``floor`` (never run unless named; the single-operation tasks only): the round trips
with no driver at all (:mod:`benchmarks.floor_client`). The report then gives each driver's CPU per
operation beyond the floor's in the same round, which leaves out what the machine charges every client for
a round trip (on a virtual machine, mostly the waking of an idle CPU, which grows with the server's time).

``--tracing`` runs mongio alone in three modes instead: OpenTelemetry absent (its imports refused), installed
but tracing off, and tracing on (an SDK tracer provider without exporter); the ratios are then to the first
mode, which shows what tracing costs an operation when it is not used and when it is.

``--backends`` runs mongio alone on its two backends instead: asyncio (``mongio``) and trio through anyio
(``mongio-trio``), on the single-operation tasks and ``find_many`` unless ``--tasks`` says otherwise (the
concurrency workloads gather asyncio tasks, so they are not run on trio); the ratios are then trio's to
asyncio's, from the same rounds.

``--busy-cores`` keeps every CPU busy for the whole run with one spinning process per CPU at the lowest
priority (nice 19), which takes only time nothing else wants. A client waiting for each reply leaves its CPU
idle; on a virtual machine an idle CPU halts, and waking it again is charged partly to the client's CPU time
and wall time. A quiet machine therefore adds a fixed cost per round trip to every driver alike, which
weighs more on a driver that spends less per operation. With the spinners the CPUs never idle, as on a busy
application server. They are not free either: they still take scheduler slices (and, on a shared core, its
execution units), which slows some workloads. So this is a diagnostic beside the default run, which is the
measurement of record.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.driver_workload import (
    DRIVERS,
    FLOOR_DRIVER,
    FLOOR_TASKS,
    TASKS,
    TRACING_MODES,
    TRIO_DRIVER,
    TRIO_TASKS,
    extract_data,
    parse_tasks,
)

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "pymongo"
WORKLOAD_TIMEOUT = 1800.0

# The targets for mongio, as ratios to PyMongo async: client CPU per operation at most 0.35x on the
# single-operation tasks; the 200-task concurrency workload at least as fast (wall time at most 1x) and the
# 1,000-task one (against the loopback responder, where the client is the bottleneck) at least 4x as fast.
CPU_TARGETS = {"run_command": 0.35, "find_one_by_id": 0.35, "small_insert_one": 0.35}
WALL_TARGETS = {"concurrency_200x50": 1.0, "concurrency_1000x10": 0.25}
# What ``--backends`` runs by default: the operations whose client CPU the trio backend is measured on.
BACKEND_TASKS = ("run_command", "find_one_by_id", "small_insert_one", "find_many")
# The tasks the loopback responder can serve: every one but the find_many tasks, which read back what they
# inserted, and client_bulk_insert, whose bulkWrite reply (a results cursor) it does not make.
LOOPBACK_TASKS = frozenset(TASKS) - {"find_many", "find_many_streamed", "client_bulk_insert"}


def rotation(drivers: Sequence[str], round_index: int) -> list[str]:
    """The drivers' order in round ``round_index``: the list rotated left by the round number."""
    if not drivers:
        return []
    shift = round_index % len(drivers)
    return [*drivers[shift:], *drivers[:shift]]


def round_value(samples: dict[str, Any]) -> tuple[float, float]:
    """One round's (wall, CPU) seconds per operation: the medians over its timed iterations."""
    ops = samples["ops"]
    wall = statistics.median(seconds / ops for seconds in samples["wall"])
    cpu = statistics.median(seconds / ops for seconds in samples["cpu"])
    return wall, cpu


@dataclass
class Summary:
    """Per task and driver, over rounds: median, min and max of the per-round values (seconds per op)."""

    task: str
    driver: str
    unit: str
    rounds: int
    wall_median: float
    wall_min: float
    wall_max: float
    cpu_median: float
    cpu_min: float
    cpu_max: float
    wall_ratio: float | None = None
    cpu_ratio: float | None = None
    # The CPU ratio round by round (this driver's value over the baseline's in the same round): median, min
    # and max over the rounds both have a value for.
    cpu_round_ratio_median: float | None = None
    cpu_round_ratio_min: float | None = None
    cpu_round_ratio_max: float | None = None
    # The server process's CPU per operation (median over rounds), where it could be read: on a server
    # that is the bottleneck, it shows what each driver's traffic costs the server.
    server_cpu_median: float | None = None


def summarize(
    per_round: dict[str, dict[str, list[tuple[float, float]]]],
    units: dict[str, str],
    server_cpu: dict[str, dict[str, list[float]]] | None = None,
    baseline_driver: str = BASELINE,
    round_numbers: dict[str, dict[str, list[int]]] | None = None,
) -> list[Summary]:
    """Summaries in task order, the baseline (PyMongo async) first, with ratios to it where it has numbers.

    ``per_round[task][driver]`` lists (wall, CPU) seconds per operation, one pair per round;
    ``server_cpu[task][driver]``, when given, the server's CPU seconds per operation, one per round;
    ``round_numbers[task][driver]``, when given, the round each of ``per_round``'s pairs comes from (a driver
    may have failed a round): without it, there are no per-round ratios.
    """
    summaries: list[Summary] = []
    for task, by_driver in per_round.items():
        rows: dict[str, Summary] = {}
        for driver, values in by_driver.items():
            if not values:
                continue
            walls = [wall for wall, _ in values]
            cpus = [cpu for _, cpu in values]
            rows[driver] = Summary(
                task=task,
                driver=driver,
                unit=units.get(task, "op"),
                rounds=len(values),
                wall_median=statistics.median(walls),
                wall_min=min(walls),
                wall_max=max(walls),
                cpu_median=statistics.median(cpus),
                cpu_min=min(cpus),
                cpu_max=max(cpus),
            )
            server_values = (server_cpu or {}).get(task, {}).get(driver) or []
            if len(server_values) == len(values):
                rows[driver].server_cpu_median = statistics.median(server_values)
        baseline = rows.get(baseline_driver)
        # Stable: the baseline first, the others in their order.
        ordered = sorted(rows.values(), key=lambda row: row.driver != baseline_driver)
        for row in ordered:
            if baseline is not None:
                row.wall_ratio = row.wall_median / baseline.wall_median if baseline.wall_median else None
                row.cpu_ratio = row.cpu_median / baseline.cpu_median if baseline.cpu_median else None
                numbers = (round_numbers or {}).get(task, {})
                mine, theirs = numbers.get(row.driver), numbers.get(baseline_driver)
                ratios = (
                    []
                    if mine is None or theirs is None
                    else round_ratios(
                        _cpu_by_round(by_driver[row.driver], mine),
                        _cpu_by_round(by_driver[baseline_driver], theirs),
                    )
                )
                if ratios:
                    row.cpu_round_ratio_median = statistics.median(ratios)
                    row.cpu_round_ratio_min = min(ratios)
                    row.cpu_round_ratio_max = max(ratios)
            summaries.append(row)
    return summaries


def _cpu_by_round(values: list[tuple[float, float]], numbers: list[int]) -> dict[int, float]:
    """A driver's CPU per operation keyed by the round it comes from."""
    return {number: cpu for number, (_, cpu) in zip(numbers, values, strict=True)}


def round_ratios(driver: dict[int, float], baseline: dict[int, float]) -> list[float]:
    """``driver``'s value over ``baseline``'s, for each round both have a (non-zero baseline) value."""
    return [driver[number] / baseline[number] for number in sorted(driver) if baseline.get(number)]


def above_floor(
    per_round: dict[str, dict[str, list[tuple[float, float]]]],
    round_numbers: dict[str, dict[str, list[int]]],
    baseline_driver: str = BASELINE,
) -> list[str]:
    """Per task and driver, where the floor client ran: the CPU per operation beyond the floor's in the same
    round (median, min-max over the rounds both ran), and its ratio to the baseline's median beyond it."""
    lines = []
    for task, by_driver in per_round.items():
        numbers = round_numbers.get(task, {})
        floor_values = by_driver.get(FLOOR_DRIVER)
        if not floor_values or FLOOR_DRIVER not in numbers:
            continue
        floor = _cpu_by_round(floor_values, numbers[FLOOR_DRIVER])
        beyond: dict[str, list[float]] = {}
        for driver, values in by_driver.items():
            if driver == FLOOR_DRIVER or driver not in numbers or not values:
                continue
            own = _cpu_by_round(values, numbers[driver])
            beyond[driver] = [own[number] - floor[number] for number in sorted(own) if number in floor]
        baseline = beyond.get(baseline_driver)
        baseline_median = statistics.median(baseline) if baseline else None
        for driver, differences in beyond.items():
            if not differences:
                continue
            median = statistics.median(differences)
            ratio = "" if not baseline_median else f", {median / baseline_median:.2f}x"
            lines.append(
                f"{task} {driver}: {_micros(median)} µs ({_micros(min(differences))} to "
                f"{_micros(max(differences))}){ratio}"
            )
    return lines


def _micros(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _round_ratio(row: Summary) -> str:
    """The per-round CPU ratio as ``median (min-max)``, or ``-`` where there is none."""
    if row.cpu_round_ratio_median is None:
        return "-"
    return f"{row.cpu_round_ratio_median:.2f}x ({row.cpu_round_ratio_min:.2f}-{row.cpu_round_ratio_max:.2f})"


def format_table(summaries: Sequence[Summary]) -> str:
    """A plain-text table: µs per operation (median and min-max over rounds), throughput, ratios."""
    header = (
        "task",
        "driver",
        "per",
        "rounds",
        "wall µs (median)",
        "wall min-max",
        "CPU µs (median)",
        "CPU min-max",
        "server CPU µs",
        "ops/s",
        "wall ratio",
        "CPU ratio",
        "CPU ratio per round",
    )
    lines: list[tuple[str, ...]] = [header]
    for row in summaries:
        lines.append(
            (
                row.task,
                row.driver,
                row.unit,
                str(row.rounds),
                _micros(row.wall_median),
                f"{_micros(row.wall_min)}-{_micros(row.wall_max)}",
                _micros(row.cpu_median),
                f"{_micros(row.cpu_min)}-{_micros(row.cpu_max)}",
                "-" if row.server_cpu_median is None else _micros(row.server_cpu_median),
                f"{1 / row.wall_median:,.0f}" if row.wall_median else "-",
                _ratio(row.wall_ratio),
                _ratio(row.cpu_ratio),
                _round_ratio(row),
            )
        )
    widths = [max(len(line[column]) for line in lines) for column in range(len(header))]
    left_aligned = {0, 1, 2}
    rendered = []
    for index, line in enumerate(lines):
        cells = [
            cell.ljust(width) if column in left_aligned else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(line, widths, strict=True))
        ]
        rendered.append("  ".join(cells).rstrip())
        if index == 0:
            rendered.append("  ".join("-" * width for width in widths))
    return "\n".join(rendered)


def check_targets(summaries: Sequence[Summary]) -> list[str]:
    """One line per mongio driver and target: the measured ratio to PyMongo async, and whether it is met."""
    lines = []
    for row in summaries:
        if not row.driver.startswith("mongio"):
            continue
        if row.task in CPU_TARGETS and row.cpu_ratio is not None:
            limit = CPU_TARGETS[row.task]
            verdict = "met" if row.cpu_ratio <= limit else "NOT met"
            per_round = "" if row.cpu_round_ratio_median is None else f"; per round {_round_ratio(row)}"
            lines.append(
                f"{row.driver} {row.task}: CPU/op {row.cpu_ratio:.2f}x PyMongo async{per_round} "
                f"(target <= {limit}x, judged on the ratio of the medians): {verdict}"
            )
        if row.task in WALL_TARGETS and row.wall_ratio is not None:
            limit = WALL_TARGETS[row.task]
            verdict = "met" if row.wall_ratio <= limit else "NOT met"
            throughput = 1 / row.wall_ratio if row.wall_ratio else float("inf")
            lines.append(
                f"{row.driver} {row.task}: throughput {throughput:.2f}x PyMongo async (target >= {1 / limit:.1f}x): {verdict}"
            )
    return lines


@dataclass
class Run:
    """Everything one benchmark run collected, for the table and the JSON file."""

    drivers: list[str]
    tasks: list[str]
    rounds: int
    quick: bool
    fresh_server_per_task: bool = False
    server: str = "secantus"
    baseline: str = BASELINE  # the driver the ratios are to
    per_round: dict[str, dict[str, list[tuple[float, float]]]] = field(default_factory=dict)
    # The round each of per_round's pairs comes from (a driver may fail a round).
    round_numbers: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    server_cpu: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    raw: list[dict[str, Any]] = field(default_factory=list)
    orders: list[list[str]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)


def run_workload(
    driver: str, uri: str, tasks: Sequence[str], quick: bool, data_dir: Path, server_pid: int | None = None
) -> dict[str, Any]:
    """One workload process for ``driver`` against ``uri``; its JSON result (or an ``error`` entry)."""
    argv = [
        sys.executable, "-m", "benchmarks.driver_workload",
        "--driver", driver,
        "--uri", uri,
        "--tasks", ",".join(tasks),
        "--data", str(data_dir),
    ]  # fmt: skip
    if quick:
        argv.append("--quick")
    if server_pid is not None:
        argv += ["--server-pid", str(server_pid)]
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    try:
        completed = subprocess.run(
            argv,
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
            timeout=WORKLOAD_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"driver": driver, "error": f"workload did not finish within {WORKLOAD_TIMEOUT:.0f}s"}
    output = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not output:
        tail = "\n".join(completed.stderr.strip().splitlines()[-15:])
        return {"driver": driver, "error": f"workload exited with {completed.returncode}:\n{tail}"}
    result: dict[str, Any] = json.loads(output[-1])
    if result.get("errors"):
        result["stderr_tail"] = "\n".join(completed.stderr.strip().splitlines()[-15:])
    return result


def start_server(kind: str = "secantus", data_dir: Path | None = None) -> Any:
    """A fresh server for one workload: the test server, or the loopback responder (``kind="loopback"``)."""
    if kind == "loopback":
        from benchmarks.loopback_responder import LoopbackResponderProcess

        assert data_dir is not None
        return LoopbackResponderProcess(data_dir / "tweet.json").start()
    from spec_runner.server import TestServer

    return TestServer().start()


def execute(run: Run, data_dir: Path, log: Any = sys.stderr) -> None:
    """Run every round, driver and (group of) tasks, filling ``run`` as results come in."""
    for task in run.tasks:
        run.per_round[task] = {driver: [] for driver in run.drivers}
        run.round_numbers[task] = {driver: [] for driver in run.drivers}
        run.server_cpu[task] = {driver: [] for driver in run.drivers}
    task_groups = [[task] for task in run.tasks] if run.fresh_server_per_task else [run.tasks]
    for round_index in range(run.rounds):
        order = rotation(run.drivers, round_index)
        run.orders.append(order)
        print(f"round {round_index + 1}/{run.rounds}: {', '.join(order)}", file=log, flush=True)
        for driver in order:
            if driver in run.skipped:
                continue
            for group in task_groups:
                server = start_server(run.server, data_dir) if run.server != "secantus" else start_server()
                try:
                    process = getattr(server, "process", None)
                    pid = process.pid if process is not None else None
                    result = run_workload(driver, server.uri, group, run.quick, data_dir, pid)
                finally:
                    server.stop()
                result["round"] = round_index
                run.raw.append(result)
                if "skipped" in result:
                    run.skipped[driver] = result["skipped"]
                    print(f"  {driver}: skipped: {result['skipped']}", file=log, flush=True)
                    break
                if "error" in result:
                    run.errors.append(f"round {round_index + 1} {driver}: {result['error']}")
                    print(f"  {driver}: {result['error']}", file=log, flush=True)
                    continue
                if "version" in result:
                    run.versions[driver] = f"{result['version']} ({result.get('loop', 'asyncio')})"
                for task, message in result.get("errors", {}).items():
                    run.errors.append(f"round {round_index + 1} {driver} {task}: {message}")
                    print(f"  {driver} {task}: failed: {message}", file=log, flush=True)
                for task, samples in result.get("results", {}).items():
                    wall, cpu = round_value(samples)
                    run.per_round[task][driver].append((wall, cpu))
                    run.round_numbers[task][driver].append(round_index)
                    if samples.get("server_cpu"):
                        run.server_cpu[task][driver].append(
                            statistics.median(seconds / samples["ops"] for seconds in samples["server_cpu"])
                        )
                    print(
                        f"  {driver} {task}: {wall * 1e6:,.1f} µs wall, {cpu * 1e6:,.1f} µs CPU per {samples['unit']}",
                        file=log,
                        flush=True,
                    )


def report(run: Run) -> tuple[str, list[Summary]]:
    summaries = summarize(
        run.per_round,
        {name: spec.unit for name, spec in TASKS.items()},
        run.server_cpu,
        run.baseline,
        run.round_numbers,
    )
    parts = [
        f"Driver benchmarks: {run.rounds} round(s){' (quick)' if run.quick else ''}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPU(s), a fresh {'SecantusDB' if run.server == 'secantus' else 'loopback responder'} "
        f"per {'task, driver' if run.fresh_server_per_task else 'driver'} and round",
        "Drivers: " + ", ".join(f"{driver} {version}" for driver, version in run.versions.items()),
        f"Ratios to: {run.baseline}",
        "",
        format_table(summaries),
    ]
    floor = above_floor(run.per_round, run.round_numbers, run.baseline)
    if floor:
        parts += [
            "",
            f"Above the floor (CPU per operation minus the floor client's in the same round; median and range "
            f"over rounds; ratio of the medians to {run.baseline}'s):",
            *(f"  {line}" for line in floor),
        ]
    targets = check_targets(summaries) if run.baseline == BASELINE else []
    if targets:
        parts += ["", "Targets (mongio against PyMongo async):", *(f"  {line}" for line in targets)]
    if run.skipped:
        parts += ["", *(f"{driver}: {reason}" for driver, reason in run.skipped.items())]
    if run.errors:
        parts += ["", "Errors:", *(f"  {line}" for line in run.errors)]
    return "\n".join(parts), summaries


def _split(text: str | None, allowed: Sequence[str], what: str) -> list[str]:
    if not text:
        return list(allowed)
    wanted = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in allowed]
    if unknown:
        raise SystemExit(f"unknown {what} {unknown}; choose from {', '.join(allowed)}")
    return wanted


_SPINNER = "import os\nos.nice(19)\nwhile True:\n    pass\n"


@contextlib.contextmanager
def busy_cores(count: int | None = None) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` (default: one per CPU) processes spinning at nice 19 for the length of the block, so that no
    CPU idles while the drivers wait for replies; they are killed and reaped when the block ends."""
    spinners: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count if count is not None else os.cpu_count() or 1):
            spinners.append(subprocess.Popen([sys.executable, "-c", _SPINNER]))
        yield spinners
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, help="rounds per driver (default 5; 2 with --quick)")
    parser.add_argument("--tasks", help=f"comma-separated subset of: {', '.join(TASKS)}")
    parser.add_argument(
        "--drivers", help=f"comma-separated subset of: {', '.join(DRIVERS)} (default all), and {FLOOR_DRIVER}"
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: few operations, 2 rounds")
    parser.add_argument("--json", type=Path, help="write the per-round numbers and the summary to this file")
    parser.add_argument(
        "--fresh-server-per-task",
        action="store_true",
        help="a fresh server for every task, not only per driver",
    )
    parser.add_argument(
        "--server",
        choices=("secantus", "loopback"),
        default="secantus",
        help="what the clients talk to: the test server (default), or the loopback responder, which answers "
        "every command at once so that the clients' own throughput is measured",
    )
    parser.add_argument(
        "--tracing",
        nargs="?",
        const=",".join(TRACING_MODES),
        metavar="MODES",
        help="compare mongio with OpenTelemetry tracing absent (API not importable), off, on (comma-separated "
        "subset, default all; ratios to the first) instead of the drivers",
    )
    parser.add_argument(
        "--busy-cores",
        action="store_true",
        help="keep every CPU busy with lowest-priority spinners, so idle-CPU wake-ups do not add to each round "
        "trip (see above)",
    )
    parser.add_argument(
        "--backends",
        action="store_true",
        help=f"compare mongio on trio ({TRIO_DRIVER}) with mongio on asyncio instead of the drivers (ratios to "
        f"asyncio's); default tasks: {', '.join(BACKEND_TASKS)}",
    )
    args = parser.parse_args(argv)
    tasks = parse_tasks(args.tasks)
    drivers = _split(args.drivers, (*DRIVERS, FLOOR_DRIVER), "driver(s)") if args.drivers else list(DRIVERS)
    if FLOOR_DRIVER in drivers:
        beyond = [task for task in tasks if task not in FLOOR_TASKS]
        if beyond:
            raise SystemExit(f"the floor client runs only {', '.join(FLOOR_TASKS)}, not {', '.join(beyond)}")
    baseline = BASELINE
    if args.tracing is not None:
        if args.drivers:
            raise SystemExit("--tracing compares mongio with itself: give it without --drivers")
        drivers = [f"mongio-tracing-{mode}" for mode in _split(args.tracing, TRACING_MODES, "tracing mode(s)")]
        baseline = drivers[0]
    if args.backends:
        if args.drivers or args.tracing is not None:
            raise SystemExit("--backends compares mongio on asyncio and trio: give it without --drivers or --tracing")
        drivers, baseline = ["mongio", TRIO_DRIVER], "mongio"
        tasks = tasks if args.tasks else [task for task in TASKS if task in BACKEND_TASKS]
        beyond = [task for task in tasks if task not in TRIO_TASKS]
        if beyond:
            raise SystemExit(f"{TRIO_DRIVER} runs only {', '.join(TRIO_TASKS)}, not {', '.join(beyond)}")
    if args.server == "loopback":
        # The responder stores nothing: find_many, which reads back what it inserted, cannot run against it.
        refused = [task for task in tasks if task not in LOOPBACK_TASKS]
        if refused and args.tasks:
            raise SystemExit(f"the loopback responder cannot serve {', '.join(refused)}: it stores nothing")
        tasks = [task for task in tasks if task in LOOPBACK_TASKS]
    rounds = args.rounds if args.rounds is not None else (2 if args.quick else 5)
    if rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    run = Run(
        drivers=drivers,
        baseline=baseline,
        tasks=tasks,
        rounds=rounds,
        quick=args.quick,
        fresh_server_per_task=args.fresh_server_per_task,
        server=args.server,
    )
    with tempfile.TemporaryDirectory(prefix="mongio-bench-data-") as data:
        extract_data(Path(data))
        with busy_cores() if args.busy_cores else contextlib.nullcontext():
            execute(run, Path(data))
    text, summaries = report(run)
    print(text)
    if args.json is not None:
        document = {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "rounds": run.rounds,
            "quick": run.quick,
            "fresh_server_per_task": args.fresh_server_per_task,
            "server": run.server,
            "busy_cores": args.busy_cores,
            "orders": run.orders,
            "versions": run.versions,
            "skipped": run.skipped,
            "errors": run.errors,
            "summary": [vars(row) for row in summaries],
            "rounds_raw": run.raw,
        }
        args.json.write_text(json.dumps(document, indent=1))


if __name__ == "__main__":
    main()
