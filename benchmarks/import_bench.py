"""Import time: ``import mongio`` against ``import pymongo``, each in a fresh interpreter.

    .venv/bin/python -m benchmarks.import_bench [--runs 21] [--modules pymongo,mongio] [--no-compile]

Each run starts a new Python process that imports one package and prints how long the ``import`` statement took,
as elapsed time (``import``: ``time.perf_counter`` around it, so interpreter start-up is not counted) and as the
CPU time the process spent in it (``import-cpu``: ``time.process_time``, which other programs busy on the same
cores disturb far less); the wall time of the whole process (``process``) is recorded beside them. Runs alternate between the packages (``pymongo, mongio, pymongo, ...``, the first package
changing each run) so that a slower or faster stretch of the machine falls on both. Before the runs the packages'
sources are compiled (``compileall``) and ``PYTHONDONTWRITEBYTECODE`` is removed from the children's environment,
so both import from cached bytecode as an installed package does.

The table shows the median over runs with min-max beside it, and mongio's ratio to PyMongo's median.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

BASELINE = "pymongo"
MODULES = ("pymongo", "mongio")
PROBE = (
    "import time; w, c = time.perf_counter(), time.process_time(); import {module}; "
    "print(time.perf_counter() - w, time.process_time() - c)"
)
MEASURES = ("import", "import-cpu", "process")


def package_directory(module: str) -> Path:
    """The directory of an importable package, without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise SystemExit(f"{module} is not importable")
    return Path(spec.origin).parent


def compile_packages(modules: Sequence[str]) -> None:
    """Write bytecode for the packages (and PyMongo's bson), as an installed package has it."""
    names = {*modules, "bson"} if BASELINE in modules else set(modules)
    for name in sorted(names):
        compileall.compile_dir(package_directory(name), quiet=1)


def child_environment() -> dict[str, str]:
    """This process's environment without the switch that stops Python reading and writing bytecode."""
    environment = dict(os.environ)
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    return environment


def import_once(module: str, environment: dict[str, str]) -> dict[str, float]:
    """Import ``module`` in a fresh interpreter: seconds per measure (see the module's docstring)."""
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module)],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - started
    elapsed, cpu = (float(value) for value in completed.stdout.split())
    return {"import": elapsed, "import-cpu": cpu, "process": wall}


def interleaved_order(modules: Sequence[str], run: int) -> list[str]:
    """The modules rotated by ``run`` places, so each one goes first in turn."""
    shift = run % len(modules)
    return [*modules[shift:], *modules[:shift]]


def measure(modules: Sequence[str], runs: int) -> dict[str, dict[str, list[float]]]:
    """``runs`` interleaved imports of each module: per module and measure, the seconds of every run."""
    environment = child_environment()
    samples: dict[str, dict[str, list[float]]] = {name: {measure: [] for measure in MEASURES} for name in modules}
    for run in range(runs):
        for module in interleaved_order(modules, run):
            for measure, seconds in import_once(module, environment).items():
                samples[module][measure].append(seconds)
    return samples


def table(samples: dict[str, dict[str, list[float]]]) -> str:
    """Median (min-max) in milliseconds per module and measure, and each median's ratio to PyMongo's."""
    lines = [f"{'module':<10} {'measure':<10} {'median ms':>10} {'min-max ms':>16} {'ratio':>7}"]
    for module, measures in samples.items():
        for measure_name, values in measures.items():
            median = statistics.median(values)
            baseline = samples.get(BASELINE, {}).get(measure_name)
            ratio = f"{median / statistics.median(baseline):7.2f}" if baseline else f"{'-':>7}"
            spread = f"{min(values) * 1e3:.1f}-{max(values) * 1e3:.1f}"
            lines.append(f"{module:<10} {measure_name:<10} {median * 1e3:10.1f} {spread:>16} {ratio}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--modules", default=",".join(MODULES))
    parser.add_argument("--no-compile", action="store_true", help="use whatever bytecode is already written")
    arguments = parser.parse_args(argv)
    modules = [name for name in arguments.modules.split(",") if name]
    if not arguments.no_compile:
        compile_packages(modules)
    print(table(measure(modules, arguments.runs)))


if __name__ == "__main__":
    main()
