"""mongio stands on its own: nothing under src/ imports another MongoDB driver's packages, except the opt-in
PyMongo-typed mode (``mongio/pymongo_types.py``), and that only inside functions, so importing mongio never
imports PyMongo."""

from __future__ import annotations

import ast
from pathlib import Path

FORBIDDEN = {"pymongo", "bson", "motor", "gridfs", "mongojet"}
SOURCE = Path(__file__).resolve().parent.parent / "src"
PYMONGO_TYPED_MODE = Path("mongio") / "pymongo_types.py"


def foreign_imports(source: str, *, lazy_allowed: bool = False) -> list[str]:
    tree = ast.parse(source)
    functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    inside_functions = {id(inner) for function in functions for inner in ast.walk(function)}
    found: list[str] = []
    for node in ast.walk(tree):
        if lazy_allowed and id(node) in inside_functions:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found.extend(name for name in names if name.split(".")[0] in FORBIDDEN)
    return found


def test_the_checker_sees_each_import_form() -> None:
    assert foreign_imports("import bson") == ["bson"]
    assert foreign_imports("from pymongo.errors import X") == ["pymongo.errors"]
    assert foreign_imports("if True:\n    import motor.motor_asyncio as m") == ["motor.motor_asyncio"]
    assert foreign_imports("from . import bson\nfrom mongio.bson import encode\nimport gridfsx") == []


def test_src_imports_no_other_driver() -> None:
    files = sorted(SOURCE.rglob("*.py"))
    assert files, f"no sources under {SOURCE}"
    offenders = {
        str(path.relative_to(SOURCE)): hits
        for path in files
        if (hits := foreign_imports(path.read_text(), lazy_allowed=path.relative_to(SOURCE) == PYMONGO_TYPED_MODE))
    }
    assert offenders == {}


def test_lazy_imports_are_allowed_only_where_asked() -> None:
    source = "def load():\n    import bson\n    return bson\n"
    assert foreign_imports(source) == ["bson"]
    assert foreign_imports(source, lazy_allowed=True) == []
    assert foreign_imports("import pymongo\n", lazy_allowed=True) == ["pymongo"]


def test_the_pymongo_typed_mode_imports_pymongo_lazily() -> None:
    source = (SOURCE / PYMONGO_TYPED_MODE).read_text()
    assert foreign_imports(source, lazy_allowed=True) == []
    assert set(foreign_imports(source)) >= {"bson", "pymongo.errors"}
