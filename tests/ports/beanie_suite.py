"""Beanie's own test suite, once through PyMongo async and once through mongio, each on a fresh SecantusDB.

    python tests/ports/beanie_suite.py [--beanie 2.1.0] [--workdir build/beanie] [-k EXPR]

Not part of ``make test``: it installs Beanie's test requirements into a virtual environment of its own
(``WORKDIR/venv``, made on first use with mongio installed from this checkout), unpacks Beanie's source
distribution (which carries its tests) twice, and changes only what the comparison needs:

- both copies: text indexes in Beanie's test models become ascending ones, since SecantusDB has no text
  indexes (the same change for both drivers, so the tallies stay comparable);
- the mongio copy: the session fixture's ``AsyncMongoClient`` comes from ``mongio`` instead of ``pymongo``,
  and the connection string it is given carries ``pymongoTypes=true`` (the PyMongo-typed mode Beanie, typed
  against PyMongo's classes, needs). The settings' DSN itself stays as it is: some of Beanie's tests build
  PyMongo clients of their own from it, and PyMongo refuses an option it does not know.

Each copy runs against its own fresh SecantusDB; the script prints both tallies and the tests whose outcome
differs between the drivers, and writes both JUnit reports under WORKDIR.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TEST_PATHS = ["tests/odm", "tests/fastapi", "tests/migrations", "tests/test_beanie.py"]
# Beanie's [test] extra without its linters, type checker and coverage plugin, which the run does not use.
TEST_REQUIREMENTS = [
    "pytest>=9.0.0",
    "pytest-asyncio>=1.3.0",
    "dnspython>=2.1.0",
    "asgi-lifespan>=1.0.1",
    "httpx>=0.23.0",
    "fastapi<0.130.0",
    "pydantic-settings>=2",
    "pydantic-extra-types>=2",
    "pydantic[email]",
    "time-machine>=3.2.0",
]
OUTCOMES = ("passed", "failed", "error", "skipped")


def _run(*cmd: str | Path, **kwargs: object) -> None:
    subprocess.run([str(c) for c in cmd], check=True, **kwargs)  # type: ignore[call-overload]


def ensure_venv(workdir: Path, beanie_version: str) -> Path:
    """The suite's own environment: mongio from this checkout, Beanie and its test requirements."""
    venv = workdir / "venv"
    python = venv / "bin" / "python"
    stamp = venv / f".installed-beanie-{beanie_version}"
    if stamp.exists():
        return python
    _run(sys.executable, "-m", "venv", venv)
    _run(python, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    _run(python, "-m", "pip", "install", "--quiet", "-e", f"{REPO}[server]", f"beanie=={beanie_version}",
         *TEST_REQUIREMENTS)
    stamp.touch()
    return python


def unpack_sources(workdir: Path, python: Path, beanie_version: str) -> Path:
    """Beanie's source distribution (its tests are only there), downloaded once and unpacked fresh."""
    archive = workdir / f"beanie-{beanie_version}.tar.gz"
    if not archive.exists():
        _run(python, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
             f"beanie=={beanie_version}", "-d", workdir)
    return archive


def prepare_copy(archive: Path, target: Path, *, driver: str) -> Path:
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    (root,) = target.iterdir()
    for models in root.glob("tests/**/*.py"):
        text = models.read_text(encoding="utf-8")
        ascending = text.replace("pymongo.TEXT", "pymongo.ASCENDING")
        if ascending != text:
            models.write_text(ascending, encoding="utf-8")
    if driver == "mongio":
        conftest = root / "tests" / "conftest.py"
        text = conftest.read_text(encoding="utf-8")
        switched = text.replace(
            "from pymongo import AsyncMongoClient", "from mongio import AsyncMongoClient"
        ).replace("AsyncMongoClient(settings.mongodb_dsn)", 'AsyncMongoClient(settings.mongodb_dsn + "?pymongoTypes=true")')
        if switched.count("mongio") != 1 or "pymongoTypes" not in switched:
            raise SystemExit(f"{conftest}: the AsyncMongoClient fixture to switch was not found")
        conftest.write_text(switched, encoding="utf-8")
    # The package under test is the installed Beanie of the same version; the copy's own ``beanie``
    # directory would shadow it identically, so it is left in place.
    return root


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def fresh_server(python: Path) -> Iterator[str]:
    """A SecantusDB replica-set primary with its data in memory, on a free loopback port."""
    port = _free_port()
    program = python.parent / "secantusd-py"
    process = subprocess.Popen(
        [str(program), "--host", "127.0.0.1", "--port", str(port), "--storage-path", ":memory:",
         "--enable-test-commands"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"SecantusDB did not start on port {port}")
            time.sleep(0.2)
        yield f"mongodb://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_suite(python: Path, root: Path, uri: str, *, driver: str, report: Path, select: str | None) -> None:
    env = dict(os.environ, MONGODB_DSN=f"{uri}/beanie_db", MONGODB_DB_NAME="beanie_db")
    cmd = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
           f"--junitxml={report}", *TEST_PATHS]
    if select:
        cmd += ["-k", select]
    print(f"== {driver}: {' '.join(cmd[3:])}", flush=True)
    subprocess.run(cmd, cwd=root, env=env, check=False)


def outcomes(report: Path) -> dict[str, str]:
    """Test id -> passed / failed / error / skipped, from a JUnit report."""
    results: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed"}.get(child.tag, child.tag)
        results[test_id] = outcome
    return results


def tally(results: dict[str, str]) -> str:
    counts = {name: 0 for name in OUTCOMES}
    for outcome in results.values():
        counts[outcome] += 1
    return ", ".join(f"{counts[name]} {name}" for name in OUTCOMES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--beanie", default="2.1.0", help="Beanie version (default 2.1.0)")
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "beanie")
    parser.add_argument("-k", dest="select", help="pytest -k expression, to run part of the suite")
    args = parser.parse_args()
    workdir: Path = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    python = ensure_venv(workdir, args.beanie)
    archive = unpack_sources(workdir, python, args.beanie)
    results: dict[str, dict[str, str]] = {}
    for driver in ("pymongo", "mongio"):
        root = prepare_copy(archive, workdir / driver, driver=driver)
        report = workdir / f"{driver}.xml"
        with fresh_server(python) as uri:
            run_suite(python, root, uri, driver=driver, report=report, select=args.select)
        results[driver] = outcomes(report)
    print()
    for driver, found in results.items():
        print(f"{driver:8} {tally(found)}")
    differing = sorted(
        (test_id, results["pymongo"].get(test_id, "-"), results["mongio"].get(test_id, "-"))
        for test_id in results["pymongo"].keys() | results["mongio"].keys()
        if results["pymongo"].get(test_id) != results["mongio"].get(test_id)
    )
    print(f"\n{len(differing)} tests differ (pymongo -> mongio):")
    for test_id, before, after in differing:
        shown = re.sub(r"^tests\.", "", test_id)
        print(f"  {before:7} -> {after:7} {shown}")


if __name__ == "__main__":
    main()
