"""The execution layer is kept in small functions: none in ``src/mongio/execution/`` is longer than
:data:`LIMIT` lines (its docstring included, from ``def`` to its last line), so each says one thing.

Run as a script to list the longest ones: ``python tests/unit/execution/test_execution_function_lengths.py``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

LIMIT = 60
EXECUTION = Path(__file__).resolve().parents[3] / "src" / "mongio" / "execution"


def function_lengths(source: str, filename: str) -> Iterator[tuple[str, int]]:
    """``(qualified name, lines)`` of every function and method defined in ``source``, nested ones included;
    a function's lines run from its ``def`` (its decorators left out) to its last line."""
    tree = ast.parse(source, filename)

    def visit(node: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                assert child.end_lineno is not None
                yield name, child.end_lineno - child.lineno + 1
                yield from visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                yield from visit(child, f"{prefix}{child.name}.")
            else:
                yield from visit(child, prefix)

    yield from visit(tree, "")


def execution_functions() -> list[tuple[int, str]]:
    """``(lines, "module.py:qualified name")`` of every function of the execution layer, longest first."""
    found = []
    for path in sorted(EXECUTION.glob("*.py")):
        for name, lines in function_lengths(path.read_text(encoding="utf-8"), str(path)):
            found.append((lines, f"{path.name}:{name}"))
    return sorted(found, reverse=True)


def test_the_counter_measures_from_def_to_last_line() -> None:
    source = "class A:\n    @staticmethod\n    def f():\n        x = 1\n\n        return x\n\nasync def g(): pass\n"
    assert dict(function_lengths(source, "<test>")) == {"A.f": 4, "g": 1}


def test_no_function_in_the_execution_layer_is_longer_than_the_limit() -> None:
    functions = execution_functions()
    assert len(functions) > 50, "the execution layer was not found"
    too_long = [f"{name}: {lines} lines" for lines, name in functions if lines > LIMIT]
    assert not too_long, f"functions over {LIMIT} lines:\n  " + "\n  ".join(too_long)


if __name__ == "__main__":
    for lines, name in execution_functions()[: int(sys.argv[1]) if len(sys.argv) > 1 else 15]:
        print(f"{lines:5d}  {name}")
