"""Test helpers live in helper modules: no test module imports from another test module (pytest may collect
the imported one twice, and a change to one test file silently breaks another), and every module named
``test_*.py`` holds tests."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imported_test_modules(source: str) -> list[str]:
    """The project's ``test_*`` modules a module imports from (by absolute name, anywhere in the file)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        else:
            continue
        found.extend(
            name for name in names if name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_")
        )
    return found


def defines_tests(source: str) -> bool:
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name.lower().startswith("test")
        for node in ast.walk(ast.parse(source))
    )


def test_the_checks_see_what_they_look_for() -> None:
    assert imported_test_modules("from tests.unit.connection.test_pool import make") == ["tests.unit.connection.test_pool"]
    assert imported_test_modules("def f():\n    import tests.integration.test_x as x") == ["tests.integration.test_x"]
    assert imported_test_modules("from tests.support.fake_pool import make_pool") == []
    assert imported_test_modules("from aiohttp.test_utils import TestClient") == []
    assert defines_tests("async def test_a() -> None: ...")
    assert not defines_tests("def make() -> None: ...")


def test_no_test_module_imports_another() -> None:
    offenders = {
        str(path.relative_to(TESTS)): imported
        for path in sorted(TESTS.rglob("*.py"))
        if (imported := imported_test_modules(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, "move the shared helpers to tests/support/"


def test_every_test_module_holds_tests() -> None:
    helpers_named_as_tests = [
        str(path.relative_to(TESTS))
        for path in sorted(TESTS.rglob("test_*.py"))
        if not defines_tests(path.read_text(encoding="utf-8"))
    ]
    assert helpers_named_as_tests == []
