"""The port corpus: programs written for PyMongo's async API (and Motor) print the same under mongio.

Each program in ``tests/ports/programs`` is an ordinary script, ``python PROGRAM.py URI``, that prints
deterministic lines. It runs three times, each in a fresh interpreter:

- as written, under PyMongo (or Motor): the reference output;
- ported by :func:`port_source` (its imports changed, nothing else) under mongio;
- ported the same way, with ``pymongoTypes=true`` added to the connection string (the PyMongo-typed mode,
  which changes error classes process-wide, hence a process per run).

Both mongio runs must print exactly the reference output (a difference is shown as a diff) and write
nothing to standard error that the reference did not (a warning such as a coroutine never awaited, or an
option the client ignored, is a porting problem even when the output matches). A run that does not is a
strict xfail only when it fails exactly as its entry names (the exception the program ends on); any other
failure fails the test.
"""

from __future__ import annotations

import ast
import difflib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pytest

PROGRAMS = Path(__file__).resolve().parents[2] / "ports" / "programs"
pytestmark = pytest.mark.server

RUN_TIMEOUT_SECONDS = 60
TYPED_OPTION = "pymongoTypes=true"
MODES = ("mongio", "mongio-typed")

# The packages a ported program imports from instead: a module, or a module and everything below it.
MODULE_MAP = {"pymongo": "mongio", "gridfs": "mongio.gridfs"}
# Motor's classes and the mongio names that stand in for them (module, name).
MOTOR_NAMES = {
    "AsyncIOMotorClient": ("mongio", "AsyncMongoClient"),
    "AsyncIOMotorDatabase": ("mongio", "Database"),
    "AsyncIOMotorCollection": ("mongio", "Collection"),
    "AsyncIOMotorClientSession": ("mongio", "ClientSession"),
    "AsyncIOMotorGridFSBucket": ("mongio.gridfs", "AsyncGridFSBucket"),
}
MOTOR_MODULE = "motor.motor_asyncio"


class ExpectedPortFailure(Exception):
    """A run failed exactly as its entry below says: the one exception its strict xfail accepts, so any other
    failure (another crash, another difference, output on standard error) fails the test."""


@dataclass(frozen=True)
class KnownFailure:
    """Why a run does not print the reference output, and how it fails: the program ends on an exception
    whose first line is ``error``, and whose text holds ``detail`` when one is given."""

    reason: str
    error: str
    detail: str = ""


# Runs that do not print the reference output yet: features the runs need that mongio is gaining. Strict
# xfails, so each turns into a failure once it passes and its entry has to go.
PENDING: dict[tuple[str, str], KnownFailure] = {}
# Differences that remain once those features are in: by design, or not fixed yet.
BY_DESIGN_CLASSES = (
    "by design: without the typed mode documents decode to mongio.bson's classes, which isinstance checks "
    "against bson's classes ({}) refuse"
)
REMAINING: dict[tuple[str, str], KnownFailure] = {
    ("bson_values", "mongio"): KnownFailure(
        BY_DESIGN_CLASSES.format("and bson.json_util"),
        "TypeError: Object of type Regex is not JSON serializable",
    ),
    ("codec_options", "mongio"): KnownFailure(
        "by design: without the typed mode a TypeCodec keyed on bson.Decimal128 never sees mongio's Decimal128",
        "TypeError: unsupported operand type(s) for +: 'Decimal128' and 'decimal.Decimal'",
    ),
    ("fastapi_objectid", "mongio"): KnownFailure(
        BY_DESIGN_CLASSES.format("the PyObjectId validator's"),
        "pydantic_core._pydantic_core.ValidationError: 2 validation errors for Book",
        detail="Value error, not an ObjectId: ObjectId(",
    ),
}


def _mapped_module(module: str) -> str:
    top, dot, rest = module.partition(".")
    if top in MODULE_MAP:
        return MODULE_MAP[top] + dot + rest
    return module


def _ported_import(node: ast.Import | ast.ImportFrom) -> str | None:
    """The statement ``node`` becomes in the port, or None when it stays as written."""
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        if node.level == 0 and module == MOTOR_MODULE:
            lines = []
            for alias in node.names:
                target_module, target_name = MOTOR_NAMES[alias.name]
                lines.append(f"from {target_module} import {target_name} as {alias.asname or alias.name}")
            return "\n".join(lines)
        if node.level == 0 and _mapped_module(module) != module:
            return ast.unparse(ast.ImportFrom(module=_mapped_module(module), names=node.names, level=0))
        return None
    if not any(_mapped_module(alias.name) != alias.name for alias in node.names):
        return None
    statements = []
    for alias in node.names:
        mapped = _mapped_module(alias.name)
        if mapped == alias.name:
            statements.append(ast.unparse(ast.Import(names=[alias])))
        elif alias.asname is not None:
            statements.append(f"import {mapped} as {alias.asname}")
        elif "." in alias.name:
            # ``import pymongo.errors`` binds ``pymongo``: load the submodule, then bind the name to mongio's.
            top = alias.name.partition(".")[0]
            statements.extend([f"import {mapped}", f"import {_mapped_module(top)} as {top}"])
        else:
            # ``import pymongo`` keeps its name in the program: ``import mongio as pymongo``.
            statements.append(f"import {mapped} as {alias.name}")
    return "\n".join(statements)


