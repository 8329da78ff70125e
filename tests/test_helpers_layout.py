"""Test helpers live in helper modules: no test module imports from another test module (pytest may collect
the imported one twice, and a change to one test file silently breaks another), and every module named
``test_*.py`` holds tests. Every module of tests/unit and tests/integration sits in the folder its name gives
it (tests/layout.py), and no file names one where it used to be."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests import layout

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
    assert imported_test_modules("from tests.unit.connection.test_pool import make") == [
        "tests.unit.connection.test_pool"
    ]
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


def test_the_layout_places_a_module_by_its_name() -> None:
    assert layout.folder_for(layout.UNIT, "test_pool_anything.py") == "connection"
    assert layout.folder_for(layout.UNIT, "test_connection_pin.py") == "execution"  # an exception
    assert layout.folder_for(layout.INTEGRATION, "test_cluster_anything.py") == "cluster"
    with pytest.raises(layout.LayoutError, match=re.escape("no rule places test_nothing_known.py")):
        layout.folder_for(layout.UNIT, "test_nothing_known.py")
    folders = (layout.Folder("a", "", ("test_x*",)), layout.Folder("b", "", ("*_y.py",)))
    overlapping = layout.Tree("tests/t", folders)
    with pytest.raises(layout.LayoutError, match=re.escape("test_x_y.py matches the patterns of a, b")):
        layout.folder_for(overlapping, "test_x_y.py")


def test_the_layout_renames_paths_and_module_names_but_nothing_longer() -> None:
    renamed = layout.renames([layout.Move("tests/unit/api/test_x.py", "tests/unit/compat/test_x.py")])
    pattern = layout.reference_pattern(renamed)
    assert pattern is not None
    text = "tests/unit/test_x.py::t, tests/unit/api/test_x.py, tests.unit.test_x; "
    text += "tests/unit/test_x_y.py, tests.unit.test_xy"
    assert layout.renamed_in(text, renamed, pattern) == (
        "tests/unit/compat/test_x.py::t, tests/unit/compat/test_x.py, tests.unit.compat.test_x; "
        "tests/unit/test_x_y.py, tests.unit.test_xy"
    )


def test_a_moved_module_still_names_the_same_folders_from_its_own_place(tmp_path: Path) -> None:
    module = tmp_path / "test_m.py"
    module.write_text('ROOT = Path(__file__).resolve().parents[2] / "src"\nUP = Path(__file__).parents[0]\n')
    layout.shift_parents(module, 1)
    shifted = 'ROOT = Path(__file__).resolve().parents[3] / "src"\nUP = Path(__file__).parents[1]\n'
    assert module.read_text() == shifted


def test_every_test_module_sits_in_the_folder_its_name_gives_it() -> None:
    misplaced = [f"{move.source} belongs in {move.target}" for move in layout.misplaced(layout.REPO)]
    assert misplaced == [], "run python tests/layout.py"


def test_no_file_names_a_test_module_where_it_used_to_be() -> None:
    assert layout.stale_references(layout.REPO, layout.plan(layout.REPO)) == {}, "run python tests/layout.py"
