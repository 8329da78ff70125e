"""mongio stands on its own: nothing under src/ imports another MongoDB driver's packages."""

from __future__ import annotations

import ast
from pathlib import Path

FORBIDDEN = {"pymongo", "bson", "motor", "gridfs", "mongojet"}
SOURCE = Path(__file__).resolve().parent.parent / "src"


def foreign_imports(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
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
    offenders = {str(path.relative_to(SOURCE)): hits for path in files if (hits := foreign_imports(path.read_text()))}
    assert offenders == {}