def port_source(source: str) -> str:
    """The program with only its imports changed: ``pymongo`` -> ``mongio``, ``gridfs`` -> ``mongio.gridfs``,
    Motor's classes -> their mongio equivalents; ``bson`` and everything else stay as written."""
    lines = source.splitlines(keepends=True)
    replacements = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            ported = _ported_import(node)
            if ported is not None:
                assert node.end_lineno is not None
                replacements.append((node.lineno, node.end_lineno, node.col_offset, ported))
    for first, last, indent, ported in sorted(replacements, reverse=True):
        text = "".join(" " * indent + line + "\n" for line in ported.splitlines())
        lines[first - 1 : last] = [text]
    return "".join(lines)


def with_typed_mode(uri: str) -> str:
    """``uri`` with the PyMongo-typed mode turned on."""
    if "?" in uri:
        return f"{uri}&{TYPED_OPTION}"
    if uri.count("/") < 3:
        uri += "/"
    return f"{uri}?{TYPED_OPTION}"


class Run(NamedTuple):
    stdout: str
    stderr: str
    returncode: int = 0


def run_program(path: Path, uri: str) -> Run:
    """What the program printed, and how it exited."""
    completed = subprocess.run(
        [sys.executable, str(path), uri],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        env={**os.environ, "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"},
        check=False,
    )
    return Run(completed.stdout, completed.stderr, completed.returncode)


def final_exception(stderr: str) -> list[str]:
    """The lines of the exception a traceback on ``stderr`` ends with (its first line ``Type: message``), or
    none when there is no traceback."""
    lines = stderr.splitlines()
    starts = [
        index for index, line in enumerate(lines) if line.startswith("Traceback (most recent call last):")
    ]
    if not starts:
        return []
    rest = lines[starts[-1] + 1 :]
    for index, line in enumerate(rest):
        if line and not line[0].isspace():
            return rest[index:]
    return []


def port_problem(name: str, mode: str, expected: Run, actual: Run) -> str | None:
    """How the run differs from the reference (a crash, other output, anything on standard error), or None."""
    if actual.returncode != 0:
        return (
            f"{name} under {mode} exited with {actual.returncode}\n--- stdout\n{actual.stdout}"
            f"--- stderr\n{actual.stderr}"
        )
    if actual.stdout != expected.stdout:
        diff = difflib.unified_diff(
            expected.stdout.splitlines(), actual.stdout.splitlines(), "reference", mode, lineterm=""
        )
        return (
            f"{name} under {mode} printed differently:\n" + "\n".join(diff) + f"\n--- stderr\n{actual.stderr}"
        )
    if actual.stderr != expected.stderr:
        return f"{name} under {mode} wrote to standard error:\n{actual.stderr}"
    return None


def fails_as_known(actual: Run, known: KnownFailure) -> bool:
    """Whether the run ended on exactly the exception ``known`` names."""
    exception = final_exception(actual.stderr)
    return actual.returncode != 0 and exception[:1] == [known.error] and known.detail in "\n".join(exception)


def check_port(name: str, mode: str, expected: Run, actual: Run) -> None:
    """Pass when the run prints the reference output; raise :class:`ExpectedPortFailure` when it fails exactly
    as its known-failure entry says; fail the test on anything else."""
    problem = port_problem(name, mode, expected, actual)
    known = known_failure(name, mode)
    if problem is not None and known is not None and fails_as_known(actual, known):
        raise ExpectedPortFailure(f"{name} under {mode}: {known.error} ({known.reason})")
    if problem is not None:
        pytest.fail(problem, pytrace=False)


def known_failure(name: str, mode: str) -> KnownFailure | None:
    return PENDING.get((name, mode)) or REMAINING.get((name, mode))


def program_names() -> list[str]:
    return sorted(path.stem for path in PROGRAMS.glob("*.py"))


_reference_outputs: dict[str, Run] = {}


def reference_output(name: str, uri: str) -> Run:
    """The program's output as written (PyMongo or Motor), run once per test session."""
    if name not in _reference_outputs:
        run = run_program(PROGRAMS / f"{name}.py", uri)
        if run.returncode != 0:
            pytest.fail(
                f"{name}.py exited with {run.returncode}\n--- stdout\n{run.stdout}--- stderr\n{run.stderr}",
                pytrace=False,
            )
        _reference_outputs[name] = run
    return _reference_outputs[name]


def _port_cases() -> list[object]:
    cases: list[object] = []
    for name in program_names():
        for mode in MODES:
            known = known_failure(name, mode)
            marks = []
            if known is not None:
                reason = f"{known.reason}; fails with {known.error}"
                marks = [pytest.mark.xfail(strict=True, raises=ExpectedPortFailure, reason=reason)]
            cases.append(pytest.param(name, mode, marks=marks, id=f"{name}-{mode}"))
    return cases


@pytest.mark.parametrize("name", program_names())
def test_reference_run(name: str, server_uri: str) -> None:
    """The program runs under the driver it was written for and prints something to compare."""
    output = reference_output(name, server_uri).stdout
    assert output.count("\n") >= 5, f"{name} printed too little to compare:\n{output}"


@pytest.mark.parametrize(("name", "mode"), _port_cases())
def test_port_prints_the_same(name: str, mode: str, server_uri: str, tmp_path: Path) -> None:
    expected = reference_output(name, server_uri)
    ported = tmp_path / f"{name}.py"
    ported.write_text(port_source((PROGRAMS / f"{name}.py").read_text()))
    uri = with_typed_mode(server_uri) if mode == "mongio-typed" else server_uri
    check_port(name, mode, expected, run_program(ported, uri))


def test_port_changes_only_imports() -> None:
    source = (
        "import asyncio\n"
        "import pymongo\n"
        "from bson import ObjectId\n"
        "from pymongo import AsyncMongoClient, monitoring\n"
        "from pymongo.errors import (\n"
        "    BulkWriteError,\n"
        "    DuplicateKeyError,\n"
        ")\n"
        "from gridfs import AsyncGridFSBucket, NoFile\n"
        "from motor.motor_asyncio import AsyncIOMotorClient, AsyncIOMotorGridFSBucket as Bucket\n"
        "def f():\n"
        "    import gridfs.errors\n"
        "    return pymongo.timeout(1), 'from pymongo import x'\n"
    )
    assert port_source(source) == (
        "import asyncio\n"
        "import mongio as pymongo\n"
        "from bson import ObjectId\n"
        "from mongio import AsyncMongoClient, monitoring\n"
        "from mongio.errors import BulkWriteError, DuplicateKeyError\n"
        "from mongio.gridfs import AsyncGridFSBucket, NoFile\n"
        "from mongio import AsyncMongoClient as AsyncIOMotorClient\n"
        "from mongio.gridfs import AsyncGridFSBucket as Bucket\n"
        "def f():\n"
        "    import mongio.gridfs.errors\n"
        "    import mongio.gridfs as gridfs\n"
        "    return pymongo.timeout(1), 'from pymongo import x'\n"
    )


def test_every_expected_failure_names_a_run() -> None:
    runs = {(name, mode) for name in program_names() for mode in MODES}
    assert set(PENDING) | set(REMAINING) <= runs


REFERENCE = Run("ids: 3\nsum: 6\n", "")


def crashed(exception: str) -> Run:
    return Run(
        "ids: 3\n",
        f'Traceback (most recent call last):\n  File "p.py", line 9, in <module>\n{exception}\n',
        1,
    )


def test_a_known_failure_is_accepted_only_as_named() -> None:
    """The strict xfails accept their named crash and nothing else: another exception, the right one with other
    detail, other output or a warning on standard error fail the test."""
    known = KnownFailure("by design", "TypeError: no sum of Decimal128", detail="field total")
    REMAINING[("sums", "mongio")] = known
    try:
        with pytest.raises(ExpectedPortFailure):
            check_port("sums", "mongio", REFERENCE, crashed("TypeError: no sum of Decimal128\n  field total"))
        failures = [
            crashed("KeyError: 'total'"),
            crashed("TypeError: no sum of Decimal128\n  field count"),
            Run("ids: 3\nsum: 7\n", ""),
            Run(REFERENCE.stdout, "RuntimeWarning: coroutine 'find' was never awaited\n"),
        ]
        for run in failures:
            with pytest.raises(pytest.fail.Exception):
                check_port("sums", "mongio", REFERENCE, run)
        check_port(
            "sums", "mongio", REFERENCE, REFERENCE
        )  # an xfail that passes: strict turns it into a failure
    finally:
        del REMAINING[("sums", "mongio")]
    with pytest.raises(pytest.fail.Exception):
        check_port("sums", "mongio", REFERENCE, crashed("TypeError: no sum of Decimal128\n  field total"))


def test_final_exception_reads_the_last_traceback() -> None:
    stderr = (
        'Traceback (most recent call last):\n  File "a", line 1\nValueError: first\n\n'
        "During handling of the above exception, another exception occurred:\n\n"
        'Traceback (most recent call last):\n  File "a", line 2\n    raise X\nmod.Error: 2 errors\n  detail\n'
    )
    assert final_exception(stderr) == ["mod.Error: 2 errors", "  detail"]
    assert final_exception("a warning\n") == []
